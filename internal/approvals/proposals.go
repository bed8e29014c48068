package approvals

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/base32"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/dataworkers/dw/internal/config"
	"github.com/dataworkers/dw/internal/lineage"
	"github.com/dataworkers/dw/internal/store"
	"github.com/dataworkers/dw/internal/suggest"
)

// NewProposal is what an agent proposes. The agent sets Proposer in code;
// it is never a tool input, so a model cannot pose as someone else.
type NewProposal struct {
	IncidentID string   `json:"incident_id,omitempty" jsonschema:"incident this change remedies, if any; its receipt records the proposal"`
	Domain     string   `json:"domain,omitempty" jsonschema:"domain whose rules apply; default: the domain the targets belong to"`
	Kind       string   `json:"kind" jsonschema:"action kind: hold, diff, delete, replay, schema_version, connector_change, rerun, redeploy, backfill or lineage_event"`
	Class      Class    `json:"class,omitempty" jsonschema:"live for a change to the live data stack (only the asset owner may approve); default standard, and always live for schema_version and connector_change"`
	What       string   `json:"what" jsonschema:"the change in one line, as the approver will read it"`
	Why        string   `json:"why" jsonschema:"why it is needed (the cause found)"`
	Targets    []string `json:"targets" jsonschema:"asset ids the change acts on, e.g. airflow://dag/sync_metered_usage_to_stripe"`
	Scope      []string `json:"scope,omitempty" jsonschema:"blast radius: assets and consumers the change touches"`
	Undo       string   `json:"undo" jsonschema:"how to reverse the change, named concretely"`
	Copy       []string `json:"copy,omitempty" jsonschema:"person ids to copy besides the domain's copy list"`
	// Action is the one action the approval allows (system, target,
	// location, params); its domain is set from the config. A proposal
	// without one allows no tool to run anything.
	Action *ActionSpec `json:"action,omitempty" jsonschema:"the action the approval allows to run: system, target, location and every parameter sent"`
	// Details are free-form notes for people; they never decide what runs.
	Details map[string]any `json:"details,omitempty" jsonschema:"free-form notes for the approver (schema text, verify table, …); never used to decide what may run"`
	// Proposer is the agent's name, e.g. dw-incidents.
	Proposer string `json:"-"`
}

// MaxTargets and MaxScope bound how many assets a proposal acts on and
// how many it names as its blast radius (documented in propose_remediation).
const (
	MaxTargets = 100
	MaxScope   = 1000
)

// Propose records a proposal, names its approver and opens the first
// request to them. The approver comes from the domain's approvers in the
// config (its owners by default), else from the owner lookup; a live-class
// change goes to the asset's owner alone.
func (s *Service) Propose(ctx context.Context, np NewProposal) (*Proposal, error) {
	p, err := s.prepare(ctx, np)
	if err != nil {
		return nil, err
	}
	if err := s.db.InTx(ctx, func(tx *store.Tx) error { return s.record(ctx, tx, p) }); err != nil {
		return nil, err
	}
	return s.Get(ctx, p.ID)
}

// record writes a prepared proposal inside tx: the row, who may decide
// (sealed), the first request and the receipt entries. It sets p.ID and
// p.ReceiptID, and is safe to run again when the transaction is retried.
func (s *Service) record(ctx context.Context, tx *store.Tx, p *Proposal) error {
	now := p.CreatedAt
	id, err := insertProposal(ctx, tx, p, now)
	if err != nil {
		return err
	}
	p.ID, p.ReceiptID = id, receiptFor(p.IncidentID, id)
	// Fix who may decide, and seal the proposal (records.go).
	if err := s.recordApprovers(ctx, tx, p, now); err != nil {
		return err
	}
	if err := openRequest(ctx, tx, p.ID, 0, p.Approver, now, p.ExpiresAt); err != nil {
		return err
	}
	if _, err := s.appendEntry(ctx, tx, now, p.ReceiptID, EntryProposal, p.Proposer, proposalFacts(p)); err != nil {
		return err
	}
	_, err = s.appendEntry(ctx, tx, now, p.ReceiptID, EntryRequest, p.Proposer, map[string]any{
		"proposal": p.ID, "round": 0, "approver": p.Approver, "expires_at": p.ExpiresAt,
	})
	return err
}

