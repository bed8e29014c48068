package orchestrate_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dataworkers/dw/internal/approvals"
	"github.com/dataworkers/dw/internal/orchestrate"
	"github.com/dataworkers/dw/internal/store"
	"github.com/dataworkers/dw/internal/store/storetest"
)

// TestDBTCloudRunIsGovernedByTheGraphsGlob: a dbt Cloud job's asset is
// dbt-cloud://job/<id>, as lineage names it, so a domain glob written the
// lineage way governs the run from proposal to dispatch, and one written
// with the system's name (dbt_cloud://) governs it too. A catch-all domain
// listed after it must never get the run.
func TestDBTCloudRunIsGovernedByTheGraphsGlob(t *testing.T) {
	for _, glob := range []string{"dbt-cloud://job/*", "dbt_cloud://job/*", "DBT_CLOUD://job/4*"} {
		t.Run(glob, func(t *testing.T) {
			org := fmt.Sprintf(`
people:
  - {id: bob, name: Bob Loyalty, slack_id: U0BOB, os_users: [bob]}
  - {id: alice, name: Alice Else, slack_id: U0ALICE, os_users: [alice]}
domains:
  - name: loyalty
    assets: [%q]
    autonomy: L2
    owners: [bob]
  - name: everything_else
    assets: ["**"]
    autonomy: L1
    owners: [alice]
`, glob)
			storetest.Each(t, func(t *testing.T, db *store.DB) {
				f := newFixtureWith(t, db, 5*time.Second, org)
				dbt := systems[2]
				want := fmt.Sprintf("dbt-cloud://job/%d", dbtJob)
				if got := orchestrate.AssetID(orchestrate.DBTCloud, dbt.target); got != want {
					t.Fatalf("AssetID = %s, want %s", got, want)
				}
				spec := f.spec(dbt.name, dbt.target, dbt.params)
				if spec.Asset != want {
					t.Fatalf("bound asset %s, want %s", spec.Asset, want)
				}
				// The target is given with the system's name; it is stored
				// as the graph's id and matches the bound asset.
				p, err := f.svc.Propose(f.ctx, approvals.NewProposal{IncidentID: "INC-9", Kind: approvals.KindRerun,
					What: "Rerun nightly tiers", Why: "tiers were computed from a partial load",
					Targets: []string{fmt.Sprintf("dbt_cloud://job/%d", dbtJob)}, Undo: "nothing: a rerun recomputes the same tiers",
					Action: spec, Proposer: "dw-incidents"})
				if err != nil {
					t.Fatalf("propose: %v", err)
				}
				if p.Domain != "loyalty" || p.Approver != "bob" || !slices.Equal(p.Targets, []string{want}) || p.Action.Domain != "loyalty" {
					t.Fatalf("proposal domain %s, approver %s, targets %v, action domain %s; want loyalty, bob, [%s], loyalty",
						p.Domain, p.Approver, p.Targets, p.Action.Domain, want)
				}
				if _, err := f.svc.Decide(f.ctx, p.ID, f.bob, approvals.VerdictApprove, ""); err != nil {
					t.Fatalf("approve: %v", err)
				}
				res, err := f.d.Run(f.ctx, f.params(dbt, p.ID))
				if err != nil {
					t.Fatalf("run: %v", err)
				}
				if res.Domain != "loyalty" || res.ProposalID != p.ID || res.Status != orchestrate.StatusTriggered || res.Existing {
					t.Fatalf("run: domain %s, proposal %s, status %s, existing %v", res.Domain, res.ProposalID, res.Status, res.Existing)
				}
				if n := dbt.trigger(f.srv); n != 1 {
					t.Fatalf("dbt Cloud saw %d triggers, want 1", n)
				}
			})
		})
	}
}

