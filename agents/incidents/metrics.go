package incidents

import (
	"context"
	"fmt"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/dataworkers/dw/internal/incidents"
	"github.com/dataworkers/dw/internal/mcpserver"
	"github.com/dataworkers/dw/internal/page"
)

var defineMetricTool = mcpserver.Tool{
	Name:  "define_metric",
	Title: "Define a team metric",
	Description: "Defines (or redefines) a metric the team says defines a right table, tied to the asset it describes: either values pushed through monitor_metrics, or one read-only SELECT (or WITH) on a configured warehouse returning value_column and, for hourly points, time_column with each bucket's start. " +
		"The SQL is checked to be a single read-only statement before it is stored and again before every run; anything else is refused. moves_with names metrics that normally move together (rides and ride_starts), so monitor_metrics reports when they move apart; the partner may be defined before or after (the pair is judged once both exist).",
	ReadOnly:    false,
	Destructive: true, // replaces an earlier definition of the same name
	Idempotent:  true,
	OpenWorld:   false,
	InputSchema: mcpserver.InputSchema[incidents.DefineMetricParams](func(s *jsonschema.Schema) {
		mcpserver.Enum(s, "grain", "hour", "day", "snapshot")
		mcpserver.Enum(s, "direction", "both", "up", "down")
		mcpserver.Enum(s, "symptom_kind", incidents.MetricSymptomKinds...)
	}),
}

func (h *handlers) defineMetric(ctx context.Context, in incidents.DefineMetricParams) (*incidents.MetricDefinition, string, error) {
	e, err := h.env(ctx)
	if err != nil {
		return nil, "", err
	}
	in.By = h.caller()
	def, err := e.svc.DefineMetric(ctx, in)
	if err != nil {
		return nil, "", err
	}
	how := "values are pushed with monitor_metrics"
	if def.Source == incidents.SourceSQL {
		how = fmt.Sprintf("computed by SQL on warehouse %s", def.Warehouse)
	}
	summary := fmt.Sprintf("Metric %s on %s defined (%s, %s grain, anomalies reported as %s).", def.Name, def.Asset, how, orDefault(def.Grain, "snapshot"), def.SymptomKind)
	if len(def.PairedWith) > 0 {
		summary += " Judged as a pair with " + strings.Join(def.PairedWith, ", ") + "."
	}
	for _, n := range def.Notes {
		summary += " " + capitalFirst(n) + "."
	}
	return def, summary, nil
}

// ListMetricsIn pages the metric definitions.
type ListMetricsIn struct {
	page.Params
}

// ListMetricsOut lists the defined metrics.
type ListMetricsOut struct {
	Metrics []incidents.MetricDefinition `json:"metrics" jsonschema:"this page of defined metrics, by name"`
	page.Info
}

var listMetricsTool = mcpserver.Tool{
	Name:        "list_metrics",
	Title:       "List team metrics",
	Description: "Lists the team metrics defined with define_metric: name, asset, whether values are pushed or computed by SQL (and on which warehouse), grain, direction and the pairing: paired_with lists the metrics each is judged with (moves_with declared on either side), moves_with_undefined the partners named before they were defined. Paged: limit (default 50, at most 500), next_cursor, total.",
	ReadOnly:    true,
	Destructive: false,
	Idempotent:  true,
	OpenWorld:   false,
}

