// Package runlog reads the record of routine runs (package routines
// writes it): what the watching saw, which incidents it opened or joined
// and who was told. It is apart from the runner so an agent can answer
// "what did the watching see overnight?" without linking the clients the
// runner observes with.
package runlog

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/dataworkers/dw/internal/page"
	"github.com/dataworkers/dw/internal/store"
	"github.com/dataworkers/dw/internal/suggest"
)

// Status is how a run ended (or that it has not yet).
type Status string

// Run statuses.
const (
	StatusRunning  Status = "running"
	StatusOK       Status = "ok"
	StatusFlagged  Status = "flagged"
	StatusFailed   Status = "failed"
	StatusCanceled Status = "canceled"
	StatusLost     Status = "lost"
)

// Statuses lists every status, for filters and messages.
var Statuses = []Status{StatusRunning, StatusOK, StatusFlagged, StatusFailed, StatusCanceled, StatusLost}

// Run is one recorded run of a routine.
type Run struct {
	ID       int64     `json:"id" jsonschema:"run id"`
	Routine  string    `json:"routine" jsonschema:"routine name from dw.yaml"`
	Tick     time.Time `json:"tick" jsonschema:"the scheduled instant this run is for"`
	Watcher  string    `json:"watcher" jsonschema:"the dw watch process that ran it (host:pid)"`
	Status   Status    `json:"status" jsonschema:"running, ok (nothing found), flagged (incidents opened or joined), failed, canceled or lost (its watcher died)"`
	Missed   int       `json:"missed,omitempty" jsonschema:"ticks skipped because the routine caught up once after downtime"`
	Started  time.Time `json:"started" jsonschema:"when the run started"`
	Finished time.Time `json:"finished,omitzero" jsonschema:"when the run ended"`
	Summary  string    `json:"summary" jsonschema:"what the run saw, for a person"`
	Error    string    `json:"error,omitempty" jsonschema:"why the run failed, was canceled or lost"`
	// Findings are what each observation saw.
	Findings  []Finding  `json:"findings" jsonschema:"what each observation saw"`
	Incidents []Incident `json:"incidents" jsonschema:"incidents the run opened or joined"`
	Notified  []Notified `json:"notified" jsonschema:"who was told (or, without Slack, who would have been)"`
	// Proposals are the holds the run drafted for incidents it opened, or
	// why it drafted none (autonomy, dw stop, no ranked cause).
	Proposals []Proposal `json:"proposals" jsonschema:"holds drafted for approval (never carried out by the routine), or why none was"`
}

// Proposal is a hold a run drafted, or a note on why it did not.
type Proposal struct {
	Incident string `json:"incident" jsonschema:"incident id"`
	ID       string `json:"id,omitempty" jsonschema:"proposal id, when one was drafted"`
	Target   string `json:"target,omitempty" jsonschema:"the scheduled outbound job to hold"`
	What     string `json:"what,omitempty" jsonschema:"the proposal in one line"`
	Approver string `json:"approver,omitempty" jsonschema:"who decides"`
	Note     string `json:"note" jsonschema:"what happened: drafted (awaiting the approver), not drafted (autonomy) or paused (dw stop)"`
}

// Finding is what one observation of a run saw.
type Finding struct {
	// Kind is check, metric, consumer_lag, topic, connector, schema or flink.
	Kind   string `json:"kind" jsonschema:"check, metric, consumer_lag, topic, connector, schema or flink"`
	Target string `json:"target" jsonschema:"table, metric, group, topic, connector, subject or job observed"`
	Asset  string `json:"asset,omitempty" jsonschema:"asset id in the context graph"`
	// Status is ok, problem (a symptom was reported), changed (a change
	// was recorded in the change log), learning or error.
	Status string `json:"status" jsonschema:"ok, problem, changed, learning or error"`
	Detail string `json:"detail" jsonschema:"what was seen, against the baseline where there is one"`
}

// Incident is an incident a run opened or joined.
type Incident struct {
	ID     string `json:"id" jsonschema:"incident id"`
	Opened bool   `json:"opened" jsonschema:"true when this run opened it"`
	Status string `json:"status" jsonschema:"incident status after the run"`
	Asset  string `json:"asset" jsonschema:"the affected asset whose owner is told"`
	Reason string `json:"reason,omitempty" jsonschema:"why the findings went to this incident"`
}

// Notified is one person told about one incident.
type Notified struct {
	Person   string `json:"person" jsonschema:"person id (from dw.yaml people or the catalog's owner)"`
	Name     string `json:"name,omitempty" jsonschema:"the person's name, when dw.yaml knows it"`
	Incident string `json:"incident" jsonschema:"incident id"`
	Role     string `json:"role" jsonschema:"why this person: asset owner, domain owner or upstream owner"`
	// Via is slack when a message was posted, none when Slack is not
	// configured (the run records who would have been told).
	Via      string `json:"via" jsonschema:"slack, or none when Slack is not configured (would have been notified)"`
	Sent     bool   `json:"sent" jsonschema:"true when a message was posted"`
	Channel  string `json:"channel,omitempty" jsonschema:"Slack channel or user the message went to"`
	TS       string `json:"ts,omitempty" jsonschema:"Slack message timestamp"`
	ThreadTS string `json:"thread_ts,omitempty" jsonschema:"the incident's first message, when this one is threaded under it"`
	Note     string `json:"note,omitempty" jsonschema:"why nothing was sent, or what failed"`
}

// Filter selects recorded runs.
type Filter struct {
	Routine string
	Status  Status
	// Since keeps runs started at or after it.
	Since time.Time
}

const runColumns = `id, routine, tick_ms, watcher, status, missed, started_ms, finished_ms, summary, error, findings, incidents, notified, proposals`

