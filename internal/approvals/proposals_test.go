package approvals

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dataworkers/dw/internal/store"
	"github.com/dataworkers/dw/internal/store/storetest"
)

func TestProposeNamesApproverAndOpensReceipt(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		s, _ := fixture(t, db)
		p := mustPropose(t, s, holdDAG())
		if !strings.HasPrefix(p.ID, "P-") || len(p.ID) != 10 {
			t.Errorf("id %q: want P- and 8 characters", p.ID)
		}
		if p.Domain != "billing" || p.Approver != "bob" || !reflect.DeepEqual(p.ApproverOrder, []string{"bob", "carol"}) {
			t.Errorf("domain %s approver %s order %v; want billing, bob, [bob carol]", p.Domain, p.Approver, p.ApproverOrder)
		}
		if !reflect.DeepEqual(p.Copied, []string{"alice"}) || p.Class != ClassStandard || p.State != StatePending {
			t.Errorf("copied %v class %s state %s", p.Copied, p.Class, p.State)
		}
		if want := t0.Add(4 * time.Hour); !p.ExpiresAt.Equal(want) {
			t.Errorf("expires %v, want the default 4h: %v", p.ExpiresAt, want)
		}
		if p.ReceiptID != "INC-1" {
			t.Errorf("receipt %s, want the incident's INC-1", p.ReceiptID)
		}
		if got := entryKinds(t, s, "INC-1"); !reflect.DeepEqual(got, []string{EntryProposal, EntryRequest}) {
			t.Errorf("receipt entries %v", got)
		}
		// A proposal id leads to its incident's receipt.
		doc, err := Receipt(ctx, db, strings.ToLower(p.ID))
		if err != nil || doc.ID != "INC-1" || !doc.Chain.OK || len(doc.Proposals) != 1 {
			t.Fatalf("Receipt by proposal id: %+v, %v", doc, err)
		}
		// Without an incident the proposal is its own receipt.
		np := holdDAG()
		np.IncidentID = ""
		q := mustPropose(t, s, np)
		if q.ReceiptID != q.ID {
			t.Errorf("receipt %s, want the proposal's own id %s", q.ReceiptID, q.ID)
		}
	})
}

func TestProposeRefusesBadInput(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		s, _ := fixture(t, db)
		cases := []struct {
			name string
			edit func(*NewProposal)
			want string
		}{
			{"unknown kind", func(n *NewProposal) { n.Kind = "rerunn" }, `unknown kind "rerunn"; closest: rerun`},
			{"no undo", func(n *NewProposal) { n.Undo = " " }, "undo is empty"},
			{"no targets", func(n *NewProposal) { n.Targets = nil }, "targets is empty"},
			{"asset in no domain", func(n *NewProposal) { n.Targets = []string{"s3://bucket/x"} }, "asset s3://bucket/x is in no domain"},
			{"two domains", func(n *NewProposal) { n.Targets = append(n.Targets, "kafka://prod/api-usage") }, "targets span domains billing and streaming"},
			{"unknown domain", func(n *NewProposal) { n.Domain = "biling" }, `no domain "biling"; closest: billing`},
			{"person proposes", func(n *NewProposal) { n.Proposer = "bob" }, "is a person id"},
			{"no proposer", func(n *NewProposal) { n.Proposer = "" }, "proposer is empty"},
			{"unknown copy", func(n *NewProposal) { n.Copy = []string{"erin"} }, `unknown person "erin"`},
			{"unknown class", func(n *NewProposal) { n.Class = "urgent" }, `unknown class "urgent"`},
			{"too many targets", func(n *NewProposal) { n.Targets = dags(MaxTargets + 1) }, "targets names 101 assets; at most 100 per proposal"},
			{"too much scope", func(n *NewProposal) { n.Scope = dags(100000) }, "scope names 100000 entries; at most 1000 per proposal"},
		}
		for _, c := range cases {
			np := holdDAG()
			c.edit(&np)
			_, err := s.Propose(ctx, np)
			if err == nil || !strings.Contains(err.Error(), c.want) || !IsInputError(err) {
				t.Errorf("%s: err %v, want input error containing %q", c.name, err, c.want)
			}
		}
		if ps, err := s.List(ctx, Filter{}); err != nil || len(ps) != 0 {
			t.Errorf("bad input changed the store: %d proposals, %v", len(ps), err)
		}
	})
}

// dags is n distinct Airflow DAG asset ids in the fixture's billing domain.
func dags(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("airflow://dag/sync_%d", i)
	}
	return out
}

