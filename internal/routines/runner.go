package routines

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/dataworkers/dw/internal/clock"
	"github.com/dataworkers/dw/internal/config"
	"github.com/dataworkers/dw/internal/lineage"
	"github.com/dataworkers/dw/internal/store"
	"github.com/dataworkers/dw/internal/warehouse"
)

// Options configure a Runner. dw watch builds them from its one
// internal/deps (the store, the held graph, the warehouses and clients);
// this package never builds them itself.
type Options struct {
	DB     *store.DB
	Config *config.Config
	// Graph is the context graph over DB: owners to tell, blast radius
	// for proposals, connector tables resolved.
	Graph *lineage.Graph
	// Clock is the time routines judge by (DW_CLOCK, or --at for a
	// replay); default the system clock.
	Clock clock.Clock
	// Wall is the real time leases are measured in; default the system
	// clock. Tests move it to expire a lease without waiting.
	Wall clock.Clock
	// Warehouse opens a configured warehouse by name ("" the first).
	Warehouse func(ctx context.Context, name string) (warehouse.Warehouse, error)
	// Sources reach the streaming systems; nil members mean not configured.
	Sources Sources
	// Notifier posts to Slack; nil means Slack is not configured and runs
	// record who would have been told.
	Notifier Notifier
	// Watcher names this process in the store (default host:pid).
	Watcher string
	// Lease is how long a run's claim lives without a heartbeat (default
	// 30s); a watcher killed mid-run loses its routine after this.
	Lease time.Duration
	// Parallel bounds the runs in flight at once (default 8: runs mostly
	// wait on the warehouse and the store, so 8 finish 200 routines on two
	// cores in well under a minute; see BenchmarkTwoHundredRoutinesInOneMinute).
	Parallel int
	// Grace is how long a stopping watcher lets runs in flight finish
	// before cancelling them (default 20s).
	Grace time.Duration
	Log   *slog.Logger
}

// Runner runs routines when they fall due.
type Runner struct {
	o        Options
	routines []*routine
	graph    *lineage.Graph
	sem      chan struct{}

	mu      sync.Mutex
	running map[string]bool
}

type routine struct {
	cfg   config.Routine
	sched Schedule
}

// Routines are the routines a configuration watches: its own, or on the
// embedded default (which has no file to write them in) the demo's.
func Routines(cfg *config.Config) []config.Routine {
	if len(cfg.Routines) == 0 && cfg.EmbeddedDefault() {
		return config.DemoRoutines()
	}
	return cfg.Routines
}

