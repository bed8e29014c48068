package approvals

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dataworkers/dw/internal/clock"
	"github.com/dataworkers/dw/internal/store"
	"github.com/dataworkers/dw/internal/store/storetest"
)

func TestElicitationRequestShowsTheFacts(t *testing.T) {
	p := Proposal{ID: "P-ABCDEFGH", Kind: KindHold, Domain: "billing", What: "Pause the DAG", Why: "nulls in egress",
		Targets: []string{"airflow://dag/x"}, Scope: []string{"stripe invoices"}, Undo: "unpause", Proposer: "dw-incidents",
		Approver: "bob", Copied: []string{"alice"}, ExpiresAt: t0, Class: ClassLive}
	params := ElicitationRequest(p)
	for _, want := range []string{"Approve P-ABCDEFGH? Pause the DAG", "Why: nulls in egress", "Blast radius: stripe invoices",
		"Undo: unpause", "Expires: 2026-03-10 15:05 UTC", "only the asset owner may approve", "Copied: alice", "leaves the proposal undecided"} {
		if !strings.Contains(params.Message, want) {
			t.Errorf("message lacks %q:\n%s", want, params.Message)
		}
	}
	if params.ProposalID != p.ID || len(params.Fields) != 2 {
		t.Fatalf("form %+v", params)
	}
	decision, reason := params.Fields[0], params.Fields[1]
	if decision.Name != FieldDecision || !decision.Required || strings.Join(decision.Enum, ",") != "approve,reject" ||
		reason.Name != FieldReason || reason.Required || len(reason.Enum) != 0 {
		t.Errorf("fields %+v", params.Fields)
	}
}

func TestElicitationFailsClosed(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		s, clk := fixture(t, db)
		p := mustPropose(t, s, holdDAG())

		if _, _, err := s.StartElicitation(ctx, "root", p.ID); err == nil || !strings.Contains(err.Error(), "dw approve "+p.ID) {
			t.Errorf("unmapped OS user: %v", err)
		}
		var na *NotApproverError
		if _, _, err := s.StartElicitation(ctx, "dave", p.ID); !errors.As(err, &na) {
			t.Errorf("dave is not the approver: %v", err)
		}
		params, state, err := s.StartElicitation(ctx, "bob", p.ID)
		if err != nil || params.Message == "" || state == "" {
			t.Fatalf("start for bob: %v", err)
		}

		accept := func(content map[string]any) *Answer {
			// As the adapter reads a form: a non-string value is "".
			decision, _ := content[FieldDecision].(string)
			reason, _ := content[FieldReason].(string)
			return &Answer{Action: "accept", Decision: decision, Reason: reason}
		}
		notApproved := []struct {
			name   string
			result *Answer
			err    error
		}{
			{"client error", nil, errors.New("elicitation not supported")},
			{"error with an accept", accept(map[string]any{"decision": "approve"}), errors.New("timeout")},
			{"no answer", nil, nil},
			{"decline", &Answer{Action: "decline"}, nil},
			{"cancel", &Answer{Action: "cancel", Decision: "approve"}, nil},
			{"accept without decision", accept(nil), nil},
			{"accept with another decision", accept(map[string]any{"decision": "yes"}), nil},
			{"accept with a non-string decision", accept(map[string]any{"decision": true}), nil},
		}
		for _, c := range notApproved {
			out, err := s.DecideFromElicitation(ctx, true, "bob", state, c.result, c.err)
			if err != nil || out.Approved || out.Recorded || !strings.HasPrefix(out.Message, "not approved") {
				t.Errorf("%s: %+v, %v; want not approved, nothing recorded", c.name, out, err)
			}
		}
		if got, _ := s.Get(ctx, p.ID); got.State != StatePending {
			t.Fatalf("after failed answers the proposal is %s, want pending", got.State)
		}

		// Forged states never decide anything.
		enc, sig, _ := strings.Cut(state, ".")
		body, _ := base64.RawURLEncoding.DecodeString(enc)
		var rs RequestState
		_ = json.Unmarshal(body, &rs)
		other := mustPropose(t, s, holdDAG())
		rs.ProposalID = other.ID
		swapped, _ := json.Marshal(rs)
		forged := []string{
			"",
			"garbage",
			enc + ".AAAA",
			base64.RawURLEncoding.EncodeToString(swapped) + "." + sig,
		}
		for _, f := range forged {
			out, err := s.DecideFromElicitation(ctx, true, "bob", f, accept(map[string]any{"decision": "approve"}), nil)
			if err == nil || out.Approved {
				t.Errorf("forged state %q: %+v, %v", f, out, err)
			}
		}
		// The answer must come from the person asked.
		if out, err := s.DecideFromElicitation(ctx, true, "carol", state, accept(map[string]any{"decision": "approve"}), nil); err == nil || out.Approved {
			t.Errorf("carol answering bob's question: %+v, %v", out, err)
		}
		// A stale question must be asked again.
		clk.Advance(31 * time.Minute)
		if out, err := s.DecideFromElicitation(ctx, true, "bob", state, accept(map[string]any{"decision": "approve"}), nil); err == nil || out.Approved || !strings.Contains(err.Error(), "ask again") {
			t.Errorf("stale state: %+v, %v", out, err)
		}
		for _, id := range []string{p.ID, other.ID} {
			if got, _ := s.Get(ctx, id); got.State != StatePending {
				t.Fatalf("%s is %s after forged answers, want pending", id, got.State)
			}
		}

		_, state, err = s.StartElicitation(ctx, "bob", p.ID)
		if err != nil {
			t.Fatal(err)
		}
		out, err := s.DecideFromElicitation(ctx, true, "bob", state, accept(map[string]any{"decision": "approve", "reason": "go"}), nil)
		if err != nil || !out.Approved || !out.Recorded || out.Proposal.Decision.Channel != ChannelElicitation ||
			out.Proposal.Decision.Evidence["os_user"] != "bob" || out.Proposal.Decision.Reason != "go" {
			t.Fatalf("accepted approve: %+v, %v", out, err)
		}
		// A replay of the same answer is told it is decided.
		if out, err := s.DecideFromElicitation(ctx, true, "bob", state, accept(map[string]any{"decision": "approve"}), nil); err == nil || out.Recorded {
			t.Errorf("replayed answer: %+v, %v", out, err)
		}

		_, state, _ = s.StartElicitation(ctx, "bob", other.ID)
		out, err = s.DecideFromElicitation(ctx, true, "bob", state, accept(map[string]any{"decision": "reject", "reason": "not tonight"}), nil)
		if err != nil || out.Approved || !out.Recorded || out.Proposal.State != StateRejected {
			t.Errorf("accepted reject: %+v, %v", out, err)
		}
	})
}