// TestProposeAcceptsTargetsAndScopeAtTheirLimits: the limits refuse only
// beyond them, and every entry at the limit is kept.
func TestProposeAcceptsTargetsAndScopeAtTheirLimits(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		s, _ := fixture(t, db)
		np := holdDAG()
		np.Targets, np.Scope = dags(MaxTargets), dags(MaxScope)
		p := mustPropose(t, s, np)
		if len(p.Targets) != MaxTargets || len(p.Scope) != MaxScope {
			t.Errorf("kept %d targets and %d scope entries; want %d and %d", len(p.Targets), len(p.Scope), MaxTargets, MaxScope)
		}
	})
}

func TestOwnerLookupNamesApproverWhenDomainHasNone(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		cfg := testCfg(t)
		cfg.Domains = append(cfg.Domains, cfgDomain("analytics", "sigma://**"))
		lookup := func(_ context.Context, asset string) (string, bool) {
			return map[string]string{"sigma://workbook/revenue-today": "dave", "sigma://workbook/orphan": "ghost"}[asset], true
		}
		s := New(db, cfg, nil, lookup)
		np := holdDAG()
		np.Targets = []string{"sigma://workbook/revenue-today"}
		p, err := s.Propose(ctx, np)
		if err != nil || p.Approver != "dave" {
			t.Fatalf("approver from the graph: %+v, %v", p, err)
		}
		np.Targets = []string{"sigma://workbook/orphan"}
		if _, err := s.Propose(ctx, np); err == nil || !strings.Contains(err.Error(), `"ghost", who is not a person`) {
			t.Errorf("owner who is not a person: %v", err)
		}
		np.Targets = []string{"sigma://workbook/unknown"}
		if _, err := s.Propose(ctx, np); err == nil || !strings.Contains(err.Error(), "no owner is recorded") {
			t.Errorf("no owner: %v", err)
		}
	})
}

func TestDecideOnlyByNamedPerson(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		s, _ := fixture(t, db)
		p := mustPropose(t, s, holdDAG())

		var na *NotApproverError
		if _, err := s.Decide(ctx, p.ID, slackBy(t, s, "U0DAVE"), VerdictApprove, ""); !errors.As(err, &na) || na.Allowed[0] != "bob" {
			t.Errorf("dave clicking: %v, want NotApproverError naming bob", err)
		}
		// Carol is next in the order, but only after escalation.
		if _, err := s.Decide(ctx, p.ID, term(t, s, "carol"), VerdictApprove, ""); !errors.As(err, &na) {
			t.Errorf("carol before escalation: %v, want NotApproverError", err)
		}
		refused := []struct {
			name string
			by   Decider
			want string
		}{
			{"the proposing agent", Decider{PersonID: "dw-incidents", Channel: ChannelTerminal, OSUser: "bob"}, "not a person in the config"},
			{"no person channel", Decider{PersonID: "bob", Channel: "mcp", OSUser: "bob"}, `channel "mcp" is not a person channel`},
			{"someone else's Slack", Decider{PersonID: "bob", Channel: ChannelSlack, SlackUserID: "U0DAVE"}, "is not bob's Slack account"},
			{"someone else's login", Decider{PersonID: "bob", Channel: ChannelTerminal, OSUser: "dave"}, "is not mapped to bob"},
			{"no identity", Decider{PersonID: "bob", Channel: ChannelElicitation}, "is not mapped to bob"},
		}
		for _, r := range refused {
			if _, err := s.Decide(ctx, p.ID, r.by, VerdictApprove, ""); err == nil || !strings.Contains(err.Error(), r.want) {
				t.Errorf("%s: %v, want %q", r.name, err, r.want)
			}
		}
		if _, err := s.Decide(ctx, p.ID, term(t, s, "bob"), "grant", ""); err == nil || !strings.Contains(err.Error(), `unknown verdict "grant"`) {
			t.Errorf("bad verdict: %v", err)
		}
		got, err := s.Get(ctx, p.ID)
		if err != nil || got.State != StatePending || got.Decision != nil {
			t.Fatalf("after refusals: %+v, %v; want still pending", got, err)
		}

		got, err = s.Decide(ctx, p.ID, slackBy(t, s, "U0BOB"), VerdictApprove, "hold it")
		if err != nil || got.State != StateApproved {
			t.Fatalf("bob approves: %+v, %v", got, err)
		}
		d := got.Decision
		if d.PersonID != "bob" || d.Channel != ChannelSlack || d.Evidence["slack_user"] != "U0BOB" || d.Evidence["message_ts"] != "1.2" || !d.At.Equal(t0) {
			t.Errorf("decision %+v", d)
		}
		var de *DecidedError
		if _, err := s.Decide(ctx, p.ID, slackBy(t, s, "U0BOB"), VerdictReject, ""); !errors.As(err, &de) ||
			!strings.Contains(err.Error(), "already decided: approved by bob via slack") {
			t.Errorf("second click: %v", err)
		}
		if _, err := s.Get(ctx, "P-NOPE0000"); !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "closest: "+p.ID) {
			t.Errorf("unknown id: %v", err)
		}
	})
}

