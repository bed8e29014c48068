// Package schemaregister carries out an approved schema_version proposal
// end to end: the proposal is checked to bind exactly this subject and
// schema, the approval is claimed (org-wide stop and autonomy checked),
// the schema registered unless the registry holds it already, the version
// recorded in the change log, a step added to the receipt and the proposal
// marked executed. register_stream_schema in dw-connectors is its adapter.
package schemaregister

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/dataworkers/dw/internal/approvals"
	"github.com/dataworkers/dw/internal/compat"
	"github.com/dataworkers/dw/internal/config"
	"github.com/dataworkers/dw/internal/registry"
	"github.com/dataworkers/dw/internal/schemahistory"
	"github.com/dataworkers/dw/internal/store"
)

// Tool is the tool named in the receipt step a registration records; a
// retry finds its earlier step by it, so it must not change.
const Tool = "register_stream_schema"

// Lease is how long a registration's claim on an approval holds before
// another call may take it over (its holder died): a lookup, a
// registration and a lookup at the registry's timeout, with room to spare.
const Lease = 2 * time.Minute

// Request is a registration under an approved proposal.
type Request struct {
	Subject    string
	Schema     string
	SchemaType string
	ProposalID string
}

// Result says what was registered and how it was recorded. Its JSON is
// stored as the execution's result and read back on a retry, so its keys
// are those of the tool's answer.
type Result struct {
	Subject       string                         `json:"subject"`
	Version       int                            `json:"version"`
	ID            int                            `json:"id"`
	SchemaType    string                         `json:"schema_type"`
	SHA256        string                         `json:"sha256"`
	Registered    bool                           `json:"registered"`
	Proposal      string                         `json:"proposal"`
	ProposalState string                         `json:"proposal_state"`
	Basis         string                         `json:"basis,omitempty"`
	ReceiptID     string                         `json:"receipt_id"`
	StepSeq       int64                          `json:"step_seq,omitempty"`
	Change        *schemahistory.RecordedVersion `json:"change,omitempty"`
	Note          string                         `json:"note,omitempty"`
	// Summary is the answer for a person: the note and where it was
	// recorded.
	Summary string `json:"-"`
}

// Registrar reaches what a registration needs, each opened only when the
// call gets that far (a malformed request is refused before any client is
// built). Sources.Source names the agent that acts.
type Registrar struct {
	Sources   schemahistory.Sources
	Approvals func(context.Context) (*approvals.Service, error)
	Store     func(context.Context) (*store.DB, error)
	Config    *config.Config
}

// RegistryURL is the registry an approval binds, as dw.yaml names it.
func RegistryURL(cfg *config.Config) string {
	if sc := cfg.SchemaRegistry; sc != nil {
		return approvals.NormalizeURL(sc.URL)
	}
	return ""
}