// Check validates a new proposal as Propose would, recording nothing, so
// an agent sending several can refuse them all before sending any.
func (s *Service) Check(ctx context.Context, np NewProposal) error {
	_, err := s.prepare(ctx, np)
	return err
}

// prepare validates a new proposal and resolves its domain and approvers.
func (s *Service) prepare(ctx context.Context, np NewProposal) (*Proposal, error) {
	np.Proposer = strings.TrimSpace(np.Proposer)
	if np.Proposer == "" {
		return nil, invalid("proposer is empty: the agent must name itself (e.g. dw-incidents)")
	}
	if _, isPerson := s.cfg.Person(np.Proposer); isPerson {
		return nil, invalid("proposer %q is a person id; proposals come from agents so that a person's decision is never their own proposal", np.Proposer)
	}
	if !slices.Contains(Kinds, np.Kind) {
		return nil, invalid("unknown kind %q; closest: %s (valid: %s)", np.Kind,
			strings.Join(suggest.Closest(np.Kind, Kinds, 2), ", "), strings.Join(Kinds, ", "))
	}
	for _, f := range []struct {
		name      string
		v         string
		multiline bool
	}{{"what", np.What, false}, {"why", np.Why, true}, {"undo", np.Undo, true}} {
		v := strings.TrimSpace(f.v)
		if v == "" {
			return nil, invalid("%s is empty: the approver must see what changes, why, and how to undo it", f.name)
		}
		// Every rendering escapes what it shows (render.go); refusing here
		// keeps the record itself what the approver can read.
		if err := checkText(f.name, v, f.multiline); err != nil {
			return nil, err
		}
	}
	// Counted before any entry is read: a proposal is one change an
	// approver can take in, and every rendering (dw approvals show, Slack,
	// the client form) lists them. A bigger change is several proposals.
	if len(np.Targets) > MaxTargets {
		return nil, invalid("targets names %d assets; at most %d per proposal: split the change into several proposals", len(np.Targets), MaxTargets)
	}
	if len(np.Scope) > MaxScope {
		return nil, invalid("scope names %d entries; at most %d per proposal: name the consumers the change touches, or split it into several proposals", len(np.Scope), MaxScope)
	}
	for i, v := range np.Scope {
		if err := checkText(fmt.Sprintf("scope[%d]", i), strings.TrimSpace(v), false); err != nil {
			return nil, err
		}
	}
	if err := checkText("incident_id", strings.TrimSpace(np.IncidentID), false); err != nil {
		return nil, err
	}
	targets, err := s.canonicalTargets(ctx, np.Targets)
	if err != nil {
		return nil, err
	}
	if len(targets) == 0 {
		return nil, invalid("targets is empty: name at least one asset id the change acts on")
	}
	d, err := s.resolveDomain(ctx, strings.TrimSpace(np.Domain), targets)
	if err != nil {
		return nil, err
	}
	class := np.Class
	switch class {
	case "":
		class = ClassStandard
	case ClassStandard, ClassLive:
	default:
		return nil, invalid("unknown class %q; valid: standard, live", class)
	}
	if liveKinds[np.Kind] {
		class = ClassLive
	}
	action, err := s.bindAction(ctx, np.Action, np.Kind, d.Name, targets)
	if err != nil {
		return nil, err
	}
	cfgOrder, err := s.approverOrder(ctx, d, class, targets)
	if err != nil {
		return nil, err
	}
	// Who is asked follows the approvers on record unless this agent runs
	// as the store admin (routing.go).
	order, err := s.routedOrder(ctx, d.Name, class, cfgOrder)
	if err != nil {
		return nil, err
	}
	if slices.Contains(order, np.Proposer) {
		return nil, invalid("the proposer %s cannot also approve its proposal", np.Proposer)
	}
	var copied []string
	for _, id := range append(append([]string{}, d.Copy...), np.Copy...) {
		id = strings.TrimSpace(id)
		if _, ok := s.cfg.Person(id); !ok {
			return nil, invalid("copy: unknown person %q; closest: %s", id, strings.Join(suggest.Closest(id, s.personIDs(), 3), ", "))
		}
		if id != order[0] && !slices.Contains(copied, id) {
			copied = append(copied, id)
		}
	}
	expiry := d.ApprovalExpiry
	if expiry <= 0 {
		expiry = s.cfg.Approvals.Expiry
	}
	if expiry <= 0 {
		expiry = 4 * time.Hour
	}
	now, err := s.now(ctx)
	if err != nil {
		return nil, err
	}
	p := &Proposal{
		IncidentID: strings.TrimSpace(np.IncidentID), Domain: d.Name, Kind: np.Kind, Class: class,
		What: strings.TrimSpace(np.What), Why: strings.TrimSpace(np.Why), Targets: targets,
		Scope: cleanList(np.Scope), Undo: strings.TrimSpace(np.Undo), Action: action, Details: np.Details,
		Proposer: np.Proposer, Approver: order[0], ApproverOrder: order, Copied: copied,
		State: StatePending, CreatedAt: now, ExpiresAt: now.Add(expiry), UpdatedAt: now, expiry: expiry, cfgOrder: cfgOrder,
	}
	if err := checkLineageDatasets(p); err != nil {
		return nil, err
	}
	return p, nil
}

