package approvals

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dataworkers/dw/internal/store"
	"github.com/dataworkers/dw/internal/store/storetest"
)

func mustSpec(t testing.TB, system, target, asset string, loc ActionLocation, params map[string]any) *ActionSpec {
	t.Helper()
	a, err := NewActionSpec(system, target, asset, loc, params)
	if err != nil {
		t.Fatalf("NewActionSpec: %v", err)
	}
	return a
}

const airflowA = "https://airflow-a.internal"

func benignDAG(t testing.TB, conf map[string]any) *ActionSpec {
	return mustSpec(t, SystemAirflow, "benign_dag", "airflow://dag/benign_dag", ActionLocation{Instance: airflowA}, map[string]any{"conf": conf})
}

// approvedRerun proposes a rerun bound to action (targets: its asset) with
// hidden notes, and has bob approve it.
func approvedRerun(t *testing.T, s *Service, action *ActionSpec, details map[string]any) *Proposal {
	t.Helper()
	targets := []string{"airflow://dag/benign_dag"}
	if action != nil {
		targets = []string{action.Asset}
	}
	p := mustPropose(t, s, NewProposal{IncidentID: "INC-1", Kind: KindRerun, What: "Rerun benign_dag for today",
		Why: "today's rows were rebuilt", Targets: targets, Undo: "clear the partition", Details: details, Action: action, Proposer: "dw-incidents"})
	if _, err := s.Decide(context.Background(), p.ID, term(t, s, "bob"), VerdictApprove, ""); err != nil {
		t.Fatalf("approve: %v", err)
	}
	return p
}

