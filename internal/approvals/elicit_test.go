package approvals

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

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
