// Package flinktest is an in-process Flink JobManager: an httptest server
// answering GET /jobs, /jobs/overview, /jobs/{jobid}/checkpoints and
// /jobs/{jobid}/exceptions from job state held in memory. Tests use it, and
// so does the demo, which starts it in-process.
//
// No public capture of a real answer to these endpoints exists (Flink's
// repository holds only their schemas; see /work/shared/data/README.md), so
// the answers are built from Flink's own REST snapshot schema
// (rest_api_v1.snapshot), and the package's tests hold every answer to it.
package flinktest

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/dataworkers/dw/internal/flink"
)

// HistorySize is how many checkpoints the answer's history lists, Flink's
// default web.checkpoints.history.
const HistorySize = 10

// DefaultMaxExceptions is how many root exceptions /exceptions returns when
// the request does not say, as Flink's handler does.
const DefaultMaxExceptions = 20

// Job is a job to add.
type Job struct {
	ID      string // 32 lowercase hex characters; derived from Name when empty
	Name    string
	State   string // RUNNING when empty
	JobType string // STREAMING when empty
	Start   time.Time
	Tasks   int // parallel tasks, all in the job's state
}

// Checkpoint is a checkpoint or savepoint to add to a job's history.
type Checkpoint struct {
	ID             int64 // next id when zero
	Status         string
	Savepoint      bool
	Trigger        time.Time
	Duration       time.Duration
	Size           int64 // checkpointed and state size, bytes
	ExternalPath   string
	FailureMessage string
}

type job struct {
	details    flink.JobDetails
	history    []flink.CheckpointStatistics // oldest first
	restores   int64
	restored   *flink.RestoredCheckpointStatistics
	exceptions []flink.RootExceptionInfo // newest first
}

// Server is a fake JobManager. Its methods are safe for concurrent use.
type Server struct {
	srv  *httptest.Server
	mu   sync.Mutex
	jobs map[string]*job
}

// NewServer starts a JobManager with no jobs.
func NewServer() *Server {
	s := &Server{jobs: map[string]*job{}}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	return s
}

// URL is the JobManager's base URL.
func (s *Server) URL() string { return s.srv.URL }

// Close stops the JobManager.
func (s *Server) Close() { s.srv.Close() }

var jobIDPattern = regexp.MustCompile(`^[0-9a-f]{32}$`)

var jobStates = []string{"INITIALIZING", "CREATED", "RUNNING", "FAILING", "FAILED", "CANCELLING", "CANCELED", "FINISHED", "RESTARTING", "SUSPENDED", "RECONCILING"}

func terminal(state string) bool {
	return state == "FAILED" || state == "CANCELED" || state == "FINISHED" || state == "SUSPENDED"
}

// AddJob adds a job and returns its id. A job id derived from the name and
// the number of jobs already known keeps tests and the demo repeatable.
func (s *Server) AddJob(j Job) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if j.Name == "" {
		return "", fmt.Errorf("flinktest: job name is empty")
	}
	if j.State == "" {
		j.State = "RUNNING"
	}
	if !slices.Contains(jobStates, j.State) {
		return "", fmt.Errorf("flinktest: state %q is not one of %s", j.State, strings.Join(jobStates, ", "))
	}
	if j.JobType == "" {
		j.JobType = "STREAMING"
	}
	if j.ID == "" {
		sum := sha256.Sum256([]byte(fmt.Sprintf("%s#%d", j.Name, len(s.jobs))))
		j.ID = hex.EncodeToString(sum[:16])
	}
	if !jobIDPattern.MatchString(j.ID) {
		return "", fmt.Errorf("flinktest: job id %q is not 32 lowercase hex characters", j.ID)
	}
	if _, dup := s.jobs[j.ID]; dup {
		return "", fmt.Errorf("flinktest: job %s already exists", j.ID)
	}
	if j.Tasks <= 0 {
		j.Tasks = 1
	}
	start := j.Start.UnixMilli()
	s.jobs[j.ID] = &job{details: flink.JobDetails{
		JID: j.ID, Name: j.Name, JobType: j.JobType, SchedulerType: "Default",
		StartTime: start, EndTime: -1, State: j.State, LastModification: start,
		Tasks: taskCounts(j.State, j.Tasks),
	}}
	return j.ID, nil
}

// taskCounts is the per-execution-state task count of JobDetails.
func taskCounts(state string, n int) map[string]int {
	m := map[string]int{}
	for _, k := range []string{"created", "scheduled", "deploying", "running", "finished", "canceling", "canceled", "failed", "reconciling", "initializing"} {
		m[k] = 0
	}
	switch state {
	case "RUNNING", "FINISHED", "FAILED", "RECONCILING", "INITIALIZING", "CREATED":
		m[strings.ToLower(state)] = n
	case "CANCELED", "CANCELLING":
		m["canceled"] = n
	default:
		m["created"] = n
	}
	m["total"] = n
	return m
}

