package approvals

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dataworkers/dw/internal/store"
	"github.com/dataworkers/dw/internal/store/storetest"
)

func TestMayDispatchByLevel(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		s, _ := fixture(t, db)
		cases := []struct {
			name string
			a    Action
			want string // "" means permitted
		}{
			{"L2 without approval", Action{Asset: "kafka://prod/api-usage", Kind: KindRerun, Reversible: true},
				`domain streaming is at L2 (propose); a rerun needs an approved proposal (or L3 with class "rerun" opened)`},
			{"L3 opened reversible rerun", Action{Asset: "dbt://model.billing.fct_billable_egress", Kind: KindRerun, Reversible: true}, ""},
			{"L3 rerun not reversible", Action{Domain: "billing", Kind: KindRerun}, "not reversible, so it needs an approved proposal"},
			{"L3 class not opened", Action{Domain: "billing", Kind: KindHold, Reversible: true}, `class "hold" is not opened there (opened: rerun)`},
			{"L1 observe", Action{Asset: "bigquery://loyalty.member_balances", Kind: KindRerun, Reversible: true}, "is at L1 (observe): agents only read there"},
			{"asset in no domain", Action{Asset: "s3://x/y", Kind: KindRerun, Reversible: true}, "is in no configured domain"},
		}
		for _, c := range cases {
			permit, err := s.MayDispatch(ctx, c.a)
			if c.want == "" {
				if err != nil || permit.Domain != "billing" || !strings.Contains(permit.Basis, `class "rerun" opened`) {
					t.Errorf("%s: %+v, %v; want permitted", c.name, permit, err)
				}
				continue
			}
			if !IsRefusal(err) || !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "dispatch refused: ") {
				t.Errorf("%s: %v, want refusal containing %q", c.name, err, c.want)
			}
		}
		if _, err := s.MayDispatch(ctx, Action{Domain: "biling", Kind: KindRerun}); err == nil || !strings.Contains(err.Error(), "closest: billing") {
			t.Errorf("unknown domain: %v", err)
		}
	})
}

func TestMayDispatchWithApprovedProposal(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		s, _ := fixture(t, db)
		p := mustPropose(t, s, schemaV13())
		act := Action{Asset: "schema://api-usage-value", Kind: KindSchemaVersion, ProposalID: p.ID}
		if _, err := s.MayDispatch(ctx, act); !IsRefusal(err) || !strings.Contains(err.Error(), "awaiting alice") {
			t.Errorf("pending: %v", err)
		}
		if _, err := s.Decide(ctx, p.ID, slackBy(t, s, "U0ALICE"), VerdictApprove, ""); err != nil {
			t.Fatal(err)
		}
		permit, err := s.MayDispatch(ctx, act)
		if err != nil || permit.Level != "L2" || !strings.Contains(permit.Basis, "approved by alice via slack") || permit.Proposal.ID != p.ID {
			t.Fatalf("approved: %+v, %v", permit, err)
		}
		if _, err := s.MayDispatch(ctx, Action{Asset: "schema://other-value", Kind: KindSchemaVersion, ProposalID: p.ID}); !IsRefusal(err) || !strings.Contains(err.Error(), "not to schema://other-value") {
			t.Errorf("other target: %v", err)
		}
		if _, err := s.MayDispatch(ctx, Action{Asset: "schema://api-usage-value", Kind: KindConnector, ProposalID: p.ID}); !IsRefusal(err) || !strings.Contains(err.Error(), "approved a schema_version, not a connector_change") {
			t.Errorf("other kind: %v", err)
		}
		if _, err := s.MarkExecuted(ctx, p.ID, "dw-connectors", "registered id 13"); err != nil {
			t.Fatal(err)
		}
		if _, err := s.MayDispatch(ctx, act); !IsRefusal(err) || !strings.Contains(err.Error(), "already executed") {
			t.Errorf("replayed approval: %v", err)
		}
	})
}