// TestDispatchComparesTheActionFieldByField: every difference between the
// approved action and the requested one is refused, and named.
func TestDispatchComparesTheActionFieldByField(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		s, _ := fixture(t, db)
		ctx := context.Background()
		// stream_* DAGs belong to streaming, every other DAG to billing.
		s.cfg.Domains[0].Assets = append(s.cfg.Domains[0].Assets, "airflow://dag/stream_*")
		conf := map[string]any{"date": "2026-03-10"}
		smuggled := map[string]any{"system": "airflow", "target": "evil_dag", "conf": map[string]any{"drop": true}}
		bound := approvedRerun(t, s, benignDAG(t, conf), smuggled)
		notesOnly := approvedRerun(t, s, nil, smuggled)
		dagsterJob := func(location string) *ActionSpec {
			return mustSpec(t, SystemDagster, "refresh_usage", "airflow://dag/benign_dag",
				ActionLocation{Instance: "https://dagster.internal", CodeLocation: location, Repository: "__repository__"}, nil)
		}
		dagster := approvedRerun(t, s, dagsterJob("billing_location"), nil)

		cases := []struct {
			name     string
			proposal *Proposal
			req      *ActionSpec
			want     []string
		}{
			{"details smuggle another DAG", bound, mustSpec(t, SystemAirflow, "evil_dag", "airflow://dag/evil_dag", ActionLocation{Instance: airflowA}, map[string]any{"conf": conf}),
				[]string{"approved dag_id benign_dag, requested evil_dag", "approved asset airflow://dag/benign_dag, requested airflow://dag/evil_dag"}},
			{"details smuggle a conf key", bound, benignDAG(t, map[string]any{"date": "2026-03-10", "drop": true}),
				[]string{"approved params hash", "key 'conf.drop' added"}},
			{"conf value changed", bound, benignDAG(t, map[string]any{"date": "2026-03-11"}),
				[]string{`key 'conf.date' changed from "2026-03-10" to "2026-03-11"`}},
			{"conf removed", bound, mustSpec(t, SystemAirflow, "benign_dag", "airflow://dag/benign_dag", ActionLocation{Instance: airflowA}, nil),
				[]string{"key 'conf' removed"}},
			{"another Airflow instance", bound, mustSpec(t, SystemAirflow, "benign_dag", "airflow://dag/benign_dag", ActionLocation{Instance: "https://airflow-b.internal"}, map[string]any{"conf": conf}),
				[]string{"approved instance https://airflow-a.internal, requested https://airflow-b.internal"}},
			{"another system", bound, mustSpec(t, SystemDBTCloud, "40000", "airflow://dag/benign_dag", ActionLocation{Instance: airflowA}, map[string]any{"conf": conf}),
				[]string{"approved system airflow, requested dbt_cloud"}},
			{"cross-domain target", bound, mustSpec(t, SystemAirflow, "stream_rollup", "airflow://dag/stream_rollup", ActionLocation{Instance: airflowA}, map[string]any{"conf": conf}),
				[]string{"approved domain billing, the DAG is in streaming"}},
			{"target in no domain", bound, mustSpec(t, SystemAirflow, "benign_dag", "nowhere://benign_dag", ActionLocation{Instance: airflowA}, map[string]any{"conf": conf}),
				[]string{"approved domain billing, the DAG benign_dag is in no configured domain"}},
			{"Dagster job in another code location", dagster, dagsterJob("scratch_location"),
				[]string{"approved code_location billing_location, requested scratch_location"}},
			{"only the notes name a run", notesOnly, mustSpec(t, SystemAirflow, "evil_dag", "airflow://dag/evil_dag", ActionLocation{Instance: airflowA}, nil),
				[]string{"binds no action", "its notes do not count"}},
			{"only the notes name a run, its own target", notesOnly, benignDAG(t, conf),
				[]string{"binds no action"}},
			{"a tool that names no action", bound, nil,
				[]string{"allows only airflow dag_id benign_dag", "named no action"}},
		}
		for _, c := range cases {
			_, err := s.MayDispatch(ctx, Action{Kind: KindRerun, ProposalID: c.proposal.ID, Spec: c.req})
			if !IsRefusal(err) {
				t.Errorf("%s: %v, want a refusal", c.name, err)
				continue
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%s: %v\nwant it to name %q", c.name, err, w)
				}
			}
		}
		// The approved action itself, in any key order, dispatches.
		if _, err := s.MayDispatch(ctx, Action{Kind: KindRerun, ProposalID: bound.ID, Spec: benignDAG(t, map[string]any{"date": "2026-03-10"})}); err != nil {
			t.Errorf("the approved action: %v", err)
		}

		// An edit of the stored action in the store allows nothing.
		if _, err := db.ExecContext(ctx, `UPDATE approval_proposals SET action = REPLACE(action, 'benign_dag', 'evil_dag') WHERE id = ?`, bound.ID); err != nil {
			t.Fatal(err)
		}
		_, err := s.MayDispatch(ctx, Action{Kind: KindRerun, ProposalID: bound.ID, Spec: benignDAG(t, conf)})
		if !IsRefusal(err) {
			t.Errorf("after a store edit of the target: %v", err)
		}
		if _, err := db.ExecContext(ctx, `UPDATE approval_proposals SET action = REPLACE(action, '2026-03-10', '2026-03-11') WHERE id = ?`, dagster.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := db.ExecContext(ctx, `UPDATE approval_proposals SET action = REPLACE(action, '"params":{}', '"params":{"run_config":{"x":1}}') WHERE id = ?`, dagster.ID); err != nil {
			t.Fatal(err)
		}
		_, err = s.MayDispatch(ctx, Action{Kind: KindRerun, ProposalID: dagster.ID, Spec: dagsterJob("billing_location")})
		// The proposal's seal (records.go) or the action's own params hash
		// refuses it, whichever looks first.
		if !IsRefusal(err) || !(strings.Contains(err.Error(), "the store was edited") || strings.Contains(err.Error(), "fails its seal")) {
			t.Errorf("after a store edit of the params: %v", err)
		}
	})
}

// TestStoredActionParamsMustHashToTheBoundHash: params edited in the
// stored text no longer match the bound hash, and the action is refused
// even where no seal covers the row.
func TestStoredActionParamsMustHashToTheBoundHash(t *testing.T) {
	text, err := encodeAction(benignDAG(t, map[string]any{"date": "2026-03-10"}))
	if err != nil {
		t.Fatal(err)
	}
	if a, err := decodeAction("P-1", text); err != nil || a.Target != "benign_dag" {
		t.Fatalf("intact: %+v, %v", a, err)
	}
	for _, edit := range []string{strings.Replace(text, "2026-03-10", "2026-03-11", 1), strings.Replace(text, `"date":`, `"drop":true,"date":`, 1)} {
		if _, err := decodeAction("P-1", edit); err == nil || !strings.Contains(err.Error(), "the store was edited") {
			t.Errorf("edited %s: %v", edit, err)
		}
	}
}