// One login standing for several people, as the demo's dw.yaml maps the
// person at the terminal to every owner: the form goes to the proposal's
// named approver, whoever they are (not the first person the config lists
// with the login), and the decision is recorded as that person. A login
// mapped to one person only still cannot answer for another.
func TestElicitationAsksTheNamedApproverOfASharedLogin(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		cfg := testCfg(t)
		for i := range cfg.People {
			// alice is listed first; bob and carol share her login.
			if id := cfg.People[i].ID; id == "alice" || id == "bob" || id == "carol" {
				cfg.People[i].OSUsers = append(cfg.People[i].OSUsers, "demo")
			}
		}
		s := New(db, cfg, clock.NewFake(t0), nil)
		hold := mustPropose(t, s, holdDAG())   // billing: bob
		live := mustPropose(t, s, schemaV13()) // streaming, live: alice
		for _, tc := range []struct {
			p    *Proposal
			want string
		}{{hold, "bob"}, {live, "alice"}} {
			if tc.p.Approver != tc.want {
				t.Fatalf("%s routed to %s, want %s", tc.p.ID, tc.p.Approver, tc.want)
			}
			_, state, err := s.StartElicitation(ctx, "demo", tc.p.ID)
			if err != nil {
				t.Fatalf("start %s as the shared login: %v", tc.p.ID, err)
			}
			rs, err := s.OpenRequestState(ctx, state)
			if err != nil || rs.PersonID != tc.want {
				t.Fatalf("%s put to %q (%v), want %s", tc.p.ID, rs.PersonID, err, tc.want)
			}
			out, err := s.DecideFromElicitation(ctx, true, "demo", state, &Answer{Action: "accept", Decision: "approve", Reason: "checked"}, nil)
			if err != nil || !out.Approved || out.Proposal == nil || out.Proposal.Decision == nil || out.Proposal.Decision.PersonID != tc.want {
				t.Fatalf("decide %s: %+v %v; want approved by %s", tc.p.ID, out, err, tc.want)
			}
		}
		// dave's own login names dave alone: bob's proposal is not his.
		other := mustPropose(t, s, holdDAG())
		var na *NotApproverError
		if _, _, err := s.StartElicitation(ctx, "dave", other.ID); !errors.As(err, &na) {
			t.Fatalf("dave asked to decide bob's proposal: %v", err)
		}
		// The refusal recorded nothing.
		if p, _ := s.Get(ctx, other.ID); p.State != StatePending {
			t.Fatalf("%s is %s after refusals", other.ID, p.State)
		}
	})
}

