package approvals

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/dataworkers/dw/internal/config"
)

// ElicitationInputKey is the key a tool uses for the approval question in
// CallToolResult.InputRequests, and under which the client's answer comes
// back in the retry's InputResponses.
const ElicitationInputKey = "dw_approval"

// stateTTL bounds how long a sealed request state is honoured: an answer
// arriving later must be asked again, so it reflects current facts.
const stateTTL = 30 * time.Minute

// Form is the confirmation question put to the person in the MCP client,
// in plain terms: the transport adapter (internal/mcpserver/mcpconfirm)
// turns it into the protocol's form request, so this package stays free of
// any protocol SDK.
type Form struct {
	ProposalID string
	// Message is shown above the fields: what, why, blast radius, undo,
	// expiry, who proposed and who decides.
	Message string
	Fields  []FormField
}

// FormField is one answer the form asks for; every field is a string.
type FormField struct {
	Name        string
	Title       string
	Description string
	// Enum, when set, lists the only values accepted.
	Enum     []string
	Required bool
}

// The names of the form's fields, as the answer carries them back.
const (
	FieldDecision = "decision"
	FieldReason   = "reason"
)

// Answer is what the client reported back for the form. Action is the
// client's verb ("accept", "decline" or "cancel"); Decision and Reason are
// the fields' values when they came back as strings, "" otherwise.
type Answer struct {
	Action   string
	Decision string
	Reason   string
}

// ElicitationRequest is the form shown in the MCP client: the same facts
// as the Slack request, and a choice of approve or reject with a reason.
func ElicitationRequest(p Proposal) Form {
	var b strings.Builder
	fmt.Fprintf(&b, "Approve %s? %s\n\n", p.ID, Line(p.What))
	fmt.Fprintf(&b, "Why: %s\n", Text(p.Why, "    "))
	fmt.Fprintf(&b, "Action: %s on %s (domain %s)\n", p.Kind, formList(p.Targets, p.ID), p.Domain)
	if len(p.Scope) > 0 {
		fmt.Fprintf(&b, "Blast radius: %s\n", formList(p.Scope, p.ID))
	} else {
		b.WriteString("Blast radius: the targets only\n")
	}
	fmt.Fprintf(&b, "Undo: %s\n", Text(p.Undo, "    "))
	b.WriteString(ActionText(p.Action, ""))
	fmt.Fprintf(&b, "Expires: %s (then it escalates; it is never granted by default)\n", stamp(p.ExpiresAt))
	if p.Class == ClassLive {
		b.WriteString("Class: live data stack change; only the asset owner may approve.\n")
	}
	fmt.Fprintf(&b, "Proposed by %s; approver %s.", p.Proposer, p.Approver)
	if len(p.Copied) > 0 {
		fmt.Fprintf(&b, " Copied: %s.", strings.Join(p.Copied, ", "))
	}
	b.WriteString(" Declining or closing this form leaves the proposal undecided.")
	return Form{
		ProposalID: p.ID,
		Message:    b.String(),
		Fields: []FormField{
			{Name: FieldDecision, Title: "Decision", Required: true,
				Description: "approve lets the agent carry out " + p.ID + "; reject stops it",
				Enum:        []string{string(VerdictApprove), string(VerdictReject)}},
			{Name: FieldReason, Title: "Reason", Description: "why; recorded in the receipt"},
		},
	}
}

// formListBudget bounds, in characters, each list the form's message
// shows: a proposal may name 100 targets and 1,000 scope entries of 512
// characters each, more than anyone reads in a dialog.
const formListBudget = 2000