// TestProposeRefusesAnActionItCannotShow: a bound action must be one the
// kind carries out, on one of the targets, in the proposal's domain, and
// small enough to show in full.
func TestProposeRefusesAnActionItCannotShow(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		s, _ := fixture(t, db)
		ctx := context.Background()
		huge := map[string]any{"conf": map[string]any{"blob": strings.Repeat("x", MaxActionParams)}}
		wrongHash := benignDAG(t, nil)
		wrongHash.ParamsSHA256 = strings.Repeat("0", 64)
		cases := []struct {
			name string
			np   func(NewProposal) NewProposal
			want string
		}{
			{"a hold runs no tool", func(np NewProposal) NewProposal { np.Kind = KindHold; return np }, "a hold is carried out by people"},
			{"a rerun on the registry", func(np NewProposal) NewProposal {
				np.Action = mustSpec(t, SystemSchemaRegistry, "api-usage-value", "airflow://dag/benign_dag", ActionLocation{}, nil)
				return np
			}, "a rerun proposal cannot run on schema_registry"},
			{"asset not among the targets", func(np NewProposal) NewProposal {
				np.Targets = []string{"airflow://dag/other_dag"}
				return np
			}, "is not among the proposal's targets"},
			{"action on a target in no domain", func(np NewProposal) NewProposal {
				np.Action = mustSpec(t, SystemAirflow, "benign_dag", "nowhere://benign_dag", ActionLocation{}, nil)
				np.Targets = []string{"airflow://dag/benign_dag", "nowhere://benign_dag"}
				np.Domain = "billing"
				return np
			}, "(nowhere://benign_dag) is in no configured domain"},
			{"params too large to show", func(np NewProposal) NewProposal { np.Action = benignDAG(t, huge["conf"].(map[string]any)); return np },
				"so the approver can read every one"},
			{"a params hash that is not the params'", func(np NewProposal) NewProposal { np.Action = wrongHash; return np }, "is not the SHA-256 of its params"},
			{"a NUL in the target", func(np NewProposal) NewProposal {
				np.Action = &ActionSpec{System: SystemAirflow, Target: "benign\x00dag", Asset: "airflow://dag/benign_dag"}
				return np
			}, "contains a NUL character"},
			{"an unknown system", func(np NewProposal) NewProposal {
				np.Action = &ActionSpec{System: "cron", Target: "x", Asset: "airflow://dag/benign_dag"}
				return np
			}, `action system "cron" is not one Data Workers dispatches to`},
			{"a lineage event without its action", func(np NewProposal) NewProposal { np.Kind = KindLineageEvent; np.Action = nil; return np },
				"must bind its action"},
		}
		for _, c := range cases {
			np := c.np(NewProposal{Kind: KindRerun, What: "rerun", Why: "w", Targets: []string{"airflow://dag/benign_dag"}, Undo: "u",
				Proposer: "dw-incidents", Action: benignDAG(t, nil)})
			_, err := s.Propose(ctx, np)
			if !IsInputError(err) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%s: %v, want %q", c.name, err, c.want)
			}
		}
		ps, err := s.List(ctx, Filter{})
		if err != nil || len(ps) != 0 {
			t.Errorf("refused proposals were recorded: %d, %v", len(ps), err)
		}
		// A good one records its action with the domain set from the config.
		p := mustPropose(t, s, NewProposal{Kind: KindRerun, What: "rerun", Why: "w", Targets: []string{"airflow://dag/benign_dag"}, Undo: "u",
			Proposer: "dw-incidents", Action: benignDAG(t, map[string]any{"date": "2026-03-10"})})
		got, err := s.Get(ctx, p.ID)
		if err != nil || got.Action == nil || got.Action.Domain != "billing" || got.Action.Hash() != p.Action.Hash() {
			t.Fatalf("stored action: %+v, %v", got.Action, err)
		}
	})
}

