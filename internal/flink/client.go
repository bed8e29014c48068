// Package flink reads a Flink JobManager over its REST API (v1): the jobs,
// each job's checkpoint statistics (including the checkpoint or savepoint
// it was last restored from) and its exception history. Restores matter to
// incident diagnosis: a job that restarts from a savepoint with state it
// could not map silently starts aggregates from zero.
//
// Field names follow Flink's REST compatibility snapshot
// (flink-runtime-web/src/test/resources/rest_api_v1.snapshot).
package flink

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/dataworkers/dw/internal/rest"
	"github.com/dataworkers/dw/internal/suggest"
)

// DefaultTimeout bounds one REST call.
const DefaultTimeout = 10 * time.Second

// Client reads one JobManager. It is safe for concurrent use.
type Client struct {
	base *url.URL
	rc   *rest.Client
}

// MaxResponseBytes caps one answer of the JobManager: exception histories
// carry whole stack traces, so this is generous, but bounded.
const MaxResponseBytes = 64 << 20

// NewClient checks the JobManager URL and builds a client; it does not
// call the JobManager.
func NewClient(jobManagerURL string, timeout time.Duration) (*Client, error) {
	u, err := rest.ParseBase(jobManagerURL)
	if err != nil {
		return nil, fmt.Errorf("flink: JobManager URL %q is not valid; want http://host:8081 or https://host:8081", jobManagerURL)
	}
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	return &Client{base: u, rc: rest.New(u, rest.Options{Name: "flink", Timeout: timeout, MaxResponseBytes: MaxResponseBytes})}, nil
}

// URL is the JobManager's base URL.
func (c *Client) URL() string { return c.base.String() }

// APIError is an error answer from the JobManager, carrying Flink's error
// body ({"errors":["…"]}).
type APIError struct {
	URL    string   `json:"url"`
	Status int      `json:"status"`
	Errors []string `json:"errors"`
}

// Error says which URL answered what.
func (e *APIError) Error() string {
	msg := http.StatusText(e.Status)
	if len(e.Errors) > 0 {
		// Flink puts a whole Java stack trace in an error; its first
		// line says what went wrong.
		msg, _, _ = strings.Cut(strings.TrimSpace(e.Errors[0]), "\n")
	}
	return fmt.Sprintf("flink: %s answered %d: %s", e.URL, e.Status, msg)
}

// IsNotFound reports whether err is a 404 from the JobManager.
func IsNotFound(err error) bool {
	var ae *APIError
	return errors.As(err, &ae) && ae.Status == http.StatusNotFound
}

func (c *Client) get(ctx context.Context, path string, query url.Values, out any) error {
	resp, err := c.rc.Do(ctx, http.MethodGet, path, query, nil)
	if err != nil {
		var te *rest.TransportError
		switch {
		case !errors.As(err, &te):
			return err
		case te.TimedOut:
			return fmt.Errorf("flink: JobManager at %s did not answer GET %s within %s: %w", c.base, path, te.Timeout, err)
		default:
			return fmt.Errorf("flink: cannot reach JobManager at %s (GET %s, timeout %s): %w", c.base, path, te.Timeout, err)
		}
	}
	if resp.Status >= 300 {
		ae := &APIError{URL: resp.URL, Status: resp.Status}
		if json.Unmarshal(resp.Body, ae) != nil && len(resp.Body) > 0 {
			ae.Errors = []string{rest.Trim(resp.Body, 2000)}
		}
		return ae
	}
	if err := json.Unmarshal(resp.Body, out); err != nil {
		return fmt.Errorf("flink: %s answered something that is not Flink's JSON: %w", resp.URL, err)
	}
	return nil
}

// JobDetails is one job of GET /jobs/overview.
type JobDetails struct {
	JID              string         `json:"jid"`
	Name             string         `json:"name"`
	JobType          string         `json:"jobType,omitempty" jsonschema:"BATCH or STREAMING"`
	SchedulerType    string         `json:"schedulerType,omitempty"`
	StartTime        int64          `json:"start-time" jsonschema:"unix milliseconds"`
	EndTime          int64          `json:"end-time" jsonschema:"unix milliseconds; -1 while running"`
	Duration         int64          `json:"duration" jsonschema:"milliseconds"`
	State            string         `json:"state" jsonschema:"INITIALIZING, CREATED, RUNNING, FAILING, FAILED, CANCELLING, CANCELED, FINISHED, RESTARTING, SUSPENDED or RECONCILING"`
	LastModification int64          `json:"last-modification"`
	Tasks            map[string]int `json:"tasks,omitempty" jsonschema:"number of tasks per execution state"`
	PendingOperators int            `json:"pending-operators"`
}

// MultipleJobsDetails is the body of GET /jobs/overview.
type MultipleJobsDetails struct {
	Jobs []JobDetails `json:"jobs"`
}

// Jobs lists the jobs the JobManager knows, running and archived, newest
// start first.
func (c *Client) Jobs(ctx context.Context) ([]JobDetails, error) {
	var m MultipleJobsDetails
	if err := c.get(ctx, "/jobs/overview", nil, &m); err != nil {
		return nil, err
	}
	sort.SliceStable(m.Jobs, func(i, j int) bool { return m.Jobs[i].StartTime > m.Jobs[j].StartTime })
	return m.Jobs, nil
}

// Compiled on first use, not at every agent's start (see warehouse.identRE).
var jobIDPattern = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[0-9a-f]{32}$`) })

// checkJob validates a job id and, when a call about it 404s, names the
// jobs the JobManager does know.
func (c *Client) checkJob(ctx context.Context, id string, err error) error {
	if err == nil && jobIDPattern().MatchString(id) {
		return nil
	}
	jobs, lerr := c.Jobs(ctx)
	if lerr != nil {
		if err != nil {
			return err
		}
		return fmt.Errorf("flink: job id %q is not 32 lowercase hex characters", id)
	}
	var ids []string
	for _, j := range jobs {
		ids = append(ids, j.JID+" ("+j.Name+")")
	}
	closest := strings.Join(suggest.Closest(id, ids, 3), ", ")
	if err != nil {
		return fmt.Errorf("%w; closest jobs: %s", err, closest)
	}
	return fmt.Errorf("flink: job id %q is not 32 lowercase hex characters; closest jobs: %s", id, closest)
}

// Checkpoints returns a job's checkpoint statistics.
func (c *Client) Checkpoints(ctx context.Context, jobID string) (*CheckpointingStatistics, error) {
	if err := c.checkJob(ctx, jobID, nil); err != nil {
		return nil, err
	}
	var s CheckpointingStatistics
	if err := c.get(ctx, "/jobs/"+jobID+"/checkpoints", nil, &s); err != nil {
		if IsNotFound(err) {
			return nil, c.checkJob(ctx, jobID, err)
		}
		return nil, err
	}
	return &s, nil
}

// Exceptions returns a job's exception history, at most max root
// exceptions (Flink's default when max <= 0).
func (c *Client) Exceptions(ctx context.Context, jobID string, max int) (*JobExceptionsInfoWithHistory, error) {
	if err := c.checkJob(ctx, jobID, nil); err != nil {
		return nil, err
	}
	var q url.Values
	if max > 0 {
		q = url.Values{"maxExceptions": {strconv.Itoa(max)}}
	}
	var e JobExceptionsInfoWithHistory
	if err := c.get(ctx, "/jobs/"+jobID+"/exceptions", q, &e); err != nil {
		if IsNotFound(err) {
			return nil, c.checkJob(ctx, jobID, err)
		}
		return nil, err
	}
	return &e, nil
}