// formList is items joined on one line, cut within formListBudget to whole
// entries, saying how many are not shown and where every one is.
func formList(items []string, id string) string {
	var b strings.Builder
	for i, it := range items {
		e := Line(it)
		if i > 0 && b.Len()+len(e) > formListBudget {
			fmt.Fprintf(&b, " … and %d more; dw approvals show %s lists every one", len(items)-i, id)
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(e)
	}
	return b.String()
}

// RequestState is what a sealed state names: the proposal and the person
// asked, so a client cannot turn an answer about one proposal into a
// decision on another, nor answer for someone else.
type RequestState struct {
	ProposalID string    `json:"p"`
	PersonID   string    `json:"u"`
	Round      int       `json:"r"`
	Nonce      string    `json:"n"`
	IssuedAt   time.Time `json:"i"`
}

// stateKey is the HMAC key for request states: derived from the key kept
// outside the store (keys.go), so every agent process sharing the store
// and its key can open a state another sealed, and someone who can only
// write the store cannot forge one.
func (s *Service) stateKey(context.Context) ([]byte, error) {
	ks, err := s.keys()
	if err != nil {
		return nil, err
	}
	return ks.state, nil
}

// SealRequestState signs the proposal and person being asked.
func (s *Service) SealRequestState(ctx context.Context, p Proposal, personID string) (string, error) {
	key, err := s.stateKey(ctx)
	if err != nil {
		return "", err
	}
	var n [12]byte
	if _, err := rand.Read(n[:]); err != nil {
		return "", err
	}
	now, err := s.now(ctx)
	if err != nil {
		return "", err
	}
	body, err := json.Marshal(RequestState{ProposalID: p.ID, PersonID: personID, Round: p.Round,
		Nonce: base64.RawURLEncoding.EncodeToString(n[:]), IssuedAt: now})
	if err != nil {
		return "", err
	}
	enc := base64.RawURLEncoding.EncodeToString(body)
	return enc + "." + base64.RawURLEncoding.EncodeToString(sign(key, enc)), nil
}

func sign(key []byte, msg string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(msg))
	return m.Sum(nil)
}

// OpenRequestState checks a state's signature and age and returns what it
// names. A state not sealed by this store, or too old, is an error.
func (s *Service) OpenRequestState(ctx context.Context, state string) (RequestState, error) {
	var rs RequestState
	enc, sig, ok := strings.Cut(state, ".")
	if !ok {
		return rs, invalid("the request state is malformed; ask the person again")
	}
	key, err := s.stateKey(ctx)
	if err != nil {
		return rs, err
	}
	// Strict: an edited last character must not decode to the same signature.
	got, err := base64.RawURLEncoding.Strict().DecodeString(sig)
	if err != nil || !hmac.Equal(got, sign(key, enc)) {
		return rs, invalid("the request state was not issued by this store (signature mismatch); nothing was decided")
	}
	body, err := base64.RawURLEncoding.DecodeString(enc)
	if err != nil {
		return rs, invalid("the request state is malformed; ask the person again")
	}
	if err := json.Unmarshal(body, &rs); err != nil {
		return rs, invalid("the request state is malformed; ask the person again")
	}
	now, err := s.now(ctx)
	if err != nil {
		return rs, err
	}
	if age := now.Sub(rs.IssuedAt); age > stateTTL || age < -time.Minute {
		return rs, invalid("the confirmation for %s was asked %s ago; answers older than %s are not accepted, ask again", rs.ProposalID, age.Round(time.Second), stateTTL)
	}
	return rs, nil
}