func TestLiveClassAcceptsOnlyTheOwner(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		s, clk := fixture(t, db)
		np := schemaV13()
		np.Class = ClassStandard // a schema version is live whatever the agent says
		p := mustPropose(t, s, np)
		if p.Class != ClassLive || !reflect.DeepEqual(p.ApproverOrder, []string{"alice"}) {
			t.Fatalf("class %s order %v; want live, [alice]", p.Class, p.ApproverOrder)
		}
		// Carol is a streaming approver (a delegate), but not the owner.
		var na *NotApproverError
		if _, err := s.Decide(ctx, p.ID, slackBy(t, s, "U0CAROL"), VerdictApprove, ""); !errors.As(err, &na) || !strings.Contains(err.Error(), "no delegates") {
			t.Errorf("delegate on a live change: %v", err)
		}
		// Unanswered, it expires; it does not escalate to the delegate.
		clk.Advance(2 * time.Hour)
		esc, err := s.Sweep(ctx)
		if err != nil || len(esc) != 1 || !esc[0].Expired || esc[0].To != "" {
			t.Fatalf("sweep: %+v, %v; want one expiry", esc, err)
		}
		var de *DecidedError
		if _, err := s.Decide(ctx, p.ID, slackBy(t, s, "U0ALICE"), VerdictApprove, ""); !errors.As(err, &de) || !strings.Contains(err.Error(), "nothing was granted") {
			t.Errorf("late approval: %v", err)
		}
	})
}

func TestExpiryEscalatesAndNeverGrants(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		s, clk := fixture(t, db)
		np := holdDAG()
		np.Targets = []string{"kafka://prod/api-usage"}
		p := mustPropose(t, s, np) // streaming: alice then carol, 2h each

		clk.Advance(2*time.Hour - time.Second)
		if esc, err := s.Sweep(ctx); err != nil || len(esc) != 0 {
			t.Fatalf("before the deadline: %+v, %v", esc, err)
		}
		clk.Advance(time.Second)
		// Read lazily: Get applies the expiry without a sweep.
		got, err := s.Get(ctx, p.ID)
		if err != nil || got.State != StateEscalated || got.Approver != "carol" || got.Round != 1 {
			t.Fatalf("after the deadline: %+v, %v; want escalated to carol", got, err)
		}
		if want := clk.Now().Add(2 * time.Hour); !got.ExpiresAt.Equal(want) {
			t.Errorf("new deadline %v, want %v", got.ExpiresAt, want)
		}
		var rounds int
		if err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM approval_requests WHERE proposal_id = ?`, p.ID).Scan(&rounds); err != nil || rounds != 2 {
			t.Errorf("requests: %d, %v; want a new request for carol", rounds, err)
		}
		if _, err := s.MayDispatch(ctx, Action{Kind: KindHold, ProposalID: p.ID, Reversible: true}); !IsRefusal(err) || !strings.Contains(err.Error(), "awaiting carol") {
			t.Errorf("dispatch while escalated: %v", err)
		}

		clk.Advance(2 * time.Hour)
		esc, err := s.Sweep(ctx)
		if err != nil || len(esc) != 1 || !esc[0].Expired {
			t.Fatalf("exhausted order: %+v, %v", esc, err)
		}
		got, _ = s.Get(ctx, p.ID)
		if got.State != StateExpired || got.Decision != nil {
			t.Errorf("state %s decision %+v; want expired, no decision", got.State, got.Decision)
		}
		if _, err := s.MayDispatch(ctx, Action{Kind: KindHold, ProposalID: p.ID, Reversible: true}); !IsRefusal(err) || !strings.Contains(err.Error(), "is expired") {
			t.Errorf("dispatch after expiry: %v", err)
		}
		if kinds := entryKinds(t, s, "INC-1"); !reflect.DeepEqual(kinds, []string{EntryProposal, EntryRequest, EntryEscalated, EntryExpired}) {
			t.Errorf("receipt %v", kinds)
		}
		clk.Advance(24 * time.Hour)
		if got, _ := s.Get(ctx, p.ID); got.State != StateExpired {
			t.Errorf("expired is final, got %s", got.State)
		}
	})
}

func TestEarlierApproverMayStillDecideAfterEscalation(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		s, clk := fixture(t, db)
		p := mustPropose(t, s, holdDAG())
		clk.Advance(4 * time.Hour)
		got, err := s.Decide(ctx, p.ID, term(t, s, "bob"), VerdictReject, "the DAG must run tonight")
		if err != nil || got.State != StateRejected || got.Decision.Round != 1 || got.Approver != "carol" {
			t.Fatalf("bob after escalation: %+v, %v", got, err)
		}
	})
}

func TestConcurrentDecisionsOneWins(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		s, clk := fixture(t, db)
		p := mustPropose(t, s, holdDAG())
		clk.Advance(4 * time.Hour) // escalated: bob and carol may both decide now
		if _, err := s.Sweep(ctx); err != nil {
			t.Fatal(err)
		}
		deciders := []Decider{slackBy(t, s, "U0BOB"), slackBy(t, s, "U0CAROL"), term(t, s, "bob"), term(t, s, "carol")}
		verdicts := []Verdict{VerdictApprove, VerdictReject, VerdictReject, VerdictApprove}
		errs := make([]error, len(deciders))
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range deciders {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				_, errs[i] = s.Decide(ctx, p.ID, deciders[i], verdicts[i], "")
			}()
		}
		close(start)
		wg.Wait()
		won := 0
		for i, err := range errs {
			var de *DecidedError
			switch {
			case err == nil:
				won++
			case errors.As(err, &de):
				if !strings.Contains(err.Error(), "already decided") {
					t.Errorf("loser %d told %q", i, err)
				}
			default:
				t.Errorf("decider %d: unexpected error %v", i, err)
			}
		}
		if won != 1 {
			t.Fatalf("%d decisions won, want exactly 1", won)
		}
		var n int
		if err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM approval_decisions WHERE proposal_id = ?`, p.ID).Scan(&n); err != nil || n != 1 {
			t.Errorf("decision rows %d, %v", n, err)
		}
		if kinds := entryKinds(t, s, "INC-1"); kinds[len(kinds)-1] != EntryDecision || countOf(kinds, EntryDecision) != 1 {
			t.Errorf("receipt %v: want exactly one decision", kinds)
		}
	})
}