// approverOrder resolves who is asked, in escalation order.
func (s *Service) approverOrder(ctx context.Context, d *config.Domain, class Class, targets []string) ([]string, error) {
	if class == ClassLive {
		if len(d.Owners) > 0 {
			return []string{d.Owners[0]}, nil
		}
		owner, err := s.lookupOwner(ctx, targets[0])
		if err != nil {
			return nil, err
		}
		return []string{owner}, nil
	}
	if len(d.Approvers) > 0 {
		return append([]string(nil), d.Approvers...), nil
	}
	owner, err := s.lookupOwner(ctx, targets[0])
	if err != nil {
		return nil, fmt.Errorf("domain %s names no owners or approvers, and %w", d.Name, err)
	}
	return []string{owner}, nil
}

func (s *Service) lookupOwner(ctx context.Context, asset string) (string, error) {
	if s.owners == nil {
		return "", invalid("no owner is known for %s: add owners to its domain in the config", asset)
	}
	owner, ok := s.owners(ctx, asset)
	if !ok || owner == "" {
		return "", invalid("no owner is recorded for %s in the context graph: add owners to its domain in the config or record the asset's owner", asset)
	}
	if _, ok := s.cfg.Person(owner); !ok {
		return "", invalid("the owner of %s is %q, who is not a person in the config; add them under people: with a slack_id or os_users so they can decide", asset, owner)
	}
	return owner, nil
}

func (s *Service) personIDs() []string {
	ids := make([]string, 0, len(s.cfg.People))
	for _, p := range s.cfg.People {
		ids = append(ids, p.ID)
	}
	return ids
}

// canonicalTargets turns each target into its one asset id
// (docs/ASSET_IDS.md), the id the incident records for it: resolved
// through the context graph and the configured warehouses, so a target
// spelled two ways (AIRFLOW://dag/x and airflow://dag/x;
// duckdb://sales.orders, duckdb://warehouse.sales.orders and the dbt model
// that builds it) is one target and binds one approval. A target that
// names no asset Data Workers can tell is refused rather than stored as
// given: dispatch compares ids, and an id nobody canonicalizes would never
// match.
func (s *Service) canonicalTargets(ctx context.Context, in []string) ([]string, error) {
	var out []string
	for i, t := range in {
		t = strings.TrimSpace(t)
		if t == "" {
			continue
		}
		id, err := s.canonicalAsset(ctx, t)
		if err != nil {
			return nil, invalid("targets[%d] %q is not an asset id: %v (see docs/ASSET_IDS.md)", i, t, err)
		}
		if !slices.Contains(out, id) {
			out = append(out, id)
		}
	}
	return out, nil
}

// canonicalAsset is the one id of an asset reference. Control characters
// are refused outright: an id is shown to the approver, and a newline
// would let one target pose as two lines of the request.
func (s *Service) canonicalAsset(ctx context.Context, ref string) (string, error) {
	if strings.IndexFunc(ref, unicode.IsControl) >= 0 {
		return "", errors.New("it contains a control character")
	}
	it, err := s.ids.Of(ctx, ref)
	if err != nil {
		return "", err
	}
	return it.ID, nil
}