func (h *handlers) listMetrics(ctx context.Context, in ListMetricsIn) (*ListMetricsOut, string, error) {
	e, err := h.env(ctx)
	if err != nil {
		return nil, "", err
	}
	defs, info, err := e.svc.ListMetricsPage(ctx, in.Params)
	if err != nil {
		return nil, "", err
	}
	out := &ListMetricsOut{Metrics: defs, Info: info}
	total := info.Total
	if total == 0 {
		return out, "No metrics are defined yet: define one with define_metric.", nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d of %d metric(s):", len(defs), total)
	for i, d := range defs {
		if i == 20 {
			fmt.Fprintf(&b, "\n… and %d more on this page", len(defs)-20)
			break
		}
		fmt.Fprintf(&b, "\n- %s on %s (%s)", d.Name, d.Asset, d.Source)
		if len(d.PairedWith) > 0 {
			fmt.Fprintf(&b, ", paired with %s", strings.Join(d.PairedWith, ", "))
		}
		if len(d.MovesWithUndefined) > 0 {
			fmt.Fprintf(&b, ", moves with %s once defined", strings.Join(d.MovesWithUndefined, ", "))
		}
	}
	if out.NextCursor != "" {
		b.WriteString("\nMore metrics: pass next_cursor as cursor.")
	}
	return out, b.String(), nil
}

var monitorMetricsTool = mcpserver.Tool{
	Name:  "monitor_metrics",
	Title: "Record or compute a team metric and judge it",
	Description: "For a pushed metric, records the given points (each with its bucket start); for a metric defined by SQL, computes it on its warehouse per bucket over window (default: the last complete hour). " +
		"Answers with the anomalies and a summary of the points (count, latest, worst deviation with its baseline); include_points lists the points too. Each point is scored against the metric's seasonal baseline (the points being judged never train it), and a pair of metrics that moved apart is reported as a divergence. Every anomaly is a symptom that opens an incident, or joins an active one on the same asset or an asset connected in the lineage within hours; the output says which incident and why. " +
		"backfill stores past values as history without judging them (load history before monitoring). Times in the future and windows that end before they start are refused.",
	ReadOnly:    false,
	Destructive: false,
	Idempotent:  false,
	OpenWorld:   true,
	InputSchema: mcpserver.InputSchema[MonitorIn](func(s *jsonschema.Schema) {
		mcpserver.Items(s, "points", 0, incidents.MaxMetricPoints)
	}),
}

// MonitorIn is monitor_metrics' input: the domain call's parameters and
// whether to echo every judged point.
type MonitorIn struct {
	incidents.MonitorParams
	IncludePoints bool `json:"include_points,omitempty" jsonschema:"also list the judged points (the latest 200, oldest first); by default only their summary"`
}

// MonitorOut is monitor_metrics' answer: anomalies and a summary of the
// points, never an echo of thousands of points unless asked.
type MonitorOut struct {
	Metric         string                  `json:"metric" jsonschema:"metric name"`
	Recorded       int                     `json:"recorded" jsonschema:"points stored"`
	PointSummary   incidents.PointStats    `json:"point_summary" jsonschema:"the recorded points in brief: count, verdict counts, latest and worst point with their baseline"`
	Points         []incidents.Judged      `json:"points,omitempty" jsonschema:"with include_points: the latest 200 judged points, oldest first"`
	PointsOmitted  int                     `json:"points_omitted,omitempty" jsonschema:"with include_points: older points left out of points"`
	Anomalies      []incidents.Symptom     `json:"anomalies" jsonschema:"symptoms reported (anomalous points and divergences), largest deviation first, at most 50"`
	AnomaliesTotal int                     `json:"anomalies_total" jsonschema:"symptoms reported in all, including any left out of anomalies"`
	Incidents      []incidents.IncidentRef `json:"incidents" jsonschema:"incidents opened or joined"`
	Summary        string                  `json:"summary" jsonschema:"short text for a person"`
}

// Bounds on monitor_metrics' answer: a call may record 10,000 points.
const (
	maxEchoPoints = 200
	maxAnomalies  = 50
)

func (h *handlers) monitorMetrics(ctx context.Context, in MonitorIn) (*MonitorOut, string, error) {
	e, err := h.env(ctx)
	if err != nil {
		return nil, "", err
	}
	res, err := e.svc.MonitorMetric(ctx, in.MonitorParams)
	if err != nil {
		return nil, "", err
	}
	out := &MonitorOut{Metric: res.Metric, Recorded: res.Recorded, PointSummary: incidents.SummarizePoints(res.Points),
		AnomaliesTotal: len(res.Anomalies), Incidents: res.Incidents, Summary: res.Summary}
	if in.IncludePoints {
		n := min(len(res.Points), maxEchoPoints)
		out.Points = res.Points[len(res.Points)-n:]
		out.PointsOmitted = len(res.Points) - n
	}
	anomalies := incidents.ByDeviation(res.Anomalies)
	out.Anomalies = anomalies[:min(len(anomalies), maxAnomalies)]
	var b strings.Builder
	b.WriteString(res.Summary)
	for i, a := range out.Anomalies {
		if i == 10 {
			fmt.Fprintf(&b, "\n… and %d more anomalies", len(res.Anomalies)-10)
			break
		}
		fmt.Fprintf(&b, "\n- anomaly at %s: %s", a.At.UTC().Format("2006-01-02 15:04"), a.Detail)
	}
	for _, inc := range res.Incidents {
		verb := "joined"
		if inc.Opened {
			verb = "opened"
		}
		fmt.Fprintf(&b, "\n- %s %s (%s); next: diagnose_incident %s", verb, inc.ID, inc.Reason, inc.ID)
	}
	return out, b.String(), nil
}

func capitalFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
