package quality

import (
	"cmp"
	"context"
	"fmt"
	"github.com/google/jsonschema-go/jsonschema"
	"slices"
	"strings"
	"time"

	"github.com/dataworkers/dw/internal/checks"
	"github.com/dataworkers/dw/internal/incidents"
	"github.com/dataworkers/dw/internal/lineage"
	"github.com/dataworkers/dw/internal/mcpserver"
)

// RunIn is run_quality_check's input.
type RunIn struct {
	checks.CheckRequest
	Warehouse string `json:"warehouse,omitempty" jsonschema:"warehouse name from dw.yaml; default: the first configured"`
	// NoIncident keeps a check from opening an incident (a backfill of
	// history, a dry look).
	NoIncident bool `json:"no_incident,omitempty" jsonschema:"do not open or join an incident for what this check finds"`
}

// RunOut is the check's report and the incident its findings went to.
type RunOut struct {
	checks.Report
	Incidents []incidents.IncidentRef `json:"incidents" jsonschema:"incidents the failed or anomalous checks opened or joined"`
	// ResultsTotal and ResultsOmitted say how much of a wide table's
	// report is listed: results that are not a pass come first.
	ResultsTotal   int            `json:"results_total" jsonschema:"metrics checked"`
	ResultsOmitted int            `json:"results_omitted,omitempty" jsonschema:"results left out of results (passes first); results_by_status counts them all"`
	ResultsBy      map[string]int `json:"results_by_status" jsonschema:"metrics checked per status"`
}

// Bounds on run_quality_check's answer: a 300-column table checked per
// hour over three weeks is 300 results of 504 buckets each.
const (
	maxResults  = 40
	bucketsHead = 3 // the first buckets that are not a pass: the onset
	bucketsTail = 3 // the latest buckets: where it is heading
)

// bound keeps the answer readable: results that are not a pass first (in
// the report's order), at most maxResults, and per result the onset and
// the latest buckets. It runs after the symptoms are taken from the full
// report.
func (o *RunOut) bound() {
	o.ResultsTotal, o.ResultsBy = len(o.Results), map[string]int{}
	results := slices.Clone(o.Results)
	for _, r := range results {
		o.ResultsBy[string(r.Status)]++
	}
	slices.SortStableFunc(results, func(a, b checks.MetricResult) int {
		return cmp.Compare(passRank(a.Status), passRank(b.Status))
	})
	if len(results) > maxResults {
		o.ResultsOmitted = len(results) - maxResults
		results = results[:maxResults]
	}
	for i := range results {
		r := &results[i]
		if len(r.Buckets) <= bucketsHead+bucketsTail {
			continue
		}
		var keep []checks.BucketResult
		for _, b := range r.Buckets[:len(r.Buckets)-bucketsTail] {
			if len(keep) < bucketsHead && b.Status != checks.Pass {
				keep = append(keep, b)
			}
		}
		r.BucketsTotal = len(r.Buckets)
		r.Buckets = append(keep, r.Buckets[len(r.Buckets)-bucketsTail:]...)
	}
	o.Results = results
}

func passRank(s checks.Status) int {
	if s == checks.Pass {
		return 1
	}
	return 0
}

var runQualityCheckTool = mcpserver.Tool{
	Name: "run_quality_check",
	InputSchema: mcpserver.InputSchema[RunIn](func(s *jsonschema.Schema) {
		mcpserver.Range(s, "checks.max_rate", 0, 1)
		mcpserver.Range(s, "checks.max_failing", 0, checks.MaxRowBound)
	}),
	Title: "Run a quality check on a landed table",
	Description: "Checks a warehouse table in one scan: row count, null rate per column, key uniqueness, freshness, load lag, accepted values, ranges and row assertions, " +
		"optionally per hour or day over a window (e.g. period today, bucket hour). Each metric is judged against the table's own history (median and MAD, seasonal by hour of week, " +
		"a rule for rates that were always zero); the judged period never trains its own baseline. " +
		"A longer window (a backfill of history: more than two days by hour, or two months by day) runs three days of hours (a month of days) at a time, reporting progress and recording each as it finishes, so a stopped backfill keeps what it did and the same call again continues. Says pass, fail or anomalous per check with observed value, expected range and history used, " +
		"and names the problem: volume, nulls, uniqueness, freshness, or a value problem that needs a team metric. Failed or anomalous checks open or join an incident. " +
		"The answer lists at most 40 results (those that are not a pass first) and per bucketed result the first buckets that are not a pass and the latest ones, with counts of the rest.",
	ReadOnly: false, Destructive: false, Idempotent: false, OpenWorld: true,
}

func (h *handlers) env(ctx context.Context, whName, tool string) (checks.Env, error) {
	w, err := h.d.Warehouse(ctx, whName)
	if err != nil {
		return checks.Env{}, err
	}
	db, err := h.d.Store(ctx)
	if err != nil {
		return checks.Env{}, err
	}
	return checks.Env{DB: db, Warehouse: w, Clock: h.d.Clock, Agent: Name, Tool: tool}, nil
}