// Register carries out the approved proposal req names for req's schema,
// or refuses, naming what differs and whom to ask, with nothing written.
func (r *Registrar) Register(ctx context.Context, req Request) (*Result, error) {
	subject, pid := strings.TrimSpace(req.Subject), strings.TrimSpace(req.ProposalID)
	switch {
	case subject == "":
		return nil, errors.New("subject is empty: give the subject to register under, e.g. api-usage-value")
	case strings.TrimSpace(req.Schema) == "":
		return nil, errors.New("schema is empty: give the schema text the proposal was approved for")
	case pid == "":
		return nil, errors.New("proposal_id is empty: a schema is registered only under an approved schema_version proposal (dw-incidents propose_remediation makes one; its owner approves it)")
	}
	kind, err := compat.ParseKind(req.SchemaType)
	if err != nil {
		return nil, err
	}
	canon, err := compat.Canonicalize(kind, compat.Schema{Text: req.Schema})
	if err != nil {
		return nil, fmt.Errorf("the schema does not parse as %s, so it cannot be matched to an approval: %w; nothing was registered", kind, err)
	}
	rc, err := r.Sources.Registry()
	if err != nil {
		return nil, err
	}
	svc, err := r.Approvals(ctx)
	if err != nil {
		return nil, err
	}

	p, err := svc.Get(ctx, pid)
	if err != nil {
		return nil, err
	}
	if err := r.bindsSchema(p, subject, kind, canon.SHA256); err != nil {
		return nil, err
	}
	spec, err := approvals.SchemaVersionAction(RegistryURL(r.Config), subject, string(kind), canon.SHA256)
	if err != nil {
		return nil, err
	}
	ns := registry.NewSchema{Schema: req.Schema, Kind: kind}
	exec, err := svc.BeginExecution(ctx, approvals.Action{Asset: Asset(subject), Kind: approvals.KindSchemaVersion, ProposalID: p.ID, Spec: spec},
		r.Sources.Source, Lease)
	if err != nil {
		if approvals.IsRefusal(err) {
			// Read the state again: another process may have carried the
			// approval out since it was read above.
			if cur, gerr := svc.Get(ctx, p.ID); gerr == nil {
				p = cur
			}
			if p.State == approvals.StateExecuted || p.State == approvals.StateUndone {
				return r.alreadyCarriedOut(ctx, rc, p, subject, ns, canon.SHA256)
			}
			return nil, r.withAsk(ctx, svc, p, err)
		}
		return nil, err
	}
	if exec.Done {
		return answerRetry(ctx, svc, p, exec)
	}
	out, err := r.carryOut(ctx, svc, rc, p, exec.Permit, subject, kind, ns, canon.SHA256)
	bg := context.WithoutCancel(ctx)
	if err != nil {
		// The registry lookup before registering and the receipt check
		// before recording make the next call safe, so the claim is let go.
		if rerr := svc.ReleaseExecution(bg, exec); rerr != nil {
			err = errors.Join(err, rerr)
		}
		return nil, err
	}
	if _, err := svc.FinishExecution(bg, exec, out); err != nil {
		return nil, unfinished(&registry.SchemaVersion{Subject: subject, Version: out.Version, ID: out.ID}, p, err)
	}
	return out, nil
}

// Asset is the asset id of a registry subject, the target a
// schema_version proposal names.
func Asset(subject string) string { return "schema://" + subject }

// answerRetry answers a call for an approval an earlier call carried out:
// the same version and step, nothing done twice.
func answerRetry(ctx context.Context, svc *approvals.Service, p *approvals.Proposal, exec *approvals.Execution) (*Result, error) {
	var out Result
	if err := json.Unmarshal(exec.Result, &out); err != nil {
		return nil, fmt.Errorf("proposal %s was carried out, but its recorded result is unreadable: %w", p.ID, err)
	}
	cur, err := svc.Get(ctx, p.ID)
	if err != nil {
		return nil, err
	}
	out.Registered, out.ProposalState = false, string(cur.State)
	out.Note = fmt.Sprintf("proposal %s was already carried out: %s version %d (schema id %d) holds the schema (receipt step %d); nothing was done twice",
		p.ID, out.Subject, out.Version, out.ID, out.StepSeq)
	out.Summary = out.Note + "."
	return &out, nil
}

// carryOut registers the approved schema (unless the registry holds it
// already), records the version in the change log and a step in the
// receipt, and marks the proposal executed. It runs under the approval's
// execution claim.
func (r *Registrar) carryOut(ctx context.Context, svc *approvals.Service, rc *registry.Client, p *approvals.Proposal, permit approvals.Permit,
	subject string, kind compat.Kind, ns registry.NewSchema, sha string) (*Result, error) {
	existing, registered, err := ensureRegistered(ctx, rc, p, subject, ns)
	if err != nil {
		return nil, err
	}
	approver := p.Approver
	if p.Decision != nil {
		approver = p.Decision.PersonID
	}
	change, err := r.recordChange(ctx, rc, p, existing, sha, approver, registered)
	if err != nil {
		return nil, unfinished(existing, p, err)
	}
	seq, err := r.recordStep(ctx, svc, rc, p, permit, existing, sha, approver, registered, change.ID)
	if err != nil {
		return nil, unfinished(existing, p, err)
	}
	actor := r.Sources.Source
	done, err := svc.MarkExecuted(ctx, p.ID, actor, fmt.Sprintf("%s version %d (schema id %d)", subject, existing.Version, existing.ID))
	if err != nil {
		return nil, unfinished(existing, p, err)
	}
	out := &Result{
		Subject: subject, Version: existing.Version, ID: existing.ID, SchemaType: string(kind), SHA256: sha,
		Registered: registered, Proposal: p.ID, ProposalState: string(done.State), Basis: permit.Basis,
		ReceiptID: p.ReceiptID, StepSeq: seq, Change: change,
	}
	if registered {
		out.Note = fmt.Sprintf("registered %s version %d (schema id %d) under %s", subject, existing.Version, existing.ID, permit.Basis)
	} else {
		out.Note = fmt.Sprintf("%s version %d (schema id %d) already held the approved schema; nothing was registered again", subject, existing.Version, existing.ID)
	}
	out.Summary = fmt.Sprintf("%s.\nChange log: change %d. Receipt %s, step %d; proposal %s is %s.", out.Note, change.ID, p.ReceiptID, seq, p.ID, done.State)
	return out, nil
}

