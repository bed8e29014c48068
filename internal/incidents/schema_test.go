package incidents

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/dataworkers/dw/internal/changelog"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/dataworkers/dw/internal/store"
	"github.com/dataworkers/dw/internal/store/storetest"
)

// Every params and result type must turn into a JSON schema, because the
// agent registers them as tool input and output schemas.
func TestToolTypesHaveSchemas(t *testing.T) {
	for name, f := range map[string]func() (*jsonschema.Schema, error){
		"RecordChangeParams": func() (*jsonschema.Schema, error) { return jsonschema.For[changelog.RecordChangeParams](nil) },
		"RecordChangeResult": func() (*jsonschema.Schema, error) { return jsonschema.For[changelog.RecordChangeResult](nil) },
		"ChangeFilter":       func() (*jsonschema.Schema, error) { return jsonschema.For[changelog.ChangeFilter](nil) },
		"ChangeList":         func() (*jsonschema.Schema, error) { return jsonschema.For[changelog.ChangeList](nil) },
		"DefineMetricParams": func() (*jsonschema.Schema, error) { return jsonschema.For[DefineMetricParams](nil) },
		"MetricDefinition":   func() (*jsonschema.Schema, error) { return jsonschema.For[MetricDefinition](nil) },
		"MonitorParams":      func() (*jsonschema.Schema, error) { return jsonschema.For[MonitorParams](nil) },
		"MonitorResult":      func() (*jsonschema.Schema, error) { return jsonschema.For[MonitorResult](nil) },
		"ReportParams":       func() (*jsonschema.Schema, error) { return jsonschema.For[ReportParams](nil) },
		"ReportResult":       func() (*jsonschema.Schema, error) { return jsonschema.For[ReportResult](nil) },
		"DiagnoseParams":     func() (*jsonschema.Schema, error) { return jsonschema.For[DiagnoseParams](nil) },
		"Diagnosis":          func() (*jsonschema.Schema, error) { return jsonschema.For[Diagnosis](nil) },
		"Incident":           func() (*jsonschema.Schema, error) { return jsonschema.For[Incident](nil) },
		"HistoryParams":      func() (*jsonschema.Schema, error) { return jsonschema.For[HistoryParams](nil) },
		"HistoryResult":      func() (*jsonschema.Schema, error) { return jsonschema.For[HistoryResult](nil) },
		"DraftParams":        func() (*jsonschema.Schema, error) { return jsonschema.For[DraftParams](nil) },
		"ProposalDraft":      func() (*jsonschema.Schema, error) { return jsonschema.For[ProposalDraft](nil) },
		"TransitionParams":   func() (*jsonschema.Schema, error) { return jsonschema.For[TransitionParams](nil) },
		"VerifyParams":       func() (*jsonschema.Schema, error) { return jsonschema.For[VerifyParams](nil) },
		"Verification":       func() (*jsonschema.Schema, error) { return jsonschema.For[Verification](nil) },
	} {
		s, err := f()
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		for prop, p := range s.Properties {
			if p.Description == "" && p.Ref == "" {
				t.Errorf("%s.%s has no description", name, prop)
			}
		}
	}
}

// Empty results encode lists as [] so a client never has to handle null.
func TestEmptyResultsEncodeArrays(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		s, _ := newService(t, db, tue(15, 0), newMemGraph())
		var outs []any
		cl, err := (&changelog.Log{DB: s.DB}).ListChanges(ctx, changelog.ChangeFilter{})
		outs = append(outs, cl, err)
		h, err := s.History(ctx, HistoryParams{Asset: "duckdb://a.b"})
		outs = append(outs, h, err)
		id := mustReport(t, s, Symptom{Kind: SymptomVolume, Asset: "duckdb://a.b", Observed: 1, At: tue(14, 0)}).Incidents[0].ID
		d, err := s.Diagnose(ctx, DiagnoseParams{IncidentID: id})
		outs = append(outs, d, err)
		inc, err := s.GetIncident(ctx, id)
		outs = append(outs, inc, err)
		mustDefine(t, s, DefineMetricParams{Name: "m", Description: "d", Asset: "duckdb://a.b"})
		m, err := s.MonitorMetric(ctx, MonitorParams{Metric: "m", Points: []MetricPoint{{At: tue(14, 0), Value: 1}}})
		outs = append(outs, m, err)
		for i := 0; i < len(outs); i += 2 {
			if outs[i+1] != nil && outs[i+1].(error) != nil {
				t.Fatal(outs[i+1])
			}
			b, err := json.Marshal(outs[i])
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(string(b), "null") {
				t.Errorf("%T encodes a null: %s", outs[i], b)
			}
		}
	})
}