func TestL4StillNeedsApprovalForLiveAndIrreversible(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		s, _ := fixture(t, db)
		pinDomains(t, s, "streaming")
		if _, err := s.SetAutonomy(ctx, "streaming", "L4", term(t, s, "alice"), "trial week"); err != nil {
			t.Fatal(err)
		}
		if _, err := s.MayDispatch(ctx, Action{Domain: "streaming", Kind: KindReplay, Reversible: true}); err != nil {
			t.Errorf("reversible replay at L4: %v", err)
		}
		if _, err := s.MayDispatch(ctx, Action{Domain: "streaming", Kind: KindSchemaVersion, Reversible: true}); !IsRefusal(err) || !strings.Contains(err.Error(), "live data stack") {
			t.Errorf("schema at L4: %v", err)
		}
		if _, err := s.MayDispatch(ctx, Action{Domain: "streaming", Kind: KindDelete}); !IsRefusal(err) || !strings.Contains(err.Error(), "not reversible") {
			t.Errorf("delete at L4: %v", err)
		}
	})
}

func TestOrgStopRefusesDispatchButNotReads(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		s, clk := fixture(t, db)
		p := mustPropose(t, s, holdDAG())
		if _, err := s.Decide(ctx, p.ID, term(t, s, "bob"), VerdictApprove, ""); err != nil {
			t.Fatal(err)
		}
		act := Action{Domain: "billing", Kind: KindHold, ProposalID: p.ID, Reversible: true}
		if _, err := s.MayDispatch(ctx, act); err != nil {
			t.Fatalf("before the stop: %v", err)
		}
		if _, err := s.Stop(ctx, "alice", ""); err == nil || !strings.Contains(err.Error(), "reason is required") {
			t.Errorf("stop without reason: %v", err)
		}
		// An unmapped login may still pull the cord; it is recorded as such.
		st, err := s.Stop(ctx, "ops-oncall", "bad deploy")
		if err != nil || st.By != "os:ops-oncall" {
			t.Fatalf("stop: %+v, %v", st, err)
		}
		if _, err := s.Stop(ctx, "alice", "again"); err == nil || !strings.Contains(err.Error(), "already in force") {
			t.Errorf("double stop: %v", err)
		}
		clk.Advance(time.Minute)
		_, err = s.MayDispatch(ctx, act)
		want := `dispatch refused: org-wide stop in force since 15:05 UTC on 2026-03-10 by os:ops-oncall: "bad deploy"`
		if !IsRefusal(err) || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("under stop: %v\nwant prefix %s", err, want)
		}
		if _, err := s.MayDispatch(ctx, Action{Domain: "billing", Kind: KindRerun, Reversible: true}); !IsRefusal(err) {
			t.Errorf("open-class rerun under stop: %v", err)
		}
		// Reads keep working.
		if _, err := s.Get(ctx, p.ID); err != nil {
			t.Errorf("read under stop: %v", err)
		}
		if _, err := Receipt(ctx, db, p.ID); err != nil {
			t.Errorf("receipt under stop: %v", err)
		}
		if _, err := s.Resume(ctx, Decider{PersonID: "dw-incidents", Channel: ChannelTerminal, OSUser: "root"}, "ok"); err == nil {
			t.Error("an agent resumed the stop")
		}
		if _, err := s.Resume(ctx, slackBy(t, s, "U0ALICE"), "ok"); err == nil || !strings.Contains(err.Error(), "at the terminal") {
			t.Errorf("resume via Slack: %v", err)
		}
		// Alice is a configured person, but no proposal has recorded her
		// as an approver: the store's record, not the config, says who
		// may lift the stop.
		if _, err := s.Resume(ctx, term(t, s, "alice"), "rolled back"); err == nil || !strings.Contains(err.Error(), `OS user "alice" is not a recorded identity of any approver of any domain`) {
			t.Errorf("resume by a person never recorded as an approver: %v", err)
		}
		was, err := s.Resume(ctx, term(t, s, "bob"), "rolled back")
		if err != nil || was.Reason != "bad deploy" {
			t.Fatalf("resume: %+v, %v", was, err)
		}
		if _, err := s.MayDispatch(ctx, act); err != nil {
			t.Errorf("after resume: %v", err)
		}
		if _, err := s.Resume(ctx, term(t, s, "bob"), ""); err == nil || !strings.Contains(err.Error(), "no org-wide stop") {
			t.Errorf("resume twice: %v", err)
		}
		if kinds := entryKinds(t, s, OrgReceiptID); strings.Join(kinds, ",") != "store_admin,approvers,stop,resume" {
			t.Errorf("org receipt %v", kinds)
		}
	})
}