func countOf(ss []string, want string) int {
	n := 0
	for _, s := range ss {
		if s == want {
			n++
		}
	}
	return n
}

func TestStepsOnlyForApprovedChanges(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		s, _ := fixture(t, db)
		p := mustPropose(t, s, holdDAG())
		if _, err := s.RecordStep(ctx, p.ID, Step{Actor: "dw-connectors", Description: "paused"}); err == nil || !strings.Contains(err.Error(), "is pending") {
			t.Errorf("step before approval: %v", err)
		}
		if _, err := s.MarkExecuted(ctx, p.ID, "dw-connectors", ""); err == nil || !strings.Contains(err.Error(), "only approved proposals") {
			t.Errorf("execute before approval: %v", err)
		}
		if _, err := s.Decide(ctx, p.ID, term(t, s, "bob"), VerdictApprove, ""); err != nil {
			t.Fatal(err)
		}
		if _, err := s.RecordStep(ctx, p.ID, Step{Actor: "dw-connectors", Description: "paused the DAG",
			ChecksBefore: []Check{{Name: "dag active", Passed: true}}, ChecksAfter: []Check{{Name: "dag paused", Passed: true}}}); err != nil {
			t.Fatal(err)
		}
		got, err := s.MarkExecuted(ctx, p.ID, "dw-connectors", "paused at 15:20")
		if err != nil || got.State != StateExecuted {
			t.Fatalf("executed: %+v, %v", got, err)
		}
		if _, err := s.MarkExecuted(ctx, p.ID, "dw-connectors", ""); err == nil {
			t.Error("executed twice")
		}
		got, err = s.MarkUndone(ctx, p.ID, "bob", "unpaused after the fix")
		if err != nil || got.State != StateUndone {
			t.Fatalf("undone: %+v, %v", got, err)
		}
		want := []string{EntryProposal, EntryRequest, EntryDecision, EntryStep, EntryExecuted, EntryUndone}
		if kinds := entryKinds(t, s, "INC-1"); !reflect.DeepEqual(kinds, want) {
			t.Errorf("receipt %v, want %v", kinds, want)
		}
	})
}

