package approvals

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/dataworkers/dw/internal/lineage"
	"github.com/dataworkers/dw/internal/store"
	"github.com/dataworkers/dw/internal/store/storetest"
)

const marquez = "https://marquez.internal/"

// bigEvent is an OpenLineage run event naming in inputs and out outputs,
// and the names as the approver must be able to read them.
func bigEvent(in, out int, tag string) (map[string]any, []string, []string) {
	side := func(n int, prefix string) ([]any, []string) {
		var list []any
		var names []string
		for i := range n {
			name := fmt.Sprintf("%s_%s_%02d", prefix, tag, i)
			list = append(list, map[string]any{"namespace": "kafka://prod", "name": name})
			names = append(names, "kafka://prod/"+name)
		}
		return list, names
	}
	inputs, inNames := side(in, "in")
	outputs, outNames := side(out, "out")
	return map[string]any{
		"eventType": "RUNNING", "eventTime": "2026-03-10T15:05:00Z", "producer": "https://flink", "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json",
		"run":    map[string]any{"runId": "0195d8b4-2f0e-7000-8000-000000000001"},
		"job":    map[string]any{"namespace": "flink-prod", "name": "usage-hourly-rollup"},
		"inputs": inputs, "outputs": outputs,
	}, inNames, outNames
}

// exactPairs are the [namespace, name] pairs of one side of an event,
// exactly as given: what datasets_sha256 binds.
func exactPairs(event map[string]any, side string) [][2]string {
	var out [][2]string
	for _, d := range event[side].([]any) {
		m := d.(map[string]any)
		out = append(out, [2]string{m["namespace"].(string), m["name"].(string)})
	}
	return out
}

func lineageProposal(t *testing.T, event map[string]any, details map[string]any) (NewProposal, *ActionSpec) {
	t.Helper()
	a, err := LineageEventAction(marquez, event)
	if err != nil {
		t.Fatal(err)
	}
	return NewProposal{Kind: KindLineageEvent, What: "Post the rollup's RUNNING event to Marquez", Why: "Marquez lacks the job",
		Targets: []string{a.Asset}, Undo: "delete the run in Marquez", Action: a, Details: details, Proposer: "dw-incidents"}, a
}

func fieldNamed(a *ActionSpec, name string) (ActionField, bool) {
	for _, f := range a.Fields() {
		if f.Name == name {
			return f, true
		}
	}
	return ActionField{}, false
}

