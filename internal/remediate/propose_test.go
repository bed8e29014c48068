package remediate

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/dataworkers/dw/internal/approvals"
	"github.com/dataworkers/dw/internal/config"
	"github.com/dataworkers/dw/internal/incidents"
	"github.com/dataworkers/dw/internal/lineage"
)

const (
	ordersSchema = `{"type":"record","name":"Order","namespace":"shop","fields":[{"name":"order_id","type":"long"},{"name":"amount","type":["null","double"],"default":null}]}`
	// ordersSchemaSpaced is ordersSchema as another person would type it:
	// the same schema, so the same canonical hash.
	ordersSchemaSpaced = "{ \"type\": \"record\", \"name\": \"Order\", \"namespace\": \"shop\",\n  \"fields\": [ {\"name\": \"order_id\", \"type\": \"long\"},\n {\"name\": \"amount\", \"type\": [\"null\", \"double\"], \"default\": null} ] }"
	// ordersSchemaV2 renames a field: another schema.
	ordersSchemaV2 = `{"type":"record","name":"Order","namespace":"shop","fields":[{"name":"order_id","type":"long"},{"name":"total","type":["null","double"],"default":null}]}`
	olURL          = "http://marquez.internal:5000/api/v1/lineage"
)

// proposeFixture is the revenue incident, diagnosed, in a team whose
// dw.yaml configures a registry, an OpenLineage endpoint and Airflow, and
// whose one domain (owned by pat) holds the tables, subjects, DAGs and
// lineage jobs the proposals act on.
func proposeFixture(t *testing.T) (*fixture, *incidents.Incident) {
	t.Helper()
	f := newFixture(t)
	revenueTables(t, f)
	f.cfg.SchemaRegistry = &config.Service{URL: "http://schema-registry.internal:8081"}
	f.cfg.OpenLineage = &config.Service{URL: olURL}
	f.cfg.Orchestrators.Airflow = &config.Service{URL: "http://airflow.internal:8080"}
	f.cfg.Domains[0].Assets = append(f.cfg.Domains[0].Assets, "schema://*", "airflow://dag/*", "openlineage://**")
	f.env.Approvals = approvals.New(f.db, f.cfg, f.clk, nil)
	rep, err := f.env.Incidents.ReportSymptoms(f.ctx, incidents.ReportParams{Symptoms: revenueSymptoms(), Actor: "dw-quality"})
	if err != nil || len(rep.Incidents) != 1 {
		t.Fatalf("report: %v %+v", err, rep)
	}
	id := rep.Incidents[0].ID
	if _, err := f.env.Incidents.Diagnose(f.ctx, incidents.DiagnoseParams{IncidentID: id}); err != nil {
		t.Fatal(err)
	}
	inc, err := f.env.Incidents.GetIncident(f.ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	return f, inc
}

func (f *fixture) graph() AssetResolver { return lineage.New(f.db, f.clk) }

func replaceSpec() ProposalSpec {
	return ProposalSpec{Kind: "diff", What: "dbt: read orders from shop.orders_v2", Why: "shop.orders lost amounts from 14:00",
		Targets: []string{"duckdb://shop.orders"}, Undo: "point the dbt source back to shop.orders",
		Replaces: &ReplacementSpec{Asset: "DuckDB://Shop.Orders", With: "duckdb://shop.orders_v2"}}
}

func schemaSpec(text string) ProposalSpec {
	return ProposalSpec{Kind: "schema_version", What: "register orders-value with amount nullable", Targets: []string{"schema://orders-value"},
		Undo: "re-register the previous version", Schema: text}
}

func rerunSpec() ProposalSpec {
	return ProposalSpec{Kind: "rerun", What: "rebuild orders for today", Targets: []string{"airflow://dag/rebuild_orders"},
		Undo: "restore yesterday's snapshot", Run: &RunSpec{System: "airflow", Target: "rebuild_orders", Params: map[string]any{"conf": map[string]any{"day": "2026-03-10"}}}}
}

func lineageSpec() ProposalSpec {
	return ProposalSpec{Kind: "lineage_event", What: "record the rollup's run", Undo: "post the run's ABORT event",
		LineageEvent: map[string]any{
			"eventType": "COMPLETE", "eventTime": "2026-03-10T14:10:00.000Z",
			"run":       map[string]any{"runId": "0192963f-f6f8-71c0-8380-500bc70883ee"},
			"job":       map[string]any{"namespace": "flink-prod", "name": "usage-hourly-rollup"},
			"inputs":    []any{map[string]any{"namespace": "kafka://broker-1:9092", "name": "api-usage"}},
			"outputs":   []any{map[string]any{"namespace": "kafka://broker-1:9092", "name": "usage-hourly"}},
			"producer":  "https://github.com/OpenLineage/OpenLineage/tree/1.24.2/integration/flink",
			"schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/definitions/RunEvent",
		}}
}

// Each proposal is bound to the one action its approval allows, and all
// of them are sent together: the replacement sealed in the details and
// said first in the why, the schema by its canonical hash at the
// configured registry, the run with every param at the configured
// Airflow, the event by its hash at the configured endpoint with its job
// as the target.
func TestProposeBindsEachActionAndSendsAllTogether(t *testing.T) {
	f, inc := proposeFixture(t)
	res, err := Propose(f.ctx, f.env, f.graph(), ProposeParams{IncidentID: inc.ID,
		Proposals: []ProposalSpec{replaceSpec(), schemaSpec(ordersSchema), rerunSpec(), lineageSpec()}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Proposals) != 4 || res.Incident.Status != incidents.StatusProposed || len(res.Incident.Proposals) != 4 {
		t.Fatalf("%d proposals, incident %s listing %v", len(res.Proposals), res.Incident.Status, res.Incident.Proposals)
	}
	for i, p := range res.Proposals {
		if p.Proposer != "dw-incidents" || p.Approver != "pat" || res.Incident.Proposals[i] != p.ID {
			t.Fatalf("proposal %d: proposer %s approver %s id %s (incident lists %v)", i, p.Proposer, p.Approver, p.ID, res.Incident.Proposals)
		}
	}
	rep, schema, run, event := res.Proposals[0], res.Proposals[1], res.Proposals[2], res.Proposals[3]

	want := map[string]any{"asset": "duckdb://shop.orders", "with": "duckdb://shop.orders_v2"}
	if got, _ := rep.Details[DetailReplacement].(map[string]any); !reflect.DeepEqual(got, want) || rep.Action != nil {
		t.Errorf("replacement details %v action %+v, want the canonical pair %v and no action", rep.Details, rep.Action, want)
	}
	if !strings.HasPrefix(rep.Why, "Replaces duckdb://shop.orders with duckdb://shop.orders_v2: once approved, remediate reads duckdb://shop.orders_v2 ") ||
		!strings.Contains(rep.Why, "shop.orders lost amounts from 14:00") {
		t.Errorf("why %q does not say the replacement first and keep the proposer's reason", rep.Why)
	}

	sha, _ := schema.Details[DetailSchemaSHA].(string)
	a := schema.Action
	if a == nil || a.System != approvals.SystemSchemaRegistry || a.Target != "orders-value" || a.Asset != "schema://orders-value" ||
		a.Params["schema_sha256"] != sha || len(sha) != 64 || schema.Details[DetailSubject] != "orders-value" ||
		schema.Details[DetailSchemaType] != "AVRO" || schema.Details[DetailSchema] != ordersSchema || a.Location.Instance != approvals.NormalizeURL(f.cfg.SchemaRegistry.URL) {
		t.Errorf("schema proposal: action %+v details %v", a, schema.Details)
	}
	// The hash is the schema's, not its spelling's.
	for text, same := range map[string]bool{ordersSchemaSpaced: true, ordersSchemaV2: false} {
		r, err := Bind(f.ctx, f.env, f.graph(), inc, schemaSpec(text))
		if err != nil {
			t.Fatal(err)
		}
		if got := r.Draft.Details[DetailSchemaSHA]; (got == sha) != same || r.Action.Params["schema_sha256"] != got {
			t.Errorf("schema %.40q…: hash %v, bound %v; same schema: %v", text, got, r.Action.Params["schema_sha256"], same)
		}
	}

	a = run.Action
	if a == nil || a.System != "airflow" || a.Target != "rebuild_orders" || a.Asset != "airflow://dag/rebuild_orders" ||
		!reflect.DeepEqual(a.Params, map[string]any{"conf": map[string]any{"day": "2026-03-10"}}) {
		t.Errorf("run action %+v", a)
	}

	a = event.Action
	if a == nil || a.System != approvals.SystemOpenLineage || a.Asset != "openlineage://flink-prod/usage-hourly-rollup" ||
		!reflect.DeepEqual(event.Targets, []string{a.Asset}) || event.Details[DetailLineageEvent] == nil {
		t.Errorf("lineage_event: targets %v action %+v details %v", event.Targets, a, event.Details)
	}
	other := lineageSpec()
	other.LineageEvent["eventType"] = "FAIL"
	r, err := Bind(f.ctx, f.env, f.graph(), inc, other)
	if err != nil || r.Action.ParamsSHA256 == a.ParamsSHA256 {
		t.Errorf("another event binds the same action (%v)", err)
	}
}

// A proposal that cannot be bound refuses the whole set, named by its
// position, before anything is written: no proposal, no receipt, the
// incident still diagnosed.
func TestProposeRefusesTheSetBeforeWriting(t *testing.T) {
	f, inc := proposeFixture(t)
	noSchema := schemaSpec("")
	for i, bad := range []ProposalSpec{noSchema, func() ProposalSpec { s := rerunSpec(); s.Kind = "hold"; return s }()} {
		_, err := Propose(f.ctx, f.env, f.graph(), ProposeParams{IncidentID: inc.ID, Proposals: []ProposalSpec{replaceSpec(), bad}})
		var re *incidents.RemediationError
		if !errors.As(err, &re) || re.Index != 1 {
			t.Fatalf("bad #%d: want proposals[1] refused, got %v", i, err)
		}
		var n int
		if err := f.db.QueryRowContext(f.ctx, `SELECT COUNT(*) FROM approval_proposals`).Scan(&n); err != nil || n != 0 {
			t.Fatalf("bad #%d: %d proposals written (%v)", i, n, err)
		}
		got, err := f.env.Incidents.GetIncident(f.ctx, inc.ID)
		if err != nil || got.Status != incidents.StatusDiagnosed || len(got.Proposals) != 0 {
			t.Fatalf("bad #%d: incident %+v (%v)", i, got, err)
		}
		if ids, err := approvals.ReceiptIDs(f.ctx, f.db); err != nil || len(ids) != 0 {
			t.Fatalf("bad #%d: receipts %v (%v)", i, ids, err)
		}
	}
}

// Bind refuses what would let an approval allow something other than
// what the approver read, with a reason a caller can act on.
func TestBindRefuses(t *testing.T) {
	f, inc := proposeFixture(t)
	with := func(base ProposalSpec, edit func(*ProposalSpec)) ProposalSpec { edit(&base); return base }
	for _, c := range []struct {
		name string
		spec ProposalSpec
		want string
	}{
		{"schema on another kind", with(replaceSpec(), func(s *ProposalSpec) { s.Schema = ordersSchema }), "apply only to kind schema_version"},
		{"event on another kind", with(rerunSpec(), func(s *ProposalSpec) { s.LineageEvent = lineageSpec().LineageEvent }), "lineage_event applies only to kind lineage_event"},
		{"run on a hold", with(rerunSpec(), func(s *ProposalSpec) { s.Kind = "hold" }), "run applies to kinds rerun and replay"},
		{"schema that does not parse", schemaSpec(`{"type":"record"`), "does not parse as AVRO"},
		{"two subjects", with(schemaSpec(ordersSchema), func(s *ProposalSpec) { s.Targets = append(s.Targets, "schema://refunds-value") }), "exactly one subject"},
		{"a hash that is not the schema's", with(schemaSpec(ordersSchema), func(s *ProposalSpec) {
			s.Details = map[string]any{DetailSchemaSHA: strings.Repeat("0", 64)}
		}), "is not the schema's canonical SHA-256"},
		{"an event without a job", with(lineageSpec(), func(s *ProposalSpec) { s.LineageEvent = map[string]any{"eventType": "COMPLETE"} }), "lineage_event: invalid OpenLineage RunEvent: "},
		{"an event for another job", with(lineageSpec(), func(s *ProposalSpec) { s.Targets = []string{"openlineage://flink-prod/other"} }), "targets the event's job"},
		{"a replacement pair forged in details", with(replaceSpec(), func(s *ProposalSpec) {
			s.Replaces, s.Details = nil, map[string]any{DetailReplacement: map[string]any{"asset": "duckdb://shop.orders", "with": "duckdb://shop.orders_v2"}}
		}), "give replaces {asset, with} instead"},
		{"a replacement given twice", with(replaceSpec(), func(s *ProposalSpec) { s.Details = map[string]any{DetailVerifyTable: "shop.orders_v2"} }), "not both"},
		{"a replacement that does not exist", with(replaceSpec(), func(s *ProposalSpec) { s.Replaces.With = "duckdb://shop.orders_v3" }), "create the replacement first"},
		{"replaces without verify_table", with(replaceSpec(), func(s *ProposalSpec) { s.Replaces, s.Details = nil, map[string]any{DetailReplaces: "shop.orders"} }), "give the replacement in details.verify_table"},
		{"verify_table not a string", with(replaceSpec(), func(s *ProposalSpec) { s.Replaces, s.Details = nil, map[string]any{DetailVerifyTable: 7} }), "must be a non-empty string"},
	} {
		_, err := Bind(f.ctx, f.env, f.graph(), inc, c.spec)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err %v, want %q", c.name, err, c.want)
		}
	}
	// What the configuration does not name cannot be bound.
	f.cfg.SchemaRegistry, f.cfg.OpenLineage, f.cfg.Orchestrators.Airflow = nil, nil, nil
	for spec, want := range map[*ProposalSpec]string{
		ptr(schemaSpec(ordersSchema)): "no schema_registry.url in dw.yaml",
		ptr(lineageSpec()):            "no openlineage.url in dw.yaml",
		ptr(rerunSpec()):              "run: ",
	} {
		if _, err := Bind(f.ctx, f.env, f.graph(), inc, *spec); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s without its service configured: err %v, want %q", spec.Kind, err, want)
		}
	}
}

func ptr[T any](v T) *T { return &v }