func TestNoticesAreClaimedOnceAndRefreshedAfterDecision(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		s, clk := fixture(t, db)
		p := mustPropose(t, s, holdDAG())
		ns, err := s.ClaimNotices(ctx, 10)
		if err != nil || len(ns) != 1 || ns[0].Approver != "bob" || ns[0].Proposal.ID != p.ID {
			t.Fatalf("claim: %+v, %v", ns, err)
		}
		if again, _ := s.ClaimNotices(ctx, 10); len(again) != 0 {
			t.Errorf("claimed twice: %+v", again)
		}
		if err := s.ReleaseNotice(ctx, ns[0]); err != nil {
			t.Fatal(err)
		}
		ns, _ = s.ClaimNotices(ctx, 10)
		if len(ns) != 1 {
			t.Fatalf("released notice not claimable: %+v", ns)
		}
		if err := s.NoticePosted(ctx, ns[0], "slack", []MessageRef{{Channel: "D1", TS: "1.1"}}); err != nil {
			t.Fatal(err)
		}
		if r, _ := s.ClaimRefreshes(ctx, 10); len(r) != 0 {
			t.Errorf("refresh before any outcome: %+v", r)
		}
		clk.Advance(4 * time.Hour) // escalates: a new notice for carol, a refresh for bob's message
		ns, _ = s.ClaimNotices(ctx, 10)
		if len(ns) != 1 || ns[0].Approver != "carol" || ns[0].Previous != "bob" || ns[0].Round != 1 {
			t.Fatalf("escalation notice: %+v", ns)
		}
		r, err := s.ClaimRefreshes(ctx, 10)
		if err != nil || len(r) != 1 || r[0].Outcome != "escalated" || r[0].Messages[0].TS != "1.1" {
			t.Fatalf("refresh: %+v, %v", r, err)
		}
		if kinds := entryKinds(t, s, "INC-1"); countOf(kinds, EntryNotified) != 1 {
			t.Errorf("receipt %v: want the posting recorded", kinds)
		}
	})
}

// The library's only door to a decision is Decide (and the elicitation
// path that ends in it); an agent tool has nothing else to call.
func TestNoOtherApprovalEntryPoint(t *testing.T) {
	// ProvenApproval only checks an approval already decided.
	allowed := map[string]bool{"Decide": true, "DecideFromElicitation": true, "ProvenApproval": true}
	typ := reflect.TypeOf(&Service{})
	for i := 0; i < typ.NumMethod(); i++ {
		name := typ.Method(i).Name
		l := strings.ToLower(name)
		if (strings.Contains(l, "approv") || strings.Contains(l, "grant") || strings.Contains(l, "decide") || strings.Contains(l, "reject")) && !allowed[name] {
			t.Errorf("Service.%s looks like a decision entry point besides Decide", name)
		}
	}
}

// A decision's reason came through unchecked from every channel: a 3 MiB
// reason sent back in the client's form was sealed into the receipt, and
// get_receipt and get_incident then answered 3 MB each; a NUL in it is
// text PostgreSQL cannot store. A reason over MaxReason characters or
// holding a control or invisible formatting character is refused, nothing
// is decided, and the same person may decide again with a fit reason.
func TestDecisionReasonIsBoundedAndPlain(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		s, _ := fixture(t, db)
		p := mustPropose(t, s, holdDAG())
		for name, reason := range map[string]string{
			"too long":  strings.Repeat("r", MaxReason+1),
			"NUL":       "looks fine\x00",
			"bidi":      "approve \u202eevil",
			"a control": "ok\x1b[2J",
		} {
			_, err := s.Decide(ctx, p.ID, term(t, s, "bob"), VerdictReject, reason)
			var ie *InputError
			if !errors.As(err, &ie) || !strings.Contains(ie.Msg, "nothing was decided") {
				t.Errorf("%s: %v, want an input error saying nothing was decided", name, err)
			}
		}
		got, err := s.Get(ctx, p.ID)
		if err != nil || got.State != StatePending || got.Decision != nil {
			t.Fatalf("after refused reasons: %+v, %v; want still pending", got, err)
		}
		reason := strings.Repeat("é", MaxReason) // characters, not bytes
		d, err := s.Decide(ctx, p.ID, term(t, s, "bob"), VerdictApprove, "line one\n"+reason[:len(reason)-len("line one\n")*2])
		if err != nil || d.State != StateApproved {
			t.Fatalf("a reason within the rule: %+v, %v", d, err)
		}
	})
}