// handles opens n independent stores on one database, as n processes
// would: each its own connection pool.
func handles(t *testing.T, engine string, n int) []*store.DB {
	t.Helper()
	ctx := context.Background()
	var out []*store.DB
	switch engine {
	case "sqlite":
		path := filepath.Join(t.TempDir(), "dw.db")
		for range n {
			db, err := store.OpenSQLite(ctx, path)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { db.Close() })
			out = append(out, db)
		}
	case "postgres":
		url := storetest.PostgresSchemaURL(t)
		for range n {
			db, err := store.OpenPostgres(ctx, url)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { db.Close() })
			out = append(out, db)
		}
	}
	return out
}

// TestOneExecutionPerApprovalAcrossProcesses: many callers on separate
// store handles race to carry out one approval; exactly one holds the
// claim, the others are told it is busy, and once it is done every retry
// gets its result and none acts again.
func TestOneExecutionPerApprovalAcrossProcesses(t *testing.T) {
	for _, engine := range []string{"sqlite", "postgres"} {
		t.Run(engine, func(t *testing.T) {
			dbs := handles(t, engine, 4)
			// One configuration and DW_HOME (its key) shared, as processes on
			// one machine share them.
			first, clk := fixture(t, dbs[0])
			svcs := []*Service{first}
			for _, db := range dbs[1:] {
				svcs = append(svcs, New(db, first.cfg, clk, nil))
			}
			ctx := context.Background()
			spec := benignDAG(t, map[string]any{"date": "2026-03-10"})
			p := approvedRerun(t, svcs[0], spec, nil)
			act := Action{Kind: KindRerun, ProposalID: p.ID, Spec: spec}

			const callers = 16
			var wg sync.WaitGroup
			execs := make([]*Execution, callers)
			errs := make([]error, callers)
			for i := range callers {
				wg.Add(1)
				go func(i int) {
					defer wg.Done()
					execs[i], errs[i] = svcs[i%len(svcs)].BeginExecution(ctx, act, "dw-connectors", DefaultLeaseForTest)
				}(i)
			}
			wg.Wait()
			var holder *Execution
			holders, busy := 0, 0
			for i := range callers {
				var be *BusyError
				switch {
				case errs[i] == nil && !execs[i].Done:
					holders++
					holder = execs[i]
				case errors.As(errs[i], &be):
					busy++
				default:
					t.Errorf("caller %d: %+v, %v", i, execs[i], errs[i])
				}
			}
			if holders != 1 || busy != callers-1 {
				t.Fatalf("%d callers hold the claim and %d were told it is busy; want 1 and %d", holders, busy, callers-1)
			}
			// A different action cannot take the approval over.
			other := Action{Kind: KindRerun, ProposalID: p.ID, Spec: benignDAG(t, map[string]any{"date": "2026-03-11"})}
			if _, err := svcs[1].BeginExecution(ctx, other, "dw-connectors", DefaultLeaseForTest); !IsRefusal(err) {
				t.Errorf("another action while claimed: %v", err)
			}
			if ok, err := svcs[0].FinishExecution(ctx, holder, map[string]string{"run_key": "K1"}); err != nil || !ok {
				t.Fatalf("finish: %v %v", ok, err)
			}
			for i := range callers {
				wg.Add(1)
				go func(i int) {
					defer wg.Done()
					execs[i], errs[i] = svcs[i%len(svcs)].BeginExecution(ctx, act, "dw-connectors", DefaultLeaseForTest)
				}(i)
			}
			wg.Wait()
			for i := range callers {
				if errs[i] != nil || !execs[i].Done || string(execs[i].Result) != `{"run_key":"K1"}` {
					t.Errorf("retry %d: %+v, %v", i, execs[i], errs[i])
				}
			}
			// Under the org-wide stop a retry still gets the result (it
			// does nothing), and a different action is still refused.
			if _, err := svcs[2].Stop(ctx, "ops", "freeze"); err != nil {
				t.Fatal(err)
			}
			if e, err := svcs[3].BeginExecution(ctx, act, "dw-connectors", DefaultLeaseForTest); err != nil || !e.Done {
				t.Errorf("retry under stop: %+v, %v", e, err)
			}
			if _, err := svcs[3].BeginExecution(ctx, other, "dw-connectors", DefaultLeaseForTest); !IsRefusal(err) {
				t.Errorf("another action under stop: %v", err)
			}
		})
	}
}

