// Package approvals is the governance core every agent shares: proposals
// put to a named person, decisions that only people make, expiry that
// escalates and never grants, the autonomy level and org-wide stop that
// decide whether an action may dispatch, and the hash-chained receipt an
// auditor reads afterwards.
//
// Everything lives in the store, because the agents are short-lived stdio
// processes and the Slack listener is another process: a request made by
// one must be decidable from any other.
//
// The only way to approve is Decide with a Decider naming a configured
// person and the channel that vouches for them (Slack, MCP elicitation or
// the terminal). There is deliberately no other entry point.
//
// Who governs a domain (sets its autonomy, lifts the stop) is what the org
// receipt records, never the config of whoever runs dw. Approvers get on
// record only with a proposal an agent records, or by an act of the store
// admin, the one trust root sealed as the org receipt's first entry (the
// owner of the SQLite file, or the account that first sealed a PostgreSQL
// store's org receipt): governors.go states the rule and the migration of
// older stores. Every read that gates dispatch first checks the org chain
// from the point this process last verified, and fails closed when it
// does not verify (orgchain.go).
package approvals

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/dataworkers/dw/internal/clock"
	"github.com/dataworkers/dw/internal/config"
	"github.com/dataworkers/dw/internal/lineage"
	"github.com/dataworkers/dw/internal/store"
)

// State is where a proposal stands.
type State string

// Proposal states. Pending and escalated wait for a person; the others
// are final except approved (which becomes executed) and executed (which
// may become undone).
const (
	StatePending   State = "pending"
	StateEscalated State = "escalated"
	StateApproved  State = "approved"
	StateRejected  State = "rejected"
	StateExpired   State = "expired"
	StateExecuted  State = "executed"
	StateUndone    State = "undone"
)

// States lists every state, for validation messages.
var States = []State{StatePending, StateEscalated, StateApproved, StateRejected, StateExpired, StateExecuted, StateUndone}

// Open reports whether the proposal still waits for a decision.
func (s State) Open() bool { return s == StatePending || s == StateEscalated }

// Class says who may approve a proposal.
type Class string

// Approval classes.
const (
	// ClassStandard accepts the domain's approvers in escalation order.
	ClassStandard Class = "standard"
	// ClassLive is for changes to the live data stack (a schema
	// registration, a connector change): only the asset's owner may
	// approve, never a delegate, so it never escalates.
	ClassLive Class = "live"
)

// Action kinds a proposal can carry.
const (
	KindHold          = "hold"
	KindDiff          = "diff"
	KindDelete        = "delete"
	KindReplay        = "replay"
	KindSchemaVersion = "schema_version"
	KindConnector     = "connector_change"
	KindRerun         = "rerun"
	KindRedeploy      = "redeploy"
	KindBackfill      = "backfill"
	// KindLineageEvent posts one OpenLineage event to the configured
	// endpoint, a write outside the store like any other.
	KindLineageEvent = "lineage_event"
)

// Kinds lists the valid action kinds.
var Kinds = []string{KindHold, KindDiff, KindDelete, KindReplay, KindSchemaVersion, KindConnector, KindRerun, KindRedeploy, KindBackfill, KindLineageEvent}

// liveKinds change the live data stack and always take ClassLive.
var liveKinds = map[string]bool{KindSchemaVersion: true, KindConnector: true}

// Channel is how a person's decision reached us.
type Channel string

// The person channels. There is no agent channel.
const (
	ChannelSlack       Channel = "slack"
	ChannelElicitation Channel = "elicitation"
	ChannelTerminal    Channel = "terminal"
)

// Verdict is a person's answer.
type Verdict string

// Verdicts.
const (
	VerdictApprove Verdict = "approve"
	VerdictReject  Verdict = "reject"
)

// Proposal is a change put to a named approver.
type Proposal struct {
	ID         string   `json:"id" jsonschema:"proposal id, e.g. P-7K3M9QXA"`
	IncidentID string   `json:"incident_id,omitempty" jsonschema:"incident the proposal belongs to, if any"`
	ReceiptID  string   `json:"receipt_id" jsonschema:"receipt that records this proposal (the incident id, else the proposal id)"`
	Domain     string   `json:"domain" jsonschema:"domain whose rules apply"`
	Kind       string   `json:"kind" jsonschema:"action kind: hold, diff, delete, replay, schema_version, connector_change, rerun, redeploy or backfill"`
	Class      Class    `json:"class" jsonschema:"standard (domain approvers in order) or live (only the asset owner)"`
	What       string   `json:"what" jsonschema:"the change, in one line"`
	Why        string   `json:"why" jsonschema:"the reason for it"`
	Targets    []string `json:"targets" jsonschema:"asset ids the change acts on"`
	Scope      []string `json:"scope,omitempty" jsonschema:"blast radius: assets and consumers the change touches"`
	Undo       string   `json:"undo" jsonschema:"how to reverse the change"`
	// Action is exactly what the approval allows to run; nil for a
	// proposal people carry out themselves (a hold, a diff).
	Action *ActionSpec `json:"action,omitempty" jsonschema:"the action the approval allows, every field of it: system, target, location, params and domain"`
	// Details are free-form notes for people; they never widen or change
	// what may run.
	Details       map[string]any `json:"details,omitempty" jsonschema:"free-form notes; never used to decide what may run"`
	Proposer      string         `json:"proposer" jsonschema:"agent that proposed it"`
	Approver      string         `json:"approver" jsonschema:"person whose answer is awaited (or was given)"`
	ApproverOrder []string       `json:"approver_order" jsonschema:"escalation order of person ids"`
	Round         int            `json:"round" jsonschema:"index into approver_order of the current request"`
	Copied        []string       `json:"copied,omitempty" jsonschema:"person ids copied on the request"`
	State         State          `json:"state" jsonschema:"pending, escalated, approved, rejected, expired, executed or undone"`
	CreatedAt     time.Time      `json:"created_at"`
	ExpiresAt     time.Time      `json:"expires_at" jsonschema:"when the current request expires and escalates"`
	UpdatedAt     time.Time      `json:"updated_at"`
	Decision      *Decision      `json:"decision,omitempty" jsonschema:"the person's decision, once made"`

	// expiry is the wait given to each approver.
	expiry time.Duration
	// cfgOrder is the approver order the proposing agent's config gives,
	// before routing to the approvers on record (routing.go).
	cfgOrder []string
	// actionErr says the stored action is unreadable or was edited.
	actionErr error
}