// ListRuns returns one page of runs newest first, after the previous
// page's last (started, id) so a run recorded or pruned between pages
// moves no other, and its Info with the number of runs the filter matches.
func ListRuns(ctx context.Context, db store.Querier, f Filter, pg page.Page) ([]Run, page.Info, error) {
	where, args := []string{"1 = 1"}, []any{}
	if f.Routine != "" {
		where, args = append(where, "routine = ?"), append(args, f.Routine)
	}
	if f.Status != "" {
		where, args = append(where, "status = ?"), append(args, string(f.Status))
	}
	if !f.Since.IsZero() {
		where, args = append(where, "started_ms >= ?"), append(args, store.Millis(f.Since))
	}
	var total int
	if err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM routine_runs WHERE `+strings.Join(where, " AND "), args...).Scan(&total); err != nil {
		return nil, page.Info{}, fmt.Errorf("count routine runs: %w", err)
	}
	if pg.After != nil {
		where, args = append(where, "(started_ms, id) < (?, ?)"), append(args, pg.After...)
	}
	rows, err := db.QueryContext(ctx, `SELECT `+runColumns+` FROM routine_runs WHERE `+strings.Join(where, " AND ")+
		` ORDER BY started_ms DESC, id DESC LIMIT ?`, append(args, pg.Fetch())...)
	if err != nil {
		return nil, page.Info{}, fmt.Errorf("list routine runs: %w", err)
	}
	defer rows.Close()
	out := []Run{}
	for rows.Next() {
		r, err := scanRun(rows)
		if err != nil {
			return nil, page.Info{}, err
		}
		out = append(out, *r)
	}
	if err := rows.Err(); err != nil {
		return nil, page.Info{}, err
	}
	out, info := page.Cut(pg, out, total, func(r Run) page.Key { return page.Key{store.Millis(r.Started), r.ID} })
	return out, info, nil
}

// runKey pages runs newest first by start, the run's id breaking ties.
var runKey = page.Keyset{page.Int, page.Int}

// GetRun reads one run.
func GetRun(ctx context.Context, db store.Querier, id int64) (*Run, error) {
	rows, err := db.QueryContext(ctx, `SELECT `+runColumns+` FROM routine_runs WHERE id = ?`, id)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("no routine run %d: `dw routines list` shows the recorded runs", id)
	}
	return scanRun(rows)
}

func scanRun(rows *sql.Rows) (*Run, error) {
	var r Run
	var status, findings, incs, notified, proposals string
	var tick, started, finished int64
	if err := rows.Scan(&r.ID, &r.Routine, &tick, &r.Watcher, &status, &r.Missed, &started, &finished, &r.Summary, &r.Error,
		&findings, &incs, &notified, &proposals); err != nil {
		return nil, err
	}
	r.Status, r.Tick, r.Started, r.Finished = Status(status), store.FromMillis(tick), store.FromMillis(started), store.FromMillis(finished)
	r.Findings, r.Incidents, r.Notified, r.Proposals = []Finding{}, []Incident{}, []Notified{}, []Proposal{}
	for _, p := range []struct {
		raw string
		to  any
	}{{findings, &r.Findings}, {incs, &r.Incidents}, {notified, &r.Notified}, {proposals, &r.Proposals}} {
		if err := json.Unmarshal([]byte(p.raw), p.to); err != nil {
			return nil, fmt.Errorf("routine run %d: stored record is unreadable: %w", r.ID, err)
		}
	}
	return &r, nil
}

// ParseStatus checks a status filter.
func ParseStatus(s string) (Status, error) {
	if st, ok := suggest.Pick(s, Statuses, map[string]Status{"": ""}); ok {
		return st, nil
	}
	return "", fmt.Errorf("unknown status %q; valid: %s", strings.ToLower(strings.TrimSpace(s)), strings.Join(suggest.Names(Statuses), ", "))
}

// ListParams selects recorded runs, a page at a time.
type ListParams struct {
	Routine string `json:"routine,omitempty" jsonschema:"only this routine's runs (its name in dw.yaml)"`
	Status  string `json:"status,omitempty" jsonschema:"only runs with this status: running, ok, flagged, failed, canceled or lost"`
	Since   string `json:"since,omitempty" jsonschema:"only runs started at or after this time (RFC 3339), e.g. last night's 18:00"`
	page.Params
}

// ListResult is one page of runs, newest first.
type ListResult struct {
	Runs []Run `json:"runs" jsonschema:"runs, newest first"`
	page.Info
}

// maxRoutineName bounds a filter; real names are at most 63 characters.
const maxRoutineName = 200

// List answers "what did the watching see": runs newest first, filtered
// and paged.
func List(ctx context.Context, db *store.DB, p ListParams) (*ListResult, error) {
	f := Filter{Routine: strings.TrimSpace(p.Routine)}
	if len(f.Routine) > maxRoutineName || strings.ContainsRune(f.Routine, 0) {
		return nil, fmt.Errorf("routine %.40q… is not a routine name: names are at most 63 lower-case letters, digits, . _ -", f.Routine)
	}
	st, err := ParseStatus(p.Status)
	if err != nil {
		return nil, err
	}
	f.Status = st
	if s := strings.TrimSpace(p.Since); s != "" {
		t, err := time.Parse(time.RFC3339, s)
		if err != nil {
			return nil, fmt.Errorf("since %q is not an RFC 3339 time such as 2026-03-10T18:00:00Z", s)
		}
		f.Since = t
	}
	pg, err := p.Params.ResolveKeyset(runKey, "routine_runs", f.Routine, string(f.Status), p.Since)
	if err != nil {
		return nil, err
	}
	runs, info, err := ListRuns(ctx, db, f, pg)
	if err != nil {
		return nil, err
	}
	return &ListResult{Runs: runs, Info: info}, nil
}