// SetState moves a job to state at the given time (ending it when the state
// is terminal).
func (s *Server) SetState(id, state string, at time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	j, ok := s.jobs[id]
	if !ok {
		return fmt.Errorf("flinktest: no job %s", id)
	}
	if !slices.Contains(jobStates, state) {
		return fmt.Errorf("flinktest: state %q is not one of %s", state, strings.Join(jobStates, ", "))
	}
	j.details.State = state
	j.details.LastModification = at.UnixMilli()
	j.details.Tasks = taskCounts(state, j.details.Tasks["total"])
	if terminal(state) {
		j.details.EndTime = at.UnixMilli()
	}
	return nil
}

// AddCheckpoint appends a checkpoint or savepoint to a job's history and
// returns its id.
func (s *Server) AddCheckpoint(id string, c Checkpoint) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	j, ok := s.jobs[id]
	if !ok {
		return 0, fmt.Errorf("flinktest: no job %s", id)
	}
	if c.Status == "" {
		c.Status = flink.StatusCompleted
	}
	if c.ID == 0 {
		c.ID = 1
		if n := len(j.history); n > 0 {
			c.ID = j.history[n-1].ID + 1
		}
	}
	n := j.details.Tasks["total"]
	cs := flink.CheckpointStatistics{
		ID: c.ID, Status: c.Status, IsSavepoint: c.Savepoint,
		TriggerTimestamp: c.Trigger.UnixMilli(), LatestAckTimestamp: c.Trigger.Add(c.Duration).UnixMilli(),
		CheckpointedSize: c.Size, StateSize: c.Size, EndToEndDuration: c.Duration.Milliseconds(),
		NumSubtasks: n, NumAcknowledgedSubtasks: n, CheckpointType: flink.TypeCheckpoint,
		Tasks: map[string]flink.TaskCheckpointStatistics{},
	}
	if c.Savepoint {
		format := "CANONICAL"
		cs.CheckpointType, cs.SavepointFormat = flink.TypeSavepoint, &format
	}
	switch c.Status {
	case flink.StatusCompleted:
		cs.Class = flink.ClassCompleted
		path, discarded := c.ExternalPath, false
		cs.ExternalPath, cs.Discarded = &path, &discarded
	case flink.StatusFailed:
		cs.Class = flink.ClassFailed
		at, msg := cs.LatestAckTimestamp, c.FailureMessage
		cs.FailureTimestamp, cs.FailureMessage = &at, &msg
		cs.NumAcknowledgedSubtasks = 0
	case flink.StatusInProgress:
		cs.Class = flink.ClassInProgress
		cs.NumAcknowledgedSubtasks = 0
	default:
		return 0, fmt.Errorf("flinktest: checkpoint status %q is not COMPLETED, FAILED or IN_PROGRESS", c.Status)
	}
	j.history = append(j.history, cs)
	return c.ID, nil
}

// Restore records that the job restored from a checkpoint or savepoint.
func (s *Server) Restore(id string, checkpointID int64, at time.Time, savepoint bool, path string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	j, ok := s.jobs[id]
	if !ok {
		return fmt.Errorf("flinktest: no job %s", id)
	}
	j.restores++
	j.restored = &flink.RestoredCheckpointStatistics{ID: checkpointID, RestoreTimestamp: at.UnixMilli(), IsSavepoint: savepoint, ExternalPath: path}
	return nil
}

