// Package orchestratetest runs in-process orchestrators that answer the
// endpoints package orchestrate calls, with the response shapes of the
// real systems: a Dagster webserver (GraphQL), the Airflow 2 stable REST
// API, the dbt Cloud v2 API and AWS Step Functions (AWS JSON 1.0). Runs
// move from queued through running to an outcome as their status is read,
// so a poller sees them progress. Tests use them, and so does the demo.
//
// Every server can drop the answer to its next triggers (the request is
// carried out, the answer is held until the client gives up), which is how
// a lost response is reproduced.
package orchestratetest

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"time"
)

// Outcome is how a run ends.
type Outcome struct {
	// Fail ends the run in failure instead of success.
	Fail bool
	// Polls is how many status reads still show the run in progress (the
	// first of them queued, the others running); the read after them
	// shows the outcome.
	Polls int
	// Message is the failure message the system reports.
	Message string
}

// DefaultOutcome is a run that succeeds on the third status read.
var DefaultOutcome = Outcome{Polls: 2}

// phase is where a run stands after some status reads.
type phase int

const (
	phaseQueued phase = iota
	phaseRunning
	phaseSucceeded
	phaseFailed
)

// run is one run any of the servers started.
type run struct {
	id      string
	target  string
	key     string // the idempotency name the client sent (dag_run_id, execution name, tag, cause)
	input   string
	cause   string
	created time.Time
	started time.Time
	ended   time.Time
	reads   int
	outcome Outcome
	seq     int64
}

// read advances a run by one status read and returns its phase.
func (r *run) read(now time.Time) phase {
	r.reads++
	return r.phase(now)
}

// phase is the run's phase without reading it.
func (r *run) phase(now time.Time) phase {
	switch {
	case r.reads == 0, r.reads == 1 && r.outcome.Polls >= 1:
		return phaseQueued
	case r.reads <= r.outcome.Polls:
		if r.started.IsZero() {
			r.started = now
		}
		return phaseRunning
	}
	if r.started.IsZero() {
		r.started = now
	}
	if r.ended.IsZero() {
		r.ended = now
	}
	if r.outcome.Fail {
		return phaseFailed
	}
	return phaseSucceeded
}

// core holds what every fake server shares: its runs, the outcomes
// planned per target, and the answers to hold back.
type core struct {
	mu       sync.Mutex
	runs     []*run
	outcomes map[string]Outcome
	held     int
	holdFor  time.Duration
	triggers int
	seq      int64
}

func newCore() *core { return &core{outcomes: map[string]Outcome{}} }

// SetOutcome plans how the next runs of target end.
func (c *core) SetOutcome(target string, o Outcome) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.outcomes[target] = o
}

// DropNextAnswers makes the next n triggers take effect but hold their
// answer for d (or until the client hangs up): with a client timeout
// shorter than d the answer is lost.
func (c *core) DropNextAnswers(n int, d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.held, c.holdFor = n, d
}

// Triggers counts the runs started so far (a trigger that found its run
// already started does not count).
func (c *core) Triggers() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.triggers
}

// TriggersOf counts the runs started for one target.
func (c *core) TriggersOf(target string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, r := range c.runs {
		if r.target == target {
			n++
		}
	}
	return n
}

// newRun records a started run; the caller holds mu.
func (c *core) newRun(id, target, key string) *run {
	o, ok := c.outcomes[target]
	if !ok {
		o = DefaultOutcome
	}
	c.seq++
	r := &run{id: id, target: target, key: key, created: time.Now().UTC(), outcome: o, seq: c.seq}
	c.runs = append(c.runs, r)
	c.triggers++
	return r
}

// holdAnswer blocks while a dropped answer is due; it reports false when
// the client hung up, so the handler writes nothing.
func (c *core) holdAnswer(req *http.Request) bool {
	c.mu.Lock()
	hold := c.held > 0
	d := c.holdFor
	if hold {
		c.held--
	}
	c.mu.Unlock()
	if !hold {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-req.Context().Done():
		return false
	case <-t.C:
		return true
	}
}

func (c *core) findRun(match func(*run) bool) *run {
	for i := len(c.runs) - 1; i >= 0; i-- {
		if match(c.runs[i]) {
			return c.runs[i]
		}
	}
	return nil
}

// newUUID is a random RFC 4122 version 4 id, as Dagster gives runs.
func newUUID() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(fmt.Sprintf("orchestratetest: no randomness: %v", err))
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