// New prepares a runner; nothing runs until RunDue or Watch.
func New(o Options) (*Runner, error) {
	if o.DB == nil || o.Config == nil || o.Graph == nil {
		return nil, errors.New("routines: a runner needs a store, a configuration and the context graph")
	}
	if o.Clock == nil {
		o.Clock = clock.System{}
	}
	if o.Wall == nil {
		o.Wall = clock.System{}
	}
	if o.Watcher == "" {
		host, _ := os.Hostname()
		o.Watcher = fmt.Sprintf("%s:%d", host, os.Getpid())
	}
	if o.Lease <= 0 {
		o.Lease = 30 * time.Second
	}
	if o.Parallel <= 0 {
		o.Parallel = 8
	}
	if o.Grace <= 0 {
		o.Grace = 20 * time.Second
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	r := &Runner{o: o, graph: o.Graph, sem: make(chan struct{}, o.Parallel), running: map[string]bool{}}
	for _, rc := range Routines(o.Config) {
		s, err := ParseSchedule(rc)
		if err != nil {
			return nil, err
		}
		r.routines = append(r.routines, &routine{cfg: rc, sched: s})
	}
	return r, nil
}

// Count is how many routines the runner watches.
func (r *Runner) Count() int { return len(r.routines) }

type dueRun struct {
	rt  *routine
	due Due
}

// due lists the routines due at now that this process is not running.
func (r *Runner) due(ctx context.Context, since, now time.Time) ([]dueRun, error) {
	lasts, err := lastTicks(ctx, r.o.DB)
	if err != nil {
		return nil, err
	}
	var out []dueRun
	for _, rt := range r.routines {
		d := DueAt(rt.sched, lasts[rt.cfg.Name], since, now)
		if d.Tick.IsZero() {
			continue
		}
		out = append(out, dueRun{rt: rt, due: d})
	}
	return out, nil
}

// RunDue runs, once, every routine due at the clock's now and waits for
// them: `dw watch --once`. A routine that never ran is due only for a
// tick at or after since; one that ran catches up once for its latest
// tick. Routines another watcher is running, or has run for that tick,
// are left out of the result.
func (r *Runner) RunDue(ctx context.Context, since time.Time) ([]*Run, error) {
	due, err := r.due(ctx, since, r.o.Clock.Now())
	if err != nil {
		return nil, err
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	runs := []*Run{}
	for _, d := range due {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if run := r.start(ctx, ctx, d); run != nil {
				mu.Lock()
				runs = append(runs, run)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	sort.Slice(runs, func(i, j int) bool { return runs[i].Routine < runs[j].Routine })
	return runs, nil
}

// pollEvery bounds how long Watch sleeps between looks at the schedule,
// so a clock moved by DW_CLOCK or a routine freed by another watcher is
// noticed soon.
const pollEvery = 15 * time.Second

// Watch runs routines as they fall due until ctx is done, then lets runs
// in flight finish for the grace period and cancels the rest (recorded as
// canceled). It returns nil on a clean stop.
func (r *Runner) Watch(ctx context.Context) error {
	since := r.o.Clock.Now()
	r.o.Log.Info("watching", "routines", len(r.routines), "watcher", r.o.Watcher, "since", since.Format(time.RFC3339))
	// Runs get their own context so a stop signal lets them finish.
	runCtx, cancelRuns := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelRuns()
	var wg sync.WaitGroup
	for {
		now := r.o.Clock.Now()
		due, err := r.due(ctx, since, now)
		if err != nil && ctx.Err() == nil {
			r.o.Log.Warn("read the schedule from the store", "err", err)
		}
		for _, d := range due {
			if r.busy(d.rt.cfg.Name) {
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				r.start(ctx, runCtx, d)
			}()
		}
		wait := pollEvery
		for _, rt := range r.routines {
			if w := rt.sched.Next(now).Sub(now); w < wait {
				wait = w
			}
		}
		select {
		case <-ctx.Done():
			r.o.Log.Info("stopping: letting runs in flight finish", "grace", r.o.Grace.String())
			done := make(chan struct{})
			go func() { wg.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(r.o.Grace):
				r.o.Log.Warn("grace period over: cancelling runs in flight")
				cancelRuns()
				<-done
			}
			r.o.Log.Info("stopped")
			return nil
		case <-time.After(max(wait, 200*time.Millisecond)):
		}
	}
}

// busy reports whether this process is running the routine.
func (r *Runner) busy(name string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.running[name]
}

// start claims a due tick and runs it; nil when the tick was not ours
// (another watcher has it, or a run of the routine is still going).
// stopCtx stops new work from starting; runCtx is the run's own.
func (r *Runner) start(stopCtx, runCtx context.Context, d dueRun) *Run {
	name := d.rt.cfg.Name
	r.mu.Lock()
	if r.running[name] {
		r.mu.Unlock()
		return nil
	}
	r.running[name] = true
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		delete(r.running, name)
		r.mu.Unlock()
	}()
	select {
	case r.sem <- struct{}{}:
	case <-stopCtx.Done():
		return nil
	}
	defer func() { <-r.sem }()
	if stopCtx.Err() != nil {
		return nil
	}
	log := r.o.Log.With("routine", name, "tick", d.due.Tick.Format(time.RFC3339))
	started := r.o.Clock.Now()
	id, busy, err := claim(runCtx, r.o.DB, name, d.due.Tick, r.o.Watcher, d.due.Missed, started, r.o.Wall.Now(), r.o.Lease)
	if err != nil {
		log.Error("claim the run", "err", err)
		return nil
	}
	if busy != "" {
		// Another watcher ran this tick (normal with several watchers);
		// a run still in progress holding the routine is worth saying.
		if strings.Contains(busy, "in progress") {
			log.Info("not running yet", "why", busy)
		} else {
			log.Debug("not running", "why", busy)
		}
		return nil
	}
	if d.due.Missed > 0 {
		log.Info("catching up once after downtime", "missed_ticks", d.due.Missed)
	}
	run := &Run{ID: id, Routine: name, Tick: d.due.Tick, Watcher: r.o.Watcher, Status: StatusRunning, Missed: d.due.Missed,
		Started: started, Findings: []Finding{}, Incidents: []Incident{}, Notified: []Notified{}, Proposals: []Proposal{}}
	r.execute(runCtx, log, d.rt, run)
	return run
}

// execute runs a claimed run under its lease and records the outcome.
func (r *Runner) execute(parent context.Context, log *slog.Logger, rt *routine, run *Run) {
	timeout := rt.cfg.Timeout
	if timeout <= 0 {
		timeout = 10 * time.Minute
	}
	ctx, cancel := context.WithTimeout(parent, timeout)
	defer cancel()
	lost := make(chan struct{})
	hbDone := make(chan struct{})
	go func() {
		defer close(hbDone)
		t := time.NewTicker(max(r.o.Lease/3, 10*time.Millisecond))
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				err := renew(context.WithoutCancel(ctx), r.o.DB, run.ID, r.o.Watcher, r.o.Wall.Now().Add(r.o.Lease))
				if errors.Is(err, errLeaseLost) {
					close(lost)
					cancel()
					return
				}
				if err != nil {
					log.Warn("renew the run's lease", "err", err)
				}
			}
		}
	}()
	log.Info("run started")
	obs := r.observe(ctx, rt.cfg)
	cancel()
	<-hbDone
	run.Findings, run.Incidents, run.Notified, run.Proposals = obs.findings, obs.incidents, obs.notified, obs.proposals
	run.Finished = r.o.Clock.Now()
	select {
	case <-lost:
		run.Status, run.Error = StatusLost, errLeaseLost.Error()
		log.Warn("run lost its lease; another watcher owns the routine now")
		return
	default:
	}
	switch {
	case parent.Err() != nil:
		run.Status, run.Error = StatusCanceled, "the watcher was stopped before the run finished"
	case len(obs.errs) > 0 && obs.timedOut:
		run.Status, run.Error = StatusFailed, fmt.Sprintf("the run took longer than its timeout (%s)", timeout)
	case len(obs.errs) > 0:
		run.Status, run.Error = StatusFailed, strings.Join(obs.errs, "; ")
	case len(run.Incidents) > 0:
		run.Status = StatusFlagged
	default:
		run.Status = StatusOK
	}
	run.Summary = summarize(run)
	fctx, fcancel := context.WithTimeout(context.WithoutCancel(parent), 15*time.Second)
	defer fcancel()
	if err := finish(fctx, r.o.DB, run); err != nil {
		if errors.Is(err, errLeaseLost) {
			run.Status, run.Error = StatusLost, err.Error()
		}
		log.Error("record the run", "err", err)
		return
	}
	log.Info("run finished", "status", run.Status, "incidents", len(run.Incidents), "notified", len(run.Notified),
		"took", run.Finished.Sub(run.Started).Round(time.Millisecond).String())
}

// summarize says what a run saw in one line.
func summarize(run *Run) string {
	problems, changed, errs := 0, 0, 0
	for _, f := range run.Findings {
		switch f.Status {
		case "problem":
			problems++
		case "changed":
			changed++
		case "error":
			errs++
		}
	}
	var parts []string
	parts = append(parts, fmt.Sprintf("%d observation(s)", len(run.Findings)))
	if problems > 0 {
		parts = append(parts, fmt.Sprintf("%d with problems", problems))
	}
	if changed > 0 {
		parts = append(parts, fmt.Sprintf("%d change(s) recorded", changed))
	}
	if errs > 0 {
		parts = append(parts, fmt.Sprintf("%d failed", errs))
	}
	s := strings.Join(parts, ", ")
	if n := len(run.Incidents); n > 0 {
		ids := make([]string, n)
		for i, inc := range run.Incidents {
			verb := "joined"
			if inc.Opened {
				verb = "opened"
			}
			ids[i] = verb + " " + inc.ID
		}
		s += "; " + strings.Join(ids, ", ")
	} else if errs == 0 {
		s += "; all quiet"
	}
	if run.Missed > 0 {
		s += fmt.Sprintf("; caught up once for %d missed tick(s)", run.Missed)
	}
	return s
}
