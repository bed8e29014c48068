package incidents

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/dataworkers/dw/internal/store"
	"github.com/dataworkers/dw/internal/store/storetest"
)

func TestDraftProposalIsGroundedInTheDiagnosis(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		s, _ := newService(t, db, tue(15, 5), storyAGraph())
		mustRecord(t, s, schemaV12())
		id := mustReport(t, s, Symptom{Kind: SymptomNulls, Asset: "snowflake://usage.usage_hourly", Column: "egress_bytes", Observed: 0.18, At: tue(14, 10)}).Incidents[0].ID
		hold := DraftParams{IncidentID: id, Kind: "hold", What: "pause sync_metered_usage_to_stripe until egress is verified",
			Targets: []string{"airflow://dag/sync_metered_usage_to_stripe"}, Undo: "unpause the DAG"}
		if _, err := s.DraftProposal(ctx, hold); err == nil || !strings.Contains(err.Error(), "diagnosed incident") {
			t.Fatalf("draft before diagnosis: %v", err)
		}
		if _, err := s.Diagnose(ctx, DiagnoseParams{IncidentID: id}); err != nil {
			t.Fatal(err)
		}
		d, err := s.DraftProposal(ctx, hold)
		if err != nil {
			t.Fatal(err)
		}
		if d.Kind != ProposalHold || d.ApprovalKind != "hold" || !strings.Contains(d.Why, "version 12 of schema://api-usage-value") ||
			len(d.Rationale) == 0 || strings.Join(d.Scope, ",") != "snowflake://usage.usage_hourly" || d.Details == nil {
			t.Fatalf("draft %+v", d)
		}
		del := hold
		del.Kind, del.Undo = "delete_with_undo", "none"
		if _, err := s.DraftProposal(ctx, del); err == nil || !strings.Contains(err.Error(), "names no way back") {
			t.Fatalf("delete without undo: %v", err)
		}
		del.Undo = "restore the rows from usage_hourly_backup_20261013"
		if d, err := s.DraftProposal(ctx, del); err != nil || d.ApprovalKind != "delete" {
			t.Fatalf("delete with undo: %+v %v", d, err)
		}
		bad := hold
		bad.Kind = "pause"
		if _, err := s.DraftProposal(ctx, bad); err == nil || !strings.Contains(err.Error(), "valid: hold") {
			t.Fatalf("unknown kind: %v", err)
		}
		bad = hold
		bad.CauseRank = 5
		if _, err := s.DraftProposal(ctx, bad); err == nil || !strings.Contains(err.Error(), "1 ranked cause") {
			t.Fatalf("cause rank out of range: %v", err)
		}
		bad = hold
		bad.Targets = nil
		if _, err := s.DraftProposal(ctx, bad); err == nil || !strings.Contains(err.Error(), "targets is empty") {
			t.Fatalf("no targets: %v", err)
		}
		// Details are bounded whole: a 10 MiB note is refused before anything is stored.
		bad = hold
		bad.Details = map[string]any{"blob": strings.Repeat("A", 10<<20)}
		if _, err := s.DraftProposal(ctx, bad); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "at most 1114112") {
			t.Fatalf("10 MiB details: %v", err)
		}
	})
}