// ensureRegistered looks the schema up under subject and registers it
// when the registry does not hold it; registered says whether this call
// did.
func ensureRegistered(ctx context.Context, rc *registry.Client, p *approvals.Proposal, subject string, ns registry.NewSchema) (*registry.SchemaVersion, bool, error) {
	existing, found, err := lookup(ctx, rc, subject, ns)
	if err != nil {
		return nil, false, err
	}
	if found {
		return existing, false, nil
	}
	if _, err := rc.Register(ctx, subject, ns); err != nil {
		return nil, false, fmt.Errorf("the registry did not register the schema under %s: %w; nothing was registered and proposal %s stays approved (check_compatibility in dw-schema shows which fields the registry objects to)", subject, err, p.ID)
	}
	if existing, found, err = lookup(ctx, rc, subject, ns); err != nil || !found {
		return nil, false, fmt.Errorf("registered the schema under %s but the registry's lookup does not find it (%v); call register_stream_schema again to finish recording", subject, err)
	}
	return existing, true, nil
}

// recordChange writes the version to the change log on behalf of the
// approver (once per subject and version: a retry finds the entry).
func (r *Registrar) recordChange(ctx context.Context, rc *registry.Client, p *approvals.Proposal, v *registry.SchemaVersion, sha, approver string, registered bool) (*schemahistory.RecordedVersion, error) {
	facts, err := schemahistory.DescribeVersion(ctx, rc, v)
	if err != nil {
		return nil, err
	}
	if facts.SHA256 == "" {
		facts.SHA256 = sha
	}
	name := r.Sources.Source
	when := fmt.Sprintf("registered by %s under approved proposal %s; at is the registration time", name, p.ID)
	if !registered {
		when = fmt.Sprintf("found already registered when %s carried out proposal %s; %s", name, p.ID, schemahistory.FirstSeenNote)
	}
	return r.Sources.Record(ctx, rc, v, facts, schemahistory.VersionRecord{
		Actor: fmt.Sprintf("%s on behalf of %s (proposal %s)", name, approver, p.ID),
		When:  when,
		Extra: map[string]string{"proposal": p.ID, "approved_by": approver},
	})
}

// recordStep adds the registration's step to the proposal's receipt
// unless an earlier call already did, and returns its position.
func (r *Registrar) recordStep(ctx context.Context, svc *approvals.Service, rc *registry.Client, p *approvals.Proposal, permit approvals.Permit,
	v *registry.SchemaVersion, sha, approver string, registered bool, changeID int64) (int64, error) {
	db, err := r.Store(ctx)
	if err != nil {
		return 0, err
	}
	actor := r.Sources.Source
	seq, err := priorStep(ctx, db, p, actor)
	if err != nil || seq != 0 {
		return seq, err
	}
	desc := fmt.Sprintf("registered %s version %d (schema id %d) on behalf of %s's approval of %s", v.Subject, v.Version, v.ID, approver, p.ID)
	if !registered {
		desc = fmt.Sprintf("confirmed %s version %d (schema id %d) already holds the approved schema; registered nothing new (proposal %s, approved by %s)", v.Subject, v.Version, v.ID, p.ID, approver)
	}
	entry, err := svc.RecordStep(ctx, p.ID, approvals.Step{
		Actor:       actor,
		Description: desc,
		ChecksBefore: []approvals.Check{
			{Name: "proposal binds this schema", Passed: true, Detail: "schema_sha256 " + sha},
			{Name: "dispatch permitted", Passed: true, Detail: permit.Basis},
			{Name: "registry looked up under " + v.Subject + " before registering", Passed: true, Detail: lookupDetail(registered, v)},
		},
		ChecksAfter: []approvals.Check{
			{Name: "registry lookup finds the schema under " + v.Subject, Passed: true, Detail: fmt.Sprintf("version %d, schema id %d", v.Version, v.ID)},
		},
		Details: map[string]any{
			"tool": Tool, "subject": v.Subject, "version": v.Version, "schema_id": v.ID,
			"schema_sha256": sha, "registry": rc.URL(), "registered": registered, "change_id": changeID,
		},
	})
	if err != nil {
		return 0, err
	}
	return entry.Seq, nil
}