// Decision is a person's recorded answer.
type Decision struct {
	Verdict  Verdict           `json:"verdict" jsonschema:"approve or reject"`
	PersonID string            `json:"person" jsonschema:"person id from the config"`
	Channel  Channel           `json:"channel" jsonschema:"slack, elicitation or terminal"`
	Evidence map[string]string `json:"evidence" jsonschema:"what the channel vouched (Slack user, OS user, …)"`
	Reason   string            `json:"reason,omitempty"`
	Round    int               `json:"round" jsonschema:"which request round was answered"`
	At       time.Time         `json:"at"`
}

// OwnerLookup finds the owner of an asset in the context graph. It lets
// this package resolve approvers without importing the lineage package.
type OwnerLookup func(ctx context.Context, assetID string) (owner string, ok bool)

// Service applies the rules against one store and configuration.
type Service struct {
	db     *store.DB
	cfg    *config.Config
	clk    clock.Clock
	owners OwnerLookup
	// ids names assets as incidents and verification do: targets are
	// stored, and domains matched, by the one identity of each asset.
	ids lineage.Identities
	// replay is set once the store is known to be made for replay (now).
	replay atomic.Bool
}

// New builds a Service. owners may be nil when no context graph is at hand;
// then only domain owners from the config can be named approvers.
func New(db *store.DB, cfg *config.Config, clk clock.Clock, owners OwnerLookup) *Service {
	if clk == nil {
		clk = clock.System{}
	}
	if cfg != nil {
		registerHome(db, cfg.Home)
	}
	return &Service{db: db, cfg: cfg, clk: clk, owners: owners, ids: lineage.StoreIdentities(db, cfg)}
}

// keys are the store's MAC keys, kept outside the store (see keys.go).
func (s *Service) keys() (*keyset, error) { return keysForQuerier(s.db) }

// Config is the configuration the service applies.
func (s *Service) Config() *config.Config { return s.cfg }

// NotApproverError refuses a decision by someone who is not a named approver.
type NotApproverError struct {
	ProposalID string
	PersonID   string
	// Allowed are the people who may decide now.
	Allowed []string
	Class   Class
	// Detail, when set, says why the decider's identity was refused.
	Detail string
	// Recorded describes the approvers' identities recorded with the
	// proposal, when the decider's identity did not match.
	Recorded string
}

// Error names who tried and who may decide.
func (e *NotApproverError) Error() string {
	who := strings.Join(e.Allowed, " or ")
	msg := fmt.Sprintf("%s may not decide %s: only the named approver %s may", e.PersonID, e.ProposalID, who)
	if e.Class == ClassLive {
		msg = fmt.Sprintf("%s may not decide %s: it changes the live data stack, so only the asset owner %s may approve it (no delegates)", e.PersonID, e.ProposalID, who)
	}
	if e.Detail != "" {
		msg = fmt.Sprintf("%s: only the named approver %s may decide %s", e.Detail, who, e.ProposalID)
	}
	if e.Recorded != "" {
		msg += fmt.Sprintf("; the approvers recorded when it was proposed are %s, and decisions follow that record, not the config of whoever decides", e.Recorded)
	}
	return msg
}

// DecidedError refuses a decision on a proposal that no longer waits for one.
type DecidedError struct {
	Proposal Proposal
}

// Error says how the proposal was decided, or that it expired.
func (e *DecidedError) Error() string {
	p := e.Proposal
	if d := p.Decision; d != nil {
		verb := "approved"
		if d.Verdict == VerdictReject {
			verb = "rejected"
		}
		return fmt.Sprintf("%s is already decided: %s by %s via %s at %s (now %s)", p.ID, verb, d.PersonID, d.Channel, stamp(d.At), p.State)
	}
	if p.State == StateExpired {
		return fmt.Sprintf("%s expired at %s without an answer from %s; nothing was granted; propose it again if it is still needed",
			p.ID, stamp(p.ExpiresAt), strings.Join(p.ApproverOrder[:p.Round+1], ", "))
	}
	return fmt.Sprintf("%s is %s and takes no decision", p.ID, p.State)
}

// ErrNotFound is returned when an id names no proposal.
var ErrNotFound = store.ErrNotFound

// stamp formats a time for people: minutes, UTC.
func stamp(t time.Time) string { return t.UTC().Format("2006-01-02 15:04 UTC") }

// invalid builds a bad-input error that callers can tell from store failures.
func invalid(format string, args ...any) error {
	return &InputError{Msg: fmt.Sprintf(format, args...)}
}

// InputError is bad input: the message says what was wrong and what is valid.
type InputError struct{ Msg string }

// Error is the message for the person or model that sent the input.
func (e *InputError) Error() string { return e.Msg }

// IsInputError reports whether err is bad input rather than a failure.
func IsInputError(err error) bool {
	var ie *InputError
	return errors.As(err, &ie)
}