// TestExecutionClaimLapsesAndReleases: a released claim lets the next call
// try; a claim whose holder died lapses after the lease; the stop refuses
// a fresh claim.
func TestExecutionClaimLapsesAndReleases(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		s, clk := fixture(t, db)
		ctx := context.Background()
		spec := benignDAG(t, nil)
		p := approvedRerun(t, s, spec, nil)
		act := Action{Kind: KindRerun, ProposalID: p.ID, Spec: spec}
		e, err := s.BeginExecution(ctx, act, "dw-connectors", DefaultLeaseForTest)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.ReleaseExecution(ctx, e); err != nil {
			t.Fatal(err)
		}
		if _, err = s.BeginExecution(ctx, act, "dw-connectors", DefaultLeaseForTest); err != nil {
			t.Fatalf("after release: %v", err)
		}
		var be *BusyError
		if _, err := s.BeginExecution(ctx, act, "dw-connectors", DefaultLeaseForTest); !errors.As(err, &be) || !strings.Contains(err.Error(), "lapses after") {
			t.Fatalf("within the lease: %v", err)
		}
		clk.Advance(DefaultLeaseForTest + time.Second)
		taken, err := s.BeginExecution(ctx, act, "dw-connectors", DefaultLeaseForTest)
		if err != nil || taken.Done {
			t.Fatalf("after the lease: %+v, %v", taken, err)
		}
		if _, err := s.Stop(ctx, "ops", "freeze"); err != nil {
			t.Fatal(err)
		}
		clk.Advance(DefaultLeaseForTest + time.Second)
		if _, err := s.BeginExecution(ctx, act, "dw-connectors", DefaultLeaseForTest); !IsRefusal(err) || !strings.Contains(err.Error(), "org-wide stop") {
			t.Errorf("under stop: %v", err)
		}
	})
}

// DefaultLeaseForTest is a lease long enough that no claim lapses by
// itself while a test runs.
const DefaultLeaseForTest = 300_000_000_000 // 5 minutes

// TestEveryRenderingShowsEveryBoundField: the confirmation form and the
// receipt show each bound field on its own line, exactly; a proposal
// without an action says it runs nothing; notes are never shown as bound.
func TestEveryRenderingShowsEveryBoundField(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		s, _ := fixture(t, db)
		ctx := context.Background()
		spec := mustSpec(t, SystemDagster, "refresh_usage", "airflow://dag/benign_dag",
			ActionLocation{Instance: "https://dagster.internal", CodeLocation: "billing_location", Repository: "__repository__"},
			map[string]any{"run_config": map[string]any{"ops": map[string]any{"load": map[string]any{"config": map[string]any{"date": "2026-03-10"}}}}})
		p := approvedRerun(t, s, spec, map[string]any{"target": "evil_job"})
		bare := approvedRerun(t, s, nil, nil)
		lines := func(text string) map[string]bool {
			m := map[string]bool{}
			for _, l := range strings.Split(text, "\n") {
				m[strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(l), "- "))] = true
			}
			return m
		}
		stored, err := s.Get(ctx, p.ID)
		if err != nil {
			t.Fatal(err)
		}
		doc, err := Receipt(ctx, db, p.ReceiptID)
		if err != nil {
			t.Fatal(err)
		}
		renderings := map[string]string{
			"confirmation form": ElicitationRequest(*stored).Message,
			"receipt":           RenderMarkdown(doc),
			"action text":       ActionText(stored.Action, "  "),
		}
		for name, text := range renderings {
			got := lines(text)
			for _, f := range stored.Action.Fields() {
				if !got[f.Name+": "+f.Value] {
					t.Errorf("%s lacks the line %q:\n%s", name, f.Name+": "+f.Value, text)
				}
			}
			if name != "receipt" && strings.Contains(text, "evil_job") {
				t.Errorf("%s shows notes as if bound:\n%s", name, text)
			}
		}
		if !strings.Contains(renderings["receipt"], "action sha256 "+stored.Action.Hash()) {
			t.Errorf("receipt lacks the action's hash:\n%s", renderings["receipt"])
		}
		bareStored, err := s.Get(ctx, bare.ID)
		if err != nil {
			t.Fatal(err)
		}
		if msg := ElicitationRequest(*bareStored).Message; !strings.Contains(msg, "Runs: nothing; no tool may dispatch under this approval") {
			t.Errorf("form without an action:\n%s", msg)
		}
	})
}