func TestAutonomyChangesOnlyByOwnerAtTerminal(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		s, _ := fixture(t, db)
		pinDomains(t, s, "streaming")
		refused := []struct {
			name  string
			by    Decider
			level string
			want  string
		}{
			{"an agent", Decider{PersonID: "dw-incidents", Channel: ChannelTerminal, OSUser: "alice"}, "L3", "not a person"},
			{"via Slack", slackBy(t, s, "U0ALICE"), "L3", "only in the config or by a person at the terminal"},
			{"not an owner", term(t, s, "carol"), "L3", "carol does not own domain streaming; its owners are alice"},
			{"bad level", term(t, s, "alice"), "L9", `unknown level "L9"`},
		}
		for _, r := range refused {
			if _, err := s.SetAutonomy(ctx, "streaming", r.level, r.by, "why not"); err == nil || !strings.Contains(err.Error(), r.want) {
				t.Errorf("%s: %v, want %q", r.name, err, r.want)
			}
		}
		if _, err := s.SetAutonomy(ctx, "streaming", "L3", term(t, s, "alice"), ""); err == nil || !strings.Contains(err.Error(), "reason is required") {
			t.Errorf("no reason: %v", err)
		}
		li, err := s.Level(ctx, "streaming")
		if err != nil || li.Level != "L2" || li.Source != "config" {
			t.Fatalf("unchanged level: %+v, %v", li, err)
		}
		li, err = s.SetAutonomy(ctx, "streaming", "l3", term(t, s, "alice"), "reruns are safe here")
		if err != nil || li.Level != "L3" || li.Source != "set" || li.SetBy != "alice" || li.ConfigLevel != "L2" {
			t.Fatalf("set: %+v, %v", li, err)
		}
		li, err = s.ResetAutonomy(ctx, "streaming", term(t, s, "alice"), "trial over")
		if err != nil || li.Level != "L2" || li.Source != "config" {
			t.Fatalf("reset: %+v, %v", li, err)
		}
		// No proposal had recorded streaming's approvers: the store admin
		// pinned them (standard and live), then the two changes.
		doc, err := Receipt(ctx, db, OrgReceiptID)
		if err != nil || !doc.Chain.OK || len(doc.Entries) != 5 {
			t.Fatalf("org receipt: %+v, %v", doc, err)
		}
		var kinds []string
		for _, e := range doc.Entries {
			kinds = append(kinds, e.Kind)
		}
		var set struct{ To string }
		if strings.Join(kinds, ",") != "store_admin,approvers,approvers,autonomy,autonomy" || json.Unmarshal(doc.Entries[3].Payload, &set) != nil || set.To != "L3" {
			t.Fatalf("org receipt %v, first change %s", kinds, doc.Entries[3].Payload)
		}
	})
}

func TestRefusalIsDistinctFromFailure(t *testing.T) {
	var r error = &Refusal{Reason: "x"}
	if !IsRefusal(r) || IsRefusal(errors.New("dispatch refused: x")) {
		t.Error("IsRefusal must recognise only *Refusal")
	}
}

func TestGlobMatch(t *testing.T) {
	cases := []struct {
		pat, id string
		want    bool
	}{
		{"snowflake://usage.*", "snowflake://usage.usage_hourly", true},
		{"kafka://prod/*", "kafka://prod/api-usage", true},
		{"kafka://prod/*", "kafka://staging/api-usage", false},
		{"sigma://*", "sigma://workbook/revenue-today", false},
		{"sigma://**", "sigma://workbook/revenue-today", true},
		{"dbt://model.billing.**", "dbt://model.billing.fct_billable_egress", true},
		{"dbt://model.billing.**", "dbt://model.loyalty.fct_member_tier", false},
		{"airflow://dag/sync_metered_usage_to_stripe", "airflow://dag/sync_metered_usage_to_stripe", true},
	}
	for _, c := range cases {
		if got := globMatch(c.pat, c.id); got != c.want {
			t.Errorf("globMatch(%q, %q) = %v", c.pat, c.id, got)
		}
	}
}