func lookupDetail(registered bool, v *registry.SchemaVersion) string {
	if registered {
		return "not registered before this call"
	}
	return fmt.Sprintf("already registered as version %d (schema id %d)", v.Version, v.ID)
}

// bindsSchema checks, before anything is claimed, that a proposal is a
// live-class schema_version proposal on schema://<subject> whose bound
// action names this subject and schema, so the common mistakes are
// refused with what to ask for instead. The whole action (registry,
// subject, hash, type, domain) is then compared field by field when the
// approval is claimed.
func (r *Registrar) bindsSchema(p *approvals.Proposal, subject string, kind compat.Kind, sha string) error {
	asset := Asset(subject)
	newProposal := fmt.Sprintf("ask dw-incidents to propose registering this schema on %s (propose_remediation, kind schema_version, with the schema text) and ask %s, who approves changes to %s, to approve it",
		asset, approvals.PersonLabel(r.Config, p.Approver), asset)
	refuse := func(format string, args ...any) error {
		return &approvals.Refusal{Reason: fmt.Sprintf(format, args...) + "; nothing was registered or recorded"}
	}
	if p.Kind != approvals.KindSchemaVersion {
		return refuse("proposal %s approves a %s, not a schema_version; %s", p.ID, p.Kind, newProposal)
	}
	if !slices.Contains(p.Targets, asset) {
		return refuse("proposal %s approves changes to %s, not to %s; %s", p.ID, strings.Join(p.Targets, ", "), asset, newProposal)
	}
	if p.Class != approvals.ClassLive {
		return refuse("proposal %s has class %s; registering a schema changes the live stack and needs a live-class approval by the asset owner; %s", p.ID, p.Class, newProposal)
	}
	a := p.Action
	if a == nil || a.System != approvals.SystemSchemaRegistry {
		return refuse("proposal %s binds no schema (it binds no schema_registry action with a schema_sha256; notes in its details do not count), so it cannot authorise registering a particular one; %s", p.ID, newProposal)
	}
	if a.Target != subject {
		return refuse("proposal %s was approved for subject %s, not %s; %s", p.ID, a.Target, subject, newProposal)
	}
	if t, _ := a.Params["schema_type"].(string); t != "" && t != string(kind) {
		return refuse("proposal %s was approved for a %s schema, not %s; %s", p.ID, t, kind, newProposal)
	}
	if bound, _ := a.Params["schema_sha256"].(string); bound != sha {
		return refuse("proposal %s was approved for a different schema (schema_sha256 %s), but the schema given hashes to %s; a different schema needs its own approval: %s",
			p.ID, short(bound), short(sha), newProposal)
	}
	return nil
}

func short(sha string) string {
	if len(sha) > 12 {
		return sha[:12] + "…"
	}
	return sha
}