// boundID is the id an action's asset is bound and compared by: its
// canonical spelling from the configured warehouses alone, never the
// context graph, so an approval allows tomorrow exactly the asset it
// allowed when it was given, whatever names the graph learns meanwhile (an
// OpenLineage job id that a forwarded event makes an alias of the Flink
// job). It is compared with the targets by identity (sameAsset).
func (s *Service) boundID(ref string) (string, error) {
	if strings.IndexFunc(ref, unicode.IsControl) >= 0 {
		return "", errors.New("it contains a control character")
	}
	return s.ids.Names.Canonical(strings.TrimSpace(ref))
}

// sameAsset reports whether an asset is one of the targets: by the one
// identity each has now (the dbt model's id names the table a target
// names). A spelling that is no asset id is none of them.
func (s *Service) sameAsset(ctx context.Context, targets []string, asset string) (bool, error) {
	a, err := s.ids.Of(ctx, asset)
	var amb *lineage.AmbiguousError
	switch {
	case errors.As(err, &amb) || errors.Is(err, lineage.ErrUnknownAsset):
		id, err := s.boundID(asset)
		return err == nil && slices.Contains(targets, id), nil
	case err != nil:
		if _, cerr := s.boundID(asset); cerr != nil {
			return false, nil // no asset id: it allows nothing
		}
		return false, err
	}
	for _, t := range targets {
		if t == a.ID {
			return true, nil
		}
		it, err := s.ids.Of(ctx, t)
		if err == nil && it.Same(a) {
			return true, nil
		}
		if err != nil && !errors.As(err, &amb) && !errors.Is(err, lineage.ErrUnknownAsset) {
			return false, err
		}
	}
	return false, nil
}

func cleanList(in []string) []string {
	var out []string
	for _, v := range in {
		v = strings.TrimSpace(v)
		if v != "" && !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	return out
}

// newID is "P-" and 8 base32 characters (40 random bits): short enough to
// type in `dw approve`, unique enough that a clash (checked on insert) is rare.
func newID() string {
	var b [5]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(fmt.Sprintf("approvals: no randomness: %v", err))
	}
	return "P-" + base32.StdEncoding.EncodeToString(b[:])
}

func insertProposal(ctx context.Context, q store.Querier, p *Proposal, now time.Time) (string, error) {
	targets, _ := json.Marshal(p.Targets)
	scope, _ := json.Marshal(nonNil(p.Scope))
	order, _ := json.Marshal(p.ApproverOrder)
	copied, _ := json.Marshal(nonNil(p.Copied))
	details, err := canonicalJSON(p.Details)
	if err != nil {
		return "", invalid("details cannot be encoded as JSON: %v", err)
	}
	action, err := encodeAction(p.Action)
	if err != nil {
		return "", invalid("action cannot be encoded as JSON: %v", err)
	}
	for attempt := 0; attempt < 5; attempt++ {
		id := newID()
		receipt := receiptFor(p.IncidentID, id)
		res, err := q.ExecContext(ctx, `INSERT INTO approval_proposals (id, incident_id, receipt_id, domain, kind, class, what, why,
			targets, scope, undo, details, action, proposer, approver, approver_order, round, copied, state, expiry_ms, created_ms, expires_ms, updated_ms)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING`,
			id, p.IncidentID, receipt, p.Domain, p.Kind, string(p.Class), p.What, p.Why, string(targets), string(scope), p.Undo,
			details, action, p.Proposer, p.Approver, string(order), string(copied), string(StatePending), p.expiry.Milliseconds(),
			store.Millis(now), store.Millis(p.ExpiresAt), store.Millis(now))
		if err != nil {
			return "", fmt.Errorf("record proposal: %w", err)
		}
		if n, _ := res.RowsAffected(); n == 1 {
			return id, nil
		}
	}
	return "", errors.New("record proposal: could not find a free proposal id after 5 attempts")
}