// StartElicitation prepares the question for the person running the MCP
// client. It succeeds only when the OS user is mapped to a person who may
// decide the proposal now; otherwise the error says to use Slack or the
// terminal. The tool returns the form under ElicitationInputKey together
// with the sealed state, and on the retry passes both back to
// DecideFromElicitation.
func (s *Service) StartElicitation(ctx context.Context, osUser, proposalID string) (Form, string, error) {
	by, err := OSUserDecider(s.cfg, ChannelElicitation, osUser)
	if err != nil {
		return Form{}, "", fmt.Errorf("%w; the named approver decides in Slack or with `dw approve %s`", err, normID(proposalID))
	}
	// A login that stands for several people (the demo maps the one login
	// to every owner) names nobody by itself: the approvers recorded with
	// the proposal say who it acts as, so a proposal routed to any of them
	// is put to that person, not to whoever the config lists first.
	if loginPeople(s.cfg.People, osUser) > 1 {
		by.PersonID = ""
	}
	p, err := s.Get(ctx, proposalID)
	if err != nil {
		return Form{}, "", err
	}
	if !p.State.Open() {
		return Form{}, "", &DecidedError{Proposal: *p}
	}
	if allowed := mayDecide(*p); by.PersonID != "" && !slices.Contains(allowed, by.PersonID) {
		return Form{}, "", &NotApproverError{ProposalID: p.ID, PersonID: by.PersonID, Allowed: allowed, Class: p.Class}
	}
	if err := formCannotApprove(*p); err != nil {
		return Form{}, "", err
	}
	// Ask only someone the proposal's record names with this login: the
	// agent's config alone does not make anyone an approver.
	ks, err := s.keys()
	if err != nil {
		return Form{}, "", err
	}
	sp, err := checkProposal(ctx, s.db, ks, p.ID)
	if err != nil {
		return Form{}, "", err
	}
	if sp.Status != RecordOK {
		return Form{}, "", invalid("%s is %s (its seal does not hold), so nobody can decide it; have the agent propose it again", p.ID, sp.Status)
	}
	if by.PersonID, err = resolveDecider(*p, sp.Approvers, by); err != nil {
		return Form{}, "", err
	}
	state, err := s.SealRequestState(ctx, *p, by.PersonID)
	if err != nil {
		return Form{}, "", err
	}
	return ElicitationRequest(*p), state, nil
}

// formCannotApprove refuses to put to the client's form a lineage event
// that names more datasets than the form lists. `dw approve` prints every
// one and asks the person at the terminal to confirm them (or takes the
// digest printed with the list); a form showing 8 of 9,000 cannot stand
// for that, so the approver is sent to the terminal, where a rejection is
// as easy. Nothing is decided.
func formCannotApprove(p Proposal) error {
	c, ok := p.Action.datasetCounts()
	if !ok || !c.summarized() {
		return nil
	}
	return invalid("%s's lineage event names %d datasets and this form lists only %d of them, so it cannot record an approval of it; nothing was decided: "+
		"the approver runs `dw approve %s` at a terminal, which lists every dataset and asks to confirm them (`dw reject %s --reason …` rejects it)",
		p.ID, c.in+c.out, c.listedIn+c.listedOut, p.ID, p.ID)
}

// ErrNoElicitation refuses an answer from a client that did not declare
// the elicitation capability: nobody can be shown to have seen the form.
var ErrNoElicitation = &InputError{Msg: "this MCP client did not declare the elicitation capability when it connected, so it cannot show the person a confirmation form and no answer from it is accepted; nothing was recorded: the approver decides in Slack or with dw approve"}

// ElicitationOutcome is what came of asking the person in the client.
type ElicitationOutcome struct {
	ProposalID string `json:"proposal_id"`
	// Approved is true only for an accepted form whose decision is approve
	// and which Decide recorded.
	Approved bool `json:"approved"`
	// Recorded is true when a decision (approve or reject) was recorded.
	Recorded bool      `json:"recorded"`
	Verdict  Verdict   `json:"verdict,omitempty"`
	Message  string    `json:"message"`
	Proposal *Proposal `json:"proposal,omitempty"`
}