func (h *handlers) runQualityCheck(ctx context.Context, in RunIn) (*RunOut, string, error) {
	env, err := h.env(ctx, in.Warehouse, "run_quality_check")
	if err != nil {
		return nil, "", err
	}
	// A backfill reports each chunk it records, in place of the heartbeat.
	env.Progress = func(done, total int, msg string) {
		mcpserver.Progress(ctx, float64(done), float64(total), "run_quality_check: "+msg)
	}
	g, err := h.d.Graph(ctx)
	if err != nil {
		return nil, "", err
	}
	svc := &incidents.Service{DB: env.DB, Clock: h.d.Clock, Graph: incidents.LineageGraph(g, lineage.NamesFromConfig(h.d.Config))}
	run, err := svc.RunCheck(ctx, env, in.CheckRequest, incidents.CheckRunParams{NoIncident: in.NoIncident, Actor: Name, Names: g})
	if err != nil {
		return nil, "", err
	}
	rep := run.Report
	out := &RunOut{Report: *rep, Incidents: run.Incidents}
	out.bound()
	var b strings.Builder
	b.WriteString(rep.Summary)
	for _, ref := range out.Incidents {
		verb := "joined"
		if ref.Opened {
			verb = "opened"
		}
		fmt.Fprintf(&b, "\nIncident %s %s (%s).", ref.ID, verb, ref.Status)
	}
	return out, b.String(), nil
}

var setExpectationsTool = mcpserver.Tool{
	Name: "set_quality_expectations",
	InputSchema: mcpserver.InputSchema[ExpectIn](func(s *jsonschema.Schema) {
		rate := s.Properties["max_null_rate"].AdditionalProperties
		lo, hi := 0.0, 1.0
		rate.Minimum, rate.Maximum = &lo, &hi
		mcpserver.Range(s, "min_rows", 0, checks.MaxRowBound)
		mcpserver.Range(s, "max_rows", 0, checks.MaxRowBound)
		mcpserver.Range(s, "predicates.max_failing_rows", 0, checks.MaxRowBound)
	}),
	Title: "Record a table's quality expectations",
	Description: "Records what a table must satisfy: its key, event and ingest time columns, and explicit thresholds (max null rate per column, rows per bucket, accepted values, ranges, row assertions, relationships: a column whose values must exist in another table's column). " +
		"run_quality_check then runs these instead of profiling the table. Names are validated against the warehouse's catalog. " +
		"It replaces the table's earlier expectations as a whole: give every expectation the table should keep. Expectations from an imported dbt manifest's tests are kept apart and still checked; where both speak of the same column (or the key), these win.",
	ReadOnly: false, Destructive: true, Idempotent: true, OpenWorld: true,
}

// ExpectIn is set_quality_expectations' input.
type ExpectIn struct {
	checks.ExpectationsRequest
	Warehouse string `json:"warehouse,omitempty" jsonschema:"warehouse name from dw.yaml; default: the first configured"`
}

func (h *handlers) setExpectations(ctx context.Context, in ExpectIn) (*checks.ExpectationsResult, string, error) {
	env, err := h.env(ctx, in.Warehouse, "set_quality_expectations")
	if err != nil {
		return nil, "", err
	}
	res, err := checks.SetExpectations(ctx, env, in.ExpectationsRequest)
	if err != nil {
		return nil, "", err
	}
	if res.Checks == nil {
		res.Checks = []string{}
	}
	summary := fmt.Sprintf("expectations for %s stored; run_quality_check will run: %s", res.Table, strings.Join(res.Checks, ", "))
	if len(res.FromDBT) > 0 {
		summary += fmt.Sprintf("; %d of them from the imported dbt tests (%s)", len(res.FromDBT), strings.Join(res.FromDBT, ", "))
	}
	return res, summary, nil
}

var getHistoryTool = mcpserver.Tool{
	Name: "get_quality_history",
	InputSchema: mcpserver.InputSchema[HistoryIn](func(s *jsonschema.Schema) {
		mcpserver.Range(s, "days", 0, checks.MaxHistoryDays)
	}),
	Title:       "A quality metric's history and baseline",
	Description: "Returns a table metric's recent points (e.g. null_rate of a column per hour) and the baseline its latest point was judged against, with the table's other recorded series. Points are paged newest first (limit, default 200, at most 500; next_cursor for earlier points) with total.",
	ReadOnly:    true, Idempotent: true, OpenWorld: false,
}

// HistoryIn is get_quality_history's input.
type HistoryIn struct {
	checks.HistoryRequest
	Warehouse string `json:"warehouse,omitempty" jsonschema:"warehouse name from dw.yaml; default: the first configured"`
}

func (h *handlers) getHistory(ctx context.Context, in HistoryIn) (*checks.HistoryResult, string, error) {
	env, err := h.env(ctx, in.Warehouse, "get_quality_history")
	if err != nil {
		return nil, "", err
	}
	res, err := checks.History(ctx, env, in.HistoryRequest)
	if err != nil {
		return nil, "", err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d points of %s", res.Total, in.Metric)
	if in.Dimension != "" {
		fmt.Fprintf(&b, "(%s)", in.Dimension)
	}
	if n := len(res.Points); n > 0 {
		fmt.Fprintf(&b, " from %s to %s", res.Points[0].At.Format(time.RFC3339), res.Points[n-1].At.Format(time.RFC3339))
	}
	if res.Latest != nil {
		fmt.Fprintf(&b, "; latest judged %s", res.Latest.Verdict)
	}
	if res.NextCursor != "" {
		fmt.Fprintf(&b, "; %d newest listed, next_cursor pages back", len(res.Points))
	}
	return res, b.String(), nil
}