// TestLargeLineageEventShowsWhereEveryDatasetIs: a request for an event
// naming more datasets than it lists says how many there are, binds the
// digest of all of them, and can be made only when the whole list is kept
// with the proposal; the list read back is every dataset, in order, and
// hashes to the digest the approver was shown.
func TestLargeLineageEventShowsWhereEveryDatasetIs(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		s, _ := fixture(t, db)
		s.cfg.Domains[0].Assets = append(s.cfg.Domains[0].Assets, "openlineage://**")
		event, ins, outs := bigEvent(20, 11, "a")
		other, _, _ := bigEvent(20, 11, "b")
		want, err := CanonicalSHA256(map[string]any{"inputs": exactPairs(event, "inputs"), "outputs": exactPairs(event, "outputs")})
		if err != nil {
			t.Fatal(err)
		}

		np, action := lineageProposal(t, event, nil)
		if got := action.Params["datasets_sha256"]; got != want {
			t.Fatalf("datasets_sha256 = %v, want the digest of all 31 names %s", got, want)
		}
		listed, _ := action.Params["inputs"].([]any)
		if len(listed) != lineageDatasetsShown || action.Params["inputs_count"] != float64(20) || action.Params["outputs_count"] != float64(11) {
			t.Fatalf("params list %d inputs of %v, outputs %v", len(listed), action.Params["inputs_count"], action.Params["outputs_count"])
		}
		f, ok := fieldNamed(action, "datasets")
		wantLine := fmt.Sprintf("this request lists 8 of 20 inputs and 8 of 11 outputs; the approval covers all 31, bound by datasets_sha256 %s; see every one with: dw approvals show <this proposal's id> --all", want)
		if !ok || f.Value != wantLine {
			t.Fatalf("datasets field = %q (present %v), want %q", f.Value, ok, wantLine)
		}

		// Hostile: the full list is not kept, or the kept event is another.
		for name, details := range map[string]map[string]any{
			"no event kept":       nil,
			"another event kept":  {DetailLineageEvent: other},
			"event not an object": {DetailLineageEvent: "see attachment"},
		} {
			bad, _ := lineageProposal(t, event, details)
			_, err := s.Propose(ctx, bad)
			if !IsInputError(err) || !strings.Contains(err.Error(), "details."+DetailLineageEvent) || !strings.Contains(err.Error(), "lists 16 of the 31 datasets") {
				t.Errorf("%s: %v, want an input error asking for the bound event", name, err)
			}
		}
		if ps, err := s.List(ctx, Filter{}); err != nil || len(ps) != 0 {
			t.Fatalf("refused proposals changed the store: %d, %v", len(ps), err)
		}

		np.Details = map[string]any{DetailLineageEvent: event}
		p := mustPropose(t, s, np)
		stored, err := s.Get(ctx, p.ID)
		if err != nil {
			t.Fatal(err)
		}
		ds, err := stored.LineageDatasets()
		if err != nil {
			t.Fatal(err)
		}
		if !stored.DatasetsSummarized() || !slices.Equal(ds.Inputs, ins) || !slices.Equal(ds.Outputs, outs) || ds.SHA256 != want || ds.Total() != 31 {
			t.Fatalf("stored list: summarized %v, %d inputs, %d outputs, sha %s", stored.DatasetsSummarized(), len(ds.Inputs), len(ds.Outputs), ds.SHA256)
		}
		// Every plain-text rendering carries the line with the digest.
		for name, text := range map[string]string{"confirmation form": ElicitationRequest(*stored).Message, "action text": ActionText(stored.Action, "")} {
			if !slices.Contains(strings.Split(text, "\n"), "  datasets: "+wantLine) {
				t.Errorf("%s lacks the datasets line:\n%s", name, text)
			}
		}
		// Approving needs a channel that showed every dataset: a decider
		// without the full list's digest, or a channel other than the
		// terminal claiming it, decides nothing.
		if _, err := s.Decide(ctx, p.ID, term(t, s, "alice"), VerdictApprove, ""); !isInput(err) {
			t.Fatalf("approve without the full list shown: %v, want a refusal", err)
		}
		claimed, err := SlackDecider(s.cfg, "U0ALICE", map[string]string{"datasets_sha256": want})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Decide(ctx, p.ID, claimed, VerdictApprove, ""); !isInput(err) {
			t.Fatalf("a Slack decider vouching for the list: %v, want a refusal", err)
		}
		if got, err := s.Get(ctx, p.ID); err != nil || got.State != StatePending {
			t.Fatalf("after refused approvals: %v %v, want pending", got.State, err)
		}
		shown := term(t, s, "alice")
		shown.Evidence = map[string]string{"os_user": shown.OSUser, "datasets_sha256": want}
		if _, err := s.Decide(ctx, p.ID, shown, VerdictApprove, ""); err != nil {
			t.Fatalf("approve with the full list shown: %v", err)
		}
		// The forwarding tool builds the same action from the same event.
		if _, err := s.MayDispatch(ctx, Action{Kind: KindLineageEvent, ProposalID: p.ID, Spec: action}); err != nil {
			t.Fatalf("dispatch of the approved event: %v", err)
		}

		// A small event lists every dataset: nothing more to keep or show.
		small, _, _ := bigEvent(3, 2, "c")
		np, action = lineageProposal(t, small, nil)
		if _, ok := fieldNamed(action, "datasets"); ok {
			t.Errorf("a request listing every dataset claims a summary")
		}
		sp := mustPropose(t, s, np)
		if sp.DatasetsSummarized() {
			t.Errorf("small event summarized")
		}
		if _, err := s.Decide(ctx, sp.ID, term(t, s, "alice"), VerdictApprove, ""); err != nil {
			t.Fatalf("approve a small event: %v", err)
		}
	})
}

// TestApprovalRefusedWhenTheListCannotBeShown: a decision re-checks that
// the full list is there, so a proposal whose kept event no longer fits
// its action is not approvable, whatever its seal says.
func TestApprovalRefusedWhenTheListCannotBeShown(t *testing.T) {
	event, _, _ := bigEvent(9, 1, "a")
	other, _, _ := bigEvent(9, 1, "b")
	np, _ := lineageProposal(t, event, map[string]any{DetailLineageEvent: other})
	p := &Proposal{Kind: np.Kind, Action: np.Action, Details: np.Details}
	if err := checkLineageDatasets(p); !IsInputError(err) || !strings.Contains(err.Error(), "is not the event its action binds") {
		t.Fatalf("mismatched kept event: %v", err)
	}
	p.Details = nil
	if err := checkLineageDatasets(p); !IsInputError(err) || !strings.Contains(err.Error(), "does not keep its lineage event") {
		t.Fatalf("no kept event: %v", err)
	}
	p.Details = map[string]any{DetailLineageEvent: event}
	if err := checkLineageDatasets(p); err != nil {
		t.Fatalf("the bound event: %v", err)
	}
}