// withAsk adds to a dispatch refusal what would allow it: whom to ask and
// the command they run.
func (r *Registrar) withAsk(ctx context.Context, svc *approvals.Service, p *approvals.Proposal, refusal error) error {
	var asks []string
	who := approvals.PersonLabel(r.Config, p.Approver)
	if stop, err := svc.StopStatus(ctx); err == nil && stop.Active {
		ask := "ask a person to lift the org-wide stop with `dw resume` once it is safe"
		if p.State == approvals.StateApproved {
			ask += fmt.Sprintf("; the approval of %s stays valid until then", p.ID)
		}
		asks = append(asks, ask)
	}
	switch p.State {
	case approvals.StatePending, approvals.StateEscalated:
		asks = append(asks, fmt.Sprintf("ask %s to approve proposal %s: dw approve %s (or answer the Slack request)", who, p.ID, p.ID))
	case approvals.StateExpired:
		asks = append(asks, fmt.Sprintf("proposal %s expired unanswered and granted nothing: ask dw-incidents to propose it again (propose_remediation) and ask %s to approve the new proposal: dw approve <new id>", p.ID, who))
	case approvals.StateRejected:
		by, why := p.Approver, ""
		if d := p.Decision; d != nil {
			by = d.PersonID
			if d.Reason != "" {
				why = fmt.Sprintf(" (%q)", d.Reason)
			}
		}
		asks = append(asks, fmt.Sprintf("%s rejected proposal %s%s; registering this schema needs a new proposal that answers the objection, approved by %s", approvals.PersonLabel(r.Config, by), p.ID, why, who))
	case approvals.StateApproved:
		// L0 and L1 domains dispatch nothing, approved or not.
		if msg := refusal.Error(); strings.Contains(msg, " is at L0") || strings.Contains(msg, " is at L1") {
			asks = append(asks, fmt.Sprintf("ask an owner of domain %s to allow agents to carry out approved changes there: dw autonomy set %s L2 --reason …", p.Domain, p.Domain))
		}
	}
	if len(asks) == 0 {
		return fmt.Errorf("%w. Nothing was registered or recorded", refusal)
	}
	return fmt.Errorf("%w; %s. Nothing was registered or recorded", refusal, strings.Join(asks, "; "))
}

// alreadyCarriedOut answers a call for a proposal that was already
// executed: the schema is looked up and its version returned, with nothing
// written. An approval runs once, so a schema that is no longer there is
// not registered again.
func (r *Registrar) alreadyCarriedOut(ctx context.Context, rc *registry.Client, p *approvals.Proposal, subject string, ns registry.NewSchema, sha string) (*Result, error) {
	v, found, err := lookup(ctx, rc, subject, ns)
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, &approvals.Refusal{Reason: fmt.Sprintf("proposal %s was already carried out (%s) and the schema is no longer registered under %s; an approval runs once, so registering it again needs a new proposal approved by %s; nothing was registered or recorded",
			p.ID, p.State, subject, approvals.PersonLabel(r.Config, p.Approver))}
	}
	out := &Result{
		Subject: subject, Version: v.Version, ID: v.ID, SchemaType: string(ns.Kind), SHA256: sha, Registered: false,
		Proposal: p.ID, ProposalState: string(p.State), ReceiptID: p.ReceiptID,
		Note: fmt.Sprintf("proposal %s was already carried out: %s version %d (schema id %d) holds the schema; nothing was done twice", p.ID, subject, v.Version, v.ID),
	}
	out.Summary = out.Note + "."
	return out, nil
}

// unfinished explains a failure after the registry holds the version:
// calling again finishes the records without registering twice.
func unfinished(v *registry.SchemaVersion, p *approvals.Proposal, err error) error {
	return fmt.Errorf("%s version %d (schema id %d) is in the registry, but recording it under proposal %s failed: %w; call register_stream_schema again with the same arguments to finish (it will not register twice)",
		v.Subject, v.Version, v.ID, p.ID, err)
}

// lookup finds the schema under subject. A subject that does not exist
// yet holds nothing, so its first version can be registered.
func lookup(ctx context.Context, rc *registry.Client, subject string, ns registry.NewSchema) (*registry.SchemaVersion, bool, error) {
	v, found, err := rc.Lookup(ctx, subject, ns)
	var nf *registry.SubjectNotFoundError
	if errors.As(err, &nf) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	if found && v.SchemaType == "" && ns.Kind != compat.Avro {
		v.SchemaType = string(ns.Kind)
	}
	return v, found, nil
}

// priorStep finds a step actor already recorded for the proposal (a call
// that registered and then failed before marking the proposal executed),
// so a retry does not record a second one. It returns the step's
// position, 0 when there is none.
func priorStep(ctx context.Context, q store.Querier, p *approvals.Proposal, actor string) (int64, error) {
	entries, err := approvals.Entries(ctx, q, p.ReceiptID)
	if err != nil {
		return 0, err
	}
	for _, e := range entries {
		if e.Kind != approvals.EntryStep || e.Actor != actor {
			continue
		}
		var payload struct {
			Proposal string         `json:"proposal"`
			Details  map[string]any `json:"details"`
		}
		if json.Unmarshal(e.Payload, &payload) != nil {
			continue
		}
		if payload.Proposal == p.ID && payload.Details["tool"] == Tool {
			return e.Seq, nil
		}
	}
	return 0, nil
}
