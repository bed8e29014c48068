package incidents

import (
	"context"
	"fmt"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/dataworkers/dw/internal/incidents"
	"github.com/dataworkers/dw/internal/mcpserver"
)

var defineMetricTool = mcpserver.Tool{
	Name:  "define_metric",
	Title: "Define a team metric",
	Description: "Defines (or redefines) a metric the team says defines a right table, tied to the asset it describes: either values pushed through monitor_metrics, or one read-only SELECT (or WITH) on a configured warehouse returning value_column and, for hourly points, time_column with each bucket's start. " +
		"The SQL is checked to be a single read-only statement before it is stored and again before every run; anything else is refused. moves_with names metrics that normally move together (rides and ride_starts), so monitor_metrics reports when they move apart.",
	ReadOnly:    false,
	Destructive: true, // replaces an earlier definition of the same name
	Idempotent:  true,
	OpenWorld:   false,
	InputSchema: mcpserver.InputSchema[incidents.DefineMetricParams](func(s *jsonschema.Schema) {
		mcpserver.Enum(s, "grain", "hour", "day", "snapshot")
		mcpserver.Enum(s, "direction", "both", "up", "down")
		mcpserver.Enum(s, "symptom_kind", "value", "volume", "nulls", "uniqueness", "freshness", "load_lag")
	}),
}

func (h *handlers) defineMetric(ctx context.Context, in incidents.DefineMetricParams) (*incidents.MetricDefinition, string, error) {
	e, err := h.env(ctx)
	if err != nil {
		return nil, "", err
	}
	def, err := e.svc.DefineMetric(ctx, in)
	if err != nil {
		return nil, "", err
	}
	how := "values are pushed with monitor_metrics"
	if def.Source == incidents.SourceSQL {
		how = fmt.Sprintf("computed by SQL on warehouse %s", def.Warehouse)
	}
	summary := fmt.Sprintf("Metric %s on %s defined (%s, %s grain, anomalies reported as %s).", def.Name, def.Asset, how, orDefault(def.Grain, "snapshot"), def.SymptomKind)
	if len(def.MovesWith) > 0 {
		summary += " Moves with " + strings.Join(def.MovesWith, ", ") + "."
	}
	return def, summary, nil
}

// ListMetricsIn takes no arguments.
type ListMetricsIn struct{}

// ListMetricsOut lists the defined metrics.
type ListMetricsOut struct {
	Metrics []incidents.MetricDefinition `json:"metrics" jsonschema:"defined metrics by name"`
}

var listMetricsTool = mcpserver.Tool{
	Name:        "list_metrics",
	Title:       "List team metrics",
	Description: "Lists the team metrics defined with define_metric: name, asset, whether values are pushed or computed by SQL (and on which warehouse), grain, direction and the metrics each moves with.",
	ReadOnly:    true,
	Destructive: false,
	Idempotent:  true,
	OpenWorld:   false,
}

func (h *handlers) listMetrics(ctx context.Context, _ ListMetricsIn) (*ListMetricsOut, string, error) {
	e, err := h.env(ctx)
	if err != nil {
		return nil, "", err
	}
	defs, err := e.svc.ListMetrics(ctx)
	if err != nil {
		return nil, "", err
	}
	if len(defs) == 0 {
		return &ListMetricsOut{Metrics: defs}, "No metrics are defined yet: define one with define_metric.", nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d metric(s):", len(defs))
	for _, d := range defs {
		fmt.Fprintf(&b, "\n- %s on %s (%s)", d.Name, d.Asset, d.Source)
	}
	return &ListMetricsOut{Metrics: defs}, b.String(), nil
}

var monitorMetricsTool = mcpserver.Tool{
	Name:  "monitor_metrics",
	Title: "Record or compute a team metric and judge it",
	Description: "For a pushed metric, records the given points (each with its bucket start); for a metric defined by SQL, computes it on its warehouse per bucket over window (default: the last complete hour). " +
		"Each point is scored against the metric's seasonal baseline (the points being judged never train it), and a pair of metrics that moved apart is reported as a divergence. Every anomaly is a symptom that opens an incident, or joins an active one on the same asset or an asset connected in the lineage within hours; the output says which incident and why. " +
		"backfill stores past values as history without judging them (load history before monitoring). Times in the future and windows that end before they start are refused.",
	ReadOnly:    false,
	Destructive: false,
	Idempotent:  false,
	OpenWorld:   true,
}

func (h *handlers) monitorMetrics(ctx context.Context, in incidents.MonitorParams) (*incidents.MonitorResult, string, error) {
	e, err := h.env(ctx)
	if err != nil {
		return nil, "", err
	}
	res, err := e.svc.MonitorMetric(ctx, in)
	if err != nil {
		return nil, "", err
	}
	var b strings.Builder
	b.WriteString(res.Summary)
	for _, a := range res.Anomalies {
		fmt.Fprintf(&b, "\n- anomaly at %s: %s", a.At.UTC().Format("2006-01-02 15:04"), a.Detail)
	}
	for _, inc := range res.Incidents {
		verb := "joined"
		if inc.Opened {
			verb = "opened"
		}
		fmt.Fprintf(&b, "\n- %s %s (%s); next: diagnose_incident %s", verb, inc.ID, inc.Reason, inc.ID)
	}
	return res, b.String(), nil
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