// TestElicitationRefusesToApproveASummarizedLineageEvent: the form lists
// at most a few datasets of a lineage event, so, as `dw approve` refuses
// without the person confirming the full list, the form neither asks nor
// records an approval of an event naming more; a rejection still counts.
// An event the form lists whole is asked as any other proposal.
func TestElicitationRefusesToApproveASummarizedLineageEvent(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		s, _ := fixture(t, db)
		s.cfg.Domains[0].Assets = append(s.cfg.Domains[0].Assets, "openlineage://**")
		propose := func(in, out int, tag string) (*Proposal, string) {
			event, _, _ := bigEvent(in, out, tag)
			np, _ := lineageProposal(t, event, map[string]any{DetailLineageEvent: event})
			p := mustPropose(t, s, np)
			approver, ok := s.cfg.Person(p.Approver)
			if !ok || len(approver.OSUsers) == 0 {
				t.Fatalf("approver %q has no login", p.Approver)
			}
			return p, approver.OSUsers[0]
		}
		approve := &Answer{Action: "accept", Decision: string(VerdictApprove)}

		big, login := propose(900, 100, "big")
		if _, _, err := s.StartElicitation(ctx, login, big.ID); !IsInputError(err) ||
			!strings.Contains(err.Error(), "names 1000 datasets and this form lists only 16") || !strings.Contains(err.Error(), "`dw approve "+big.ID+"`") {
			t.Errorf("start for a summarized event: %v; want an input error sending the approver to dw approve %s", err, big.ID)
		}
		// A state sealed for it anyway (as by an earlier build) approves nothing.
		state, err := s.SealRequestState(ctx, *big, big.Approver)
		if err != nil {
			t.Fatal(err)
		}
		out, err := s.DecideFromElicitation(ctx, true, login, state, approve, nil)
		if !IsInputError(err) || out.Approved || out.Recorded || !strings.Contains(out.Message, "dw approve "+big.ID) {
			t.Errorf("approve answer for a summarized event: %+v, %v; want refused, nothing recorded", out, err)
		}
		if got, _ := s.Get(ctx, big.ID); got.State != StatePending {
			t.Fatalf("%s is %s after the refused approval, want pending", big.ID, got.State)
		}
		out, err = s.DecideFromElicitation(ctx, true, login, state, &Answer{Action: "accept", Decision: string(VerdictReject), Reason: "too wide"}, nil)
		if err != nil || !out.Recorded || out.Approved || out.Proposal.State != StateRejected {
			t.Errorf("reject answer for a summarized event: %+v, %v; want recorded", out, err)
		}

		small, login := propose(3, 2, "small")
		_, state, err = s.StartElicitation(ctx, login, small.ID)
		if err != nil {
			t.Fatalf("start for an event listed whole: %v", err)
		}
		if out, err := s.DecideFromElicitation(ctx, true, login, state, approve, nil); err != nil || !out.Approved {
			t.Errorf("approve an event listed whole: %+v, %v", out, err)
		}
	})
}

// TestElicitationFormCutsLongLists: the form's message lists targets and
// scope within a budget of whole entries and says how many it leaves out.
func TestElicitationFormCutsLongLists(t *testing.T) {
	p := Proposal{ID: "P-ABCDEFGH", Kind: KindHold, Domain: "billing", What: "Pause the DAGs", Why: "nulls", Undo: "unpause",
		Proposer: "dw-incidents", Approver: "bob", ExpiresAt: t0}
	for i := range MaxScope {
		p.Scope = append(p.Scope, fmt.Sprintf("airflow://dag/consumer_%04d_%s", i, strings.Repeat("x", 400)))
	}
	p.Targets = p.Scope[:MaxTargets]
	msg := ElicitationRequest(p).Message
	more := regexp.MustCompile(`(?m)^(Action: hold on|Blast radius:) (.*) … and (\d+) more; dw approvals show P-ABCDEFGH lists every one`)
	found := more.FindAllStringSubmatch(msg, -1)
	if len(found) != 2 || len(msg) > 3*formListBudget+2000 {
		t.Fatalf("message of %d characters, cut lists %d:\n%.600s", len(msg), len(found), msg)
	}
	for i, want := range []int{MaxTargets, MaxScope} {
		shown := len(strings.Split(found[i][2], ", "))
		if n, _ := strconv.Atoi(found[i][3]); shown+n != want || shown == 0 {
			t.Errorf("%s: %d shown and %d more; want %d in all", found[i][1], shown, n, want)
		}
	}
}

// TestRequestStateEditedAnywhereIsRefused: a request state with any one
// character changed, its signature's last one included (whose unused low
// bits a lenient decoder ignores), opens as nothing.
func TestRequestStateEditedAnywhereIsRefused(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		s, _ := fixture(t, db)
		p := mustPropose(t, s, holdDAG())
		state, err := s.SealRequestState(ctx, *p, p.Approver)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.OpenRequestState(ctx, state); err != nil {
			t.Fatalf("the state as sealed: %v", err)
		}
		for i := range state {
			for _, d := range []byte{1, 2, 4} {
				edited := []byte(state)
				edited[i] ^= d
				if _, err := s.OpenRequestState(ctx, string(edited)); !IsInputError(err) {
					t.Fatalf("character %d of %d edited (^%d): %v; want refused as input", i, len(state), d, err)
				}
			}
		}
	})
}