// TestTargetsAreCanonicalAssetIDs: a target is stored as its one asset id,
// so two spellings are one target and an approval for one spelling
// allows the action requested under the other; a target that is no asset
// id is refused and nothing is recorded.
func TestTargetsAreCanonicalAssetIDs(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		s, _ := fixture(t, db)
		names := lineage.NamesFromConfig(s.cfg)
		tableA, tableB := "snowflake://USAGE.usage_hourly", `snowflake://usage."USAGE_HOURLY"`
		ca, errA := names.Canonical(tableA)
		cb, errB := names.Canonical(tableB)
		if errA != nil || errB != nil || ca != cb {
			t.Fatalf("fixture: %s -> %s (%v), %s -> %s (%v); want one id", tableA, ca, errA, tableB, cb, errB)
		}
		np := holdDAG()
		np.Targets = []string{"AIRFLOW://dag/sync_metered_usage_to_stripe", " airflow://dag/sync_metered_usage_to_stripe", tableA, tableB}
		p := mustPropose(t, s, np)
		if want := []string{"airflow://dag/sync_metered_usage_to_stripe", ca}; !slices.Equal(p.Targets, want) {
			t.Fatalf("targets stored as %q, want %q", p.Targets, want)
		}

		// Approved under one spelling, the action requested under another
		// is the same action.
		spec := mustSpec(t, SystemAirflow, "benign_dag", "Airflow://dag/benign_dag", ActionLocation{Instance: airflowA}, map[string]any{"conf": map[string]any{}})
		rerun := mustPropose(t, s, NewProposal{Kind: KindRerun, What: "Rerun benign_dag", Why: "rebuilt", Targets: []string{"AIRFLOW://dag/benign_dag"},
			Undo: "clear it", Action: spec, Proposer: "dw-incidents"})
		if rerun.Action.Asset != "airflow://dag/benign_dag" || !slices.Equal(rerun.Targets, []string{"airflow://dag/benign_dag"}) {
			t.Fatalf("bound asset %s, targets %q", rerun.Action.Asset, rerun.Targets)
		}
		if _, err := s.Decide(ctx, rerun.ID, term(t, s, "bob"), VerdictApprove, ""); err != nil {
			t.Fatal(err)
		}
		req := mustSpec(t, SystemAirflow, "benign_dag", "airflow://dag/benign_dag", ActionLocation{Instance: airflowA}, map[string]any{"conf": map[string]any{}})
		if _, err := s.MayDispatch(ctx, Action{Kind: KindRerun, Asset: "AIRFLOW://dag/benign_dag", ProposalID: rerun.ID, Spec: req}); err != nil {
			t.Fatalf("the approved action spelled otherwise: %v", err)
		}
		if _, err := s.MayDispatch(ctx, Action{Kind: KindRerun, Asset: "airflow://dag/evil_dag", ProposalID: rerun.ID, Spec: req}); !IsRefusal(err) {
			t.Fatalf("another asset: %v, want a refusal", err)
		}

		before, err := s.List(ctx, Filter{})
		if err != nil {
			t.Fatal(err)
		}
		for name, target := range map[string]string{
			"no path":            "airflow://",
			"no platform":        "://dag/x",
			"bad platform":       "Air Flow://dag/x",
			"dashed bare name":   "sync-metered-usage",
			"too many parts":     "a.b.c.d",
			"newline smuggles":   "airflow://dag/benign\nairflow://dag/evil_dag",
			"escape sequence":    "airflow://dag/x\x1b[2K",
			"unterminated quote": `snowflake://usage."usage_hourly`,
		} {
			np := holdDAG()
			np.Targets = []string{"airflow://dag/sync_metered_usage_to_stripe", target}
			_, err := s.Propose(ctx, np)
			if !IsInputError(err) || !strings.Contains(err.Error(), "targets[1]") || !strings.Contains(err.Error(), "ASSET_IDS.md") {
				t.Errorf("%s (%q): %v, want an input error naming targets[1]", name, target, err)
			}
		}
		if after, err := s.List(ctx, Filter{}); err != nil || len(after) != len(before) {
			t.Fatalf("refused targets changed the store: %d -> %d proposals, %v", len(before), len(after), err)
		}
	})
}