// AddException records a root failure of the job.
func (s *Server) AddException(id string, e flink.RootExceptionInfo) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	j, ok := s.jobs[id]
	if !ok {
		return fmt.Errorf("flinktest: no job %s", id)
	}
	if e.FailureLabels == nil {
		e.FailureLabels = map[string]string{}
	}
	if e.ConcurrentExceptions == nil {
		e.ConcurrentExceptions = []flink.ExceptionInfo{}
	}
	j.exceptions = append([]flink.RootExceptionInfo{e}, j.exceptions...)
	return nil
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	if r.Method != http.MethodGet {
		fail(w, http.StatusMethodNotAllowed, "Request method "+r.Method+" not supported by this fake JobManager.")
		return
	}
	switch {
	case len(parts) == 1 && parts[0] == "jobs":
		out := struct {
			Jobs []map[string]string `json:"jobs"`
		}{Jobs: []map[string]string{}}
		for _, id := range s.sortedIDs() {
			out.Jobs = append(out.Jobs, map[string]string{"id": id, "status": s.jobs[id].details.State})
		}
		reply(w, out)
	case len(parts) == 2 && parts[0] == "jobs" && parts[1] == "overview":
		out := flink.MultipleJobsDetails{Jobs: []flink.JobDetails{}}
		for _, id := range s.sortedIDs() {
			d := s.jobs[id].details
			end := d.EndTime
			if end < 0 {
				end = d.LastModification
			}
			d.Duration = end - d.StartTime
			out.Jobs = append(out.Jobs, d)
		}
		reply(w, out)
	case len(parts) == 3 && parts[0] == "jobs" && (parts[2] == "checkpoints" || parts[2] == "exceptions"):
		if !jobIDPattern.MatchString(parts[1]) {
			fail(w, http.StatusBadRequest, "Bad request, could not parse parameters: Cannot parse path parameter jobid: "+parts[1])
			return
		}
		j, ok := s.jobs[parts[1]]
		if !ok {
			fail(w, http.StatusNotFound, "org.apache.flink.runtime.messages.FlinkJobNotFoundException: Could not find Flink job ("+parts[1]+")")
			return
		}
		if parts[2] == "checkpoints" {
			reply(w, j.checkpoints())
			return
		}
		max := DefaultMaxExceptions
		if v := r.URL.Query().Get("maxExceptions"); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 {
				fail(w, http.StatusBadRequest, "Bad request, could not parse parameters: Cannot parse query parameter maxExceptions: "+v)
				return
			}
			max = n
		}
		entries := j.exceptions
		if len(entries) > max {
			entries = entries[:max]
		}
		reply(w, flink.JobExceptionsInfoWithHistory{ExceptionHistory: flink.JobExceptionHistory{
			Entries: append([]flink.RootExceptionInfo{}, entries...), Truncated: len(j.exceptions) > max,
		}})
	default:
		fail(w, http.StatusNotFound, "Not found: "+r.URL.Path)
	}
}

func (s *Server) sortedIDs() []string {
	ids := make([]string, 0, len(s.jobs))
	for id := range s.jobs {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(a, b int) bool {
		ja, jb := s.jobs[ids[a]].details, s.jobs[ids[b]].details
		if ja.StartTime != jb.StartTime {
			return ja.StartTime > jb.StartTime
		}
		return ids[a] < ids[b]
	})
	return ids
}

// checkpoints builds the CheckpointingStatistics answer from the history.
func (j *job) checkpoints() flink.CheckpointingStatistics {
	out := flink.CheckpointingStatistics{History: []flink.CheckpointStatistics{}}
	out.Counts.Restored = j.restores
	out.Latest.Restored = j.restored
	var sizes, durations []int64
	for i := range j.history {
		c := j.history[i]
		out.Counts.Total++
		switch c.Status {
		case flink.StatusCompleted:
			out.Counts.Completed++
			sizes = append(sizes, c.StateSize)
			durations = append(durations, c.EndToEndDuration)
			if c.IsSavepoint {
				out.Latest.Savepoint = &c
			} else {
				out.Latest.Completed = &c
			}
		case flink.StatusFailed:
			out.Counts.Failed++
			out.Latest.Failed = &c
		case flink.StatusInProgress:
			out.Counts.InProgress++
		}
	}
	for i := len(j.history) - 1; i >= 0 && len(out.History) < HistorySize; i-- {
		out.History = append(out.History, j.history[i])
	}
	out.Summary = flink.Summary{
		CheckpointedSize: summarize(sizes), StateSize: summarize(sizes), EndToEndDuration: summarize(durations),
		AlignmentBuffered: summarize(nil), ProcessedData: summarize(nil), PersistedData: summarize(nil),
	}
	return out
}

// summarize computes a StatsSummaryDto the way Flink's statistics do:
// min, max and average, and quantiles over the sorted values.
func summarize(vs []int64) flink.StatsSummaryDto {
	if len(vs) == 0 {
		return flink.StatsSummaryDto{}
	}
	s := slices.Clone(vs)
	slices.Sort(s)
	var sum int64
	for _, v := range s {
		sum += v
	}
	q := func(p float64) float64 {
		pos := p * float64(len(s)+1)
		switch {
		case pos < 1:
			return float64(s[0])
		case pos >= float64(len(s)):
			return float64(s[len(s)-1])
		}
		lo := s[int(math.Floor(pos))-1]
		hi := s[int(math.Floor(pos))]
		return float64(lo) + (pos-math.Floor(pos))*float64(hi-lo)
	}
	return flink.StatsSummaryDto{Min: s[0], Max: s[len(s)-1], Avg: sum / int64(len(s)),
		P50: q(0.5), P90: q(0.9), P95: q(0.95), P99: q(0.99), P999: q(0.999)}
}

func reply(w http.ResponseWriter, body any) {
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	w.WriteHeader(http.StatusOK)
	_ = json.NewEncoder(w).Encode(body)
}

// fail answers with Flink's error body.
func fail(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string][]string{"errors": {msg}})
}