// receiptFor is the receipt a proposal is recorded in: its incident's,
// so an auditor reads cause, approvals and steps in one place, else its own.
func receiptFor(incidentID, proposalID string) string {
	if incidentID != "" {
		return incidentID
	}
	return proposalID
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// openRequest records the request put to one approver.
func openRequest(ctx context.Context, q store.Querier, proposalID string, round int, approver string, now, expires time.Time) error {
	_, err := q.ExecContext(ctx, `INSERT INTO approval_requests (proposal_id, round, approver, requested_ms, expires_ms, outcome,
		claimed_ms, posted_ms, messages, refreshed_ms) VALUES (?, ?, ?, ?, ?, 'open', 0, 0, '[]', 0)`,
		proposalID, round, approver, store.Millis(now), store.Millis(expires))
	if err != nil {
		return fmt.Errorf("record request for %s: %w", proposalID, err)
	}
	return nil
}

// proposalFacts is what the receipt keeps of a proposal.
func proposalFacts(p *Proposal) map[string]any {
	m := map[string]any{
		"proposal": p.ID, "kind": p.Kind, "class": p.Class, "domain": p.Domain, "what": p.What, "why": p.Why,
		"targets": p.Targets, "scope": nonNil(p.Scope), "undo": p.Undo, "approver": p.Approver,
		"approver_order": p.ApproverOrder, "copied": nonNil(p.Copied), "expires_at": p.ExpiresAt, "proposer": p.Proposer,
	}
	if p.IncidentID != "" {
		m["incident"] = p.IncidentID
	}
	if p.Action != nil {
		// The receipt keeps the whole action and its hash, so an auditor
		// reads what the approval allowed, not only its notes.
		m["action"] = p.Action
		m["action_sha256"] = p.Action.Hash()
	}
	if len(p.Details) > 0 {
		m["details"] = p.Details
	}
	return m
}

const proposalColumns = `id, incident_id, receipt_id, domain, kind, class, what, why, targets, scope, undo, details, action, proposer,
	approver, approver_order, round, copied, state, expiry_ms, created_ms, expires_ms, updated_ms`

type rowScanner interface{ Scan(dest ...any) error }

func scanProposal(r rowScanner) (Proposal, error) {
	var p Proposal
	var class, state, targets, scope, details, action, order, copied string
	var expiryMs, createdMs, expiresMs, updatedMs int64
	if err := r.Scan(&p.ID, &p.IncidentID, &p.ReceiptID, &p.Domain, &p.Kind, &class, &p.What, &p.Why, &targets, &scope,
		&p.Undo, &details, &action, &p.Proposer, &p.Approver, &order, &p.Round, &copied, &state, &expiryMs, &createdMs, &expiresMs, &updatedMs); err != nil {
		return p, err
	}
	p.Class, p.State = Class(class), State(state)
	p.expiry = time.Duration(expiryMs) * time.Millisecond
	p.CreatedAt, p.ExpiresAt, p.UpdatedAt = store.FromMillis(createdMs), store.FromMillis(expiresMs), store.FromMillis(updatedMs)
	for _, f := range []struct {
		src string
		dst any
	}{{targets, &p.Targets}, {scope, &p.Scope}, {order, &p.ApproverOrder}, {copied, &p.Copied}, {details, &p.Details}} {
		if err := json.Unmarshal([]byte(f.src), f.dst); err != nil {
			return p, fmt.Errorf("proposal %s: stored JSON is unreadable: %w", p.ID, err)
		}
	}
	if len(p.Scope) == 0 {
		p.Scope = nil
	}
	if len(p.Copied) == 0 {
		p.Copied = nil
	}
	if len(p.Details) == 0 {
		p.Details = nil
	}
	// An unreadable or edited action is kept as an error, not returned:
	// the proposal still lists, and dispatch refuses it.
	p.Action, p.actionErr = decodeAction(p.ID, action)
	return p, nil
}

// loadProposal reads a proposal and its decision.
func loadProposal(ctx context.Context, q store.Querier, id string) (Proposal, error) {
	p, err := scanProposal(q.QueryRowContext(ctx, `SELECT `+proposalColumns+` FROM approval_proposals WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return p, notFound(ctx, q, id)
	}
	if err != nil {
		return p, err
	}
	p.Decision, err = loadDecision(ctx, q, id)
	return p, err
}

func loadDecision(ctx context.Context, q store.Querier, id string) (*Decision, error) {
	var d Decision
	var verdict, channel, evidence string
	var at int64
	err := q.QueryRowContext(ctx, `SELECT verdict, person_id, channel, evidence, reason, round, decided_ms
		FROM approval_decisions WHERE proposal_id = ?`, id).Scan(&verdict, &d.PersonID, &channel, &evidence, &d.Reason, &d.Round, &at)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	d.Verdict, d.Channel, d.At = Verdict(verdict), Channel(channel), store.FromMillis(at)
	if err := json.Unmarshal([]byte(evidence), &d.Evidence); err != nil {
		return nil, fmt.Errorf("decision on %s: stored evidence is unreadable: %w", id, err)
	}
	return &d, nil
}

func notFound(ctx context.Context, q store.Querier, id string) error {
	ids, err := store.Strings(ctx, q, `SELECT id FROM approval_proposals ORDER BY created_ms DESC LIMIT 200`)
	if err != nil {
		return err
	}
	if len(ids) == 0 {
		return fmt.Errorf("no proposal %q: none has been made yet: %w", id, ErrNotFound)
	}
	return fmt.Errorf("no proposal %q; closest: %s: %w", id, strings.Join(suggest.Closest(id, ids, 3), ", "), ErrNotFound)
}

func normID(id string) string { return strings.ToUpper(strings.TrimSpace(id)) }

// Get reads a proposal, first applying any expiry that fell due.
func (s *Service) Get(ctx context.Context, id string) (*Proposal, error) {
	id = normID(id)
	if _, err := s.sweep(ctx, id); err != nil {
		return nil, err
	}
	p, err := loadProposal(ctx, s.db, id)
	if err != nil {
		return nil, err
	}
	return &p, nil
}

// Filter selects proposals for List.
type Filter struct {
	// States keeps proposals in these states; empty keeps all.
	States     []State `json:"states,omitempty" jsonschema:"keep proposals in these states; default all"`
	IncidentID string  `json:"incident_id,omitempty" jsonschema:"keep proposals of this incident"`
	Approver   string  `json:"approver,omitempty" jsonschema:"keep proposals awaiting or decided by this person id"`
	Limit      int     `json:"limit,omitempty" jsonschema:"at most this many, newest first; default 100"`
}

// List reads proposals, newest first, after applying due expiries.
func (s *Service) List(ctx context.Context, f Filter) ([]Proposal, error) {
	if _, err := s.Sweep(ctx); err != nil {
		return nil, err
	}
	var where []string
	var args []any
	if len(f.States) > 0 {
		var marks []string
		for _, st := range f.States {
			if !slices.Contains(States, st) {
				return nil, invalid("unknown state %q; valid: %s", st, joinStates(States))
			}
			marks = append(marks, "?")
			args = append(args, string(st))
		}
		where = append(where, "state IN ("+strings.Join(marks, ", ")+")")
	}
	if f.IncidentID != "" {
		where = append(where, "incident_id = ?")
		args = append(args, f.IncidentID)
	}
	if f.Approver != "" {
		where = append(where, "approver = ?")
		args = append(args, f.Approver)
	}
	limit := f.Limit
	if limit <= 0 {
		limit = 100
	}
	clause := ""
	if len(where) > 0 {
		clause = "WHERE " + strings.Join(where, " AND ")
	}
	return listProposals(ctx, s.db, fmt.Sprintf("%s ORDER BY created_ms DESC, id LIMIT %d", clause, limit), args...)
}

func listProposals(ctx context.Context, q store.Querier, tail string, args ...any) ([]Proposal, error) {
	rows, err := q.QueryContext(ctx, `SELECT `+proposalColumns+` FROM approval_proposals `+tail, args...)
	if err != nil {
		return nil, err
	}
	var out []Proposal
	for rows.Next() {
		p, err := scanProposal(rows)
		if err != nil {
			rows.Close()
			return nil, err
		}
		out = append(out, p)
	}
	if err := rows.Close(); err != nil {
		return nil, err
	}
	for i := range out {
		d, err := loadDecision(ctx, q, out[i].ID)
		if err != nil {
			return nil, err
		}
		out[i].Decision = d
	}
	return out, nil
}

func joinStates(ss []State) string {
	var out []string
	for _, s := range ss {
		out = append(out, string(s))
	}
	return strings.Join(out, ", ")
}