// DecideFromElicitation turns the client's answer into a decision, and
// fails closed: an error while asking, no answer, a decline or cancel, or
// an accepted form without decision "approve" never approves. Only an
// accepted "reject" records a rejection; the other cases record nothing,
// so the person can still decide in Slack or at the terminal. The error is
// non-nil for a forged or stale state, a person mismatch, a refused
// decision, or a store failure; the outcome is never Approved then.
//
// declared says whether the client declared the elicitation capability in
// initialize (the adapter reads it from the session). Without it no answer counts,
// whatever it says: on newer protocol versions a client answers input
// requests itself, so an answer from a client that never said it can show
// a form may come from the model rather than the person.
func (s *Service) DecideFromElicitation(ctx context.Context, declared bool, osUser, requestState string, result *Answer, elicitErr error) (ElicitationOutcome, error) {
	rs, err := s.OpenRequestState(ctx, requestState)
	out := ElicitationOutcome{ProposalID: rs.ProposalID}
	if err != nil {
		out.Message = "not approved: " + err.Error()
		return out, err
	}
	if !declared {
		err := ErrNoElicitation
		out.Message = "not approved: " + err.Error()
		return out, err
	}
	by, err := OSUserDecider(s.cfg, ChannelElicitation, osUser)
	if err != nil {
		out.Message = "not approved: " + err.Error()
		return out, err
	}
	// The person asked is the one the sealed state names; Decide checks
	// this login against the approvers recorded with the proposal.
	if asked, ok := s.cfg.Person(rs.PersonID); ok && slices.Contains(asked.OSUsers, osUser) {
		by.PersonID = rs.PersonID
	}
	if by.PersonID != rs.PersonID {
		err := invalid("the question about %s was put to %s, but this client runs as %s (%s)", rs.ProposalID, rs.PersonID, by.PersonID, osUser)
		out.Message = "not approved: " + err.Error()
		return out, err
	}
	switch {
	case elicitErr != nil:
		out.Message = fmt.Sprintf("not approved: asking %s in the client failed (%v); nothing was recorded, decide in Slack or with `dw approve %s`", by.PersonID, elicitErr, rs.ProposalID)
		return out, nil
	case result == nil:
		out.Message = fmt.Sprintf("not approved: no answer came back for %s; nothing was recorded", rs.ProposalID)
		return out, nil
	case result.Action != "accept":
		out.Message = fmt.Sprintf("not approved: %s chose %q on the form for %s; nothing was recorded, it stays open", by.PersonID, result.Action, rs.ProposalID)
		return out, nil
	}
	decision, reason := result.Decision, result.Reason
	var verdict Verdict
	switch decision {
	case string(VerdictApprove):
		verdict = VerdictApprove
	case string(VerdictReject):
		verdict = VerdictReject
	default:
		out.Message = fmt.Sprintf("not approved: the form for %s came back with decision %q (valid: approve, reject); nothing was recorded", rs.ProposalID, decision)
		return out, nil
	}
	if verdict == VerdictApprove {
		// The gate StartElicitation holds, held again where the decision is
		// recorded: a state sealed for this proposal is no licence to skip it.
		p, err := s.Get(ctx, rs.ProposalID)
		if err == nil {
			err = formCannotApprove(*p)
		}
		if err != nil {
			out.Message = "not approved: " + err.Error()
			return out, err
		}
	}
	by.Evidence = map[string]string{"os_user": osUser, "elicitation": result.Action, "decision": decision, "nonce": rs.Nonce,
		"asked_at": rs.IssuedAt.UTC().Format(time.RFC3339), "asked_round": fmt.Sprint(rs.Round)}
	p, err := s.Decide(ctx, rs.ProposalID, by, verdict, reason)
	if err != nil {
		out.Message = "not approved: " + err.Error()
		return out, err
	}
	out.Proposal, out.Recorded, out.Verdict = p, true, verdict
	out.Approved = p.State == StateApproved
	if out.Approved {
		out.Message = fmt.Sprintf("%s approved by %s in the client", p.ID, by.PersonID)
	} else {
		out.Message = fmt.Sprintf("%s rejected by %s in the client", p.ID, by.PersonID)
	}
	return out, nil
}

// loginPeople counts the people whose os_users include login.
func loginPeople(people []config.Person, login string) int {
	n := 0
	for _, p := range people {
		if slices.Contains(p.OSUsers, login) {
			n++
		}
	}
	return n
}