// TestDBTCloudTargetInNoDomainSaysWhatWasTried: without a glob that
// matches the job, the proposal is refused naming the asset's id, the
// globs tried and where to add one, and nothing is proposed.
func TestDBTCloudTargetInNoDomainSaysWhatWasTried(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		f := newFixtureWith(t, db, 5*time.Second, `
people:
  - {id: bob, name: Bob Billing, slack_id: U0BOB, os_users: [bob]}
domains:
  - name: billing
    assets: ["airflow://dag/*", "dbt://*.billing.*"]
    autonomy: L2
    owners: [bob]
`)
		dbt := systems[2]
		asset := fmt.Sprintf("dbt-cloud://job/%d", dbtJob)
		_, err := f.svc.Propose(f.ctx, approvals.NewProposal{IncidentID: "INC-9", Kind: approvals.KindRerun,
			What: "Rerun", Why: "partial load", Targets: []string{asset}, Undo: "nothing",
			Proposer: "dw-incidents"})
		if err == nil {
			t.Fatal("a target in no domain was proposed")
		}
		msg := err.Error()
		for _, want := range []string{asset + " is in no domain", "billing: airflow://dag/*, dbt://*.billing.*", "domains[].assets"} {
			if !strings.Contains(msg, want) {
				t.Errorf("error %q does not say %q", msg, want)
			}
		}
		if strings.Contains(msg, "name the domain") {
			t.Errorf("error %q asks for a domain no caller can name", msg)
		}
		if _, err := f.d.Run(f.ctx, orchestrate.Params{Approval: orchestrate.Approval{RequestKey: "INC-9-rerun"}, System: dbt.name, Target: dbt.target, Params: dbt.params}); !approvals.IsRefusal(err) {
			t.Errorf("an open-class run of a job in no domain: %v, want a refusal", err)
		}
		if n := dbt.trigger(f.srv); n != 0 {
			t.Errorf("dbt Cloud saw %d triggers", n)
		}
	})
}

// TestParamsNumbersBeyondExactAreRefused: a params number of magnitude
// 2^53 or more may already have been rounded by the JSON decoder (2^53+1
// reads as 2^53), so proposing or dispatching a run with one is refused,
// naming the param's path, before any orchestrator is asked; below 2^53
// and as a string the same value is accepted.
func TestParamsNumbersBeyondExactAreRefused(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		f := newFixture(t, db, 5*time.Second)
		runners, err := orchestrate.NewRunners(f.cfg.Orchestrators)
		if err != nil {
			t.Fatal(err)
		}
		airflow, dbt := systems[1], systems[2]
		var decoded map[string]any // as a tool's arguments arrive
		if err := json.Unmarshal([]byte(`{"conf": {"date": "2026-03-10", "n": 9007199254740993}}`), &decoded); err != nil {
			t.Fatal(err)
		}
		cases := []struct {
			name   string
			sys    system
			params map[string]any
			path   string
		}{
			{"2^53+1 in conf", airflow, decoded, "params.conf.n: 9007199254740992 cannot be carried exactly"},
			{"2^63 in a list", airflow, map[string]any{"conf": map[string]any{"ids": []any{1.0, math.Exp2(63)}}}, "params.conf.ids[1]: 9223372036854776000 cannot"},
			{"-1e29 under an odd key", airflow, map[string]any{"conf": map[string]any{"a b": -1.2345678901234568e+29}}, `params.conf["a b"]: -123456789012345680000000000000 cannot`},
			{"a json.Number", dbt, map[string]any{"threads": json.Number("18446744073709551616")}, "params.threads: 18446744073709551616 cannot"},
		}
		for _, c := range cases {
			if _, err := orchestrate.ActionFor(runners, string(c.sys.name), c.sys.target, c.params); err == nil || !strings.HasPrefix(err.Error(), c.path) {
				t.Errorf("propose %s: %v, want an error starting %q", c.name, err, c.path)
			}
			_, err := f.d.Run(f.ctx, orchestrate.Params{Approval: orchestrate.Approval{RequestKey: "INC-9-" + strings.ReplaceAll(c.name, " ", "-")},
				System: c.sys.name, Target: c.sys.target, Params: c.params})
			var inputErr *orchestrate.InputError
			if !errors.As(err, &inputErr) || !strings.HasPrefix(err.Error(), c.path) {
				t.Errorf("dispatch %s: %v, want an input error starting %q", c.name, err, c.path)
			}
		}
		for _, sys := range systems {
			if n := sys.trigger(f.srv); n != 0 {
				t.Errorf("%s saw %d triggers", sys.name, n)
			}
		}
		if runs, err := f.d.List(f.ctx, ""); err != nil || len(runs) != 0 {
			t.Errorf("refused runs were recorded: %d, %v", len(runs), err)
		}
		// Just below the limit, and the big value as a string, are runs.
		for _, params := range []map[string]any{
			{"conf": map[string]any{"n": math.Exp2(53) - 1}},
			{"conf": map[string]any{"n": "9007199254740993"}},
		} {
			spec, err := orchestrate.ActionFor(runners, string(airflow.name), airflow.target, params)
			if err != nil {
				t.Fatalf("%v: %v", params, err)
			}
			got, _ := json.Marshal(spec.Params["conf"])
			sent, _ := json.Marshal(params["conf"])
			if string(got) != string(sent) {
				t.Errorf("bound conf %s, sent %s", got, sent)
			}
		}
	})
}
