package connectors

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/dataworkers/dw/internal/approvals"
	"github.com/dataworkers/dw/internal/compat"
	"github.com/dataworkers/dw/internal/mcpserver"
	"github.com/dataworkers/dw/internal/registry"
	"github.com/dataworkers/dw/internal/store"
)

// A schema_version proposal binds its action (approvals.SchemaVersionAction):
// the subject at the configured registry, with the schema's canonical
// SHA-256 (compat.Canonicalize) and type as its params. That is the
// contract between whoever proposes a schema version (dw-incidents'
// propose_remediation) and register_stream_schema, which carries it out
// and is refused on any difference, named. Because the hash is of the
// canonical form, the schema may be passed in any spelling that parses to
// the same schema. The proposal's kind must be schema_version and its
// class live (approvals forces that for schema versions).
//
// The keys below are the notes dw-incidents also keeps in the proposal's
// details for people (the schema text beside its hash); they decide
// nothing.
const (
	DetailSubject    = "subject"
	DetailSchemaSHA  = "schema_sha256"
	DetailSchemaType = "schema_type"
)

// RegisterSchemaIn is a registration under an approved proposal.
type RegisterSchemaIn struct {
	Subject    string `json:"subject" jsonschema:"subject to register under, e.g. api-usage-value"`
	Schema     string `json:"schema" jsonschema:"the schema text the proposal was approved for (any spelling with the same canonical form)"`
	SchemaType string `json:"schema_type,omitempty" jsonschema:"AVRO (default), JSON or PROTOBUF"`
	ProposalID string `json:"proposal_id" jsonschema:"id of the approved schema_version proposal for exactly this subject and schema, e.g. P-7K3M9QXA"`
}

// RegisterSchemaOut says what was registered and how it was recorded.
type RegisterSchemaOut struct {
	Subject    string `json:"subject" jsonschema:"subject"`
	Version    int    `json:"version" jsonschema:"the subject version that holds the schema"`
	ID         int    `json:"id" jsonschema:"registry-wide schema id"`
	SchemaType string `json:"schema_type" jsonschema:"AVRO, JSON or PROTOBUF"`
	SHA256     string `json:"sha256" jsonschema:"canonical SHA-256 of the schema, as bound in the proposal"`
	// Registered is false when the schema was already there: nothing is
	// done twice.
	Registered    bool            `json:"registered" jsonschema:"true when this call registered the schema; false when it was already registered and nothing was done twice"`
	Proposal      string          `json:"proposal" jsonschema:"the proposal carried out"`
	ProposalState string          `json:"proposal_state" jsonschema:"the proposal's state after the call (executed)"`
	Basis         string          `json:"basis,omitempty" jsonschema:"the approval that allowed the registration"`
	ReceiptID     string          `json:"receipt_id" jsonschema:"receipt recording the proposal and this step (dw receipt show)"`
	StepSeq       int64           `json:"step_seq,omitempty" jsonschema:"position of the receipt step that recorded the registration (the same on a retry)"`
	Change        *RecordedChange `json:"change,omitempty" jsonschema:"the version's entry in the change log"`
	Note          string          `json:"note,omitempty" jsonschema:"what happened, for a person"`
}

var registerSchemaTool = mcpserver.Tool{
	Name:  "register_stream_schema",
	Title: "Register an approved schema version",
	Description: "Registers a schema version in the Schema Registry only under an approved schema_version proposal for exactly this subject and schema: the proposal is live class, is approved (not pending, expired or rejected), and its bound action names this registry, this subject and the schema's canonical SHA-256 and type. " +
		"The org-wide stop and the domain's autonomy level are checked first, and the approval is claimed in the store so two processes never carry it out twice. Without all of that it refuses, names what differs and whom to ask, and writes nothing. " +
		"On success it records the version in the change log, adds a step to the proposal's receipt and marks the proposal executed. Calling it again for the same schema returns the same version and step without doing anything twice.",
	ReadOnly:    false,
	Destructive: false,
	Idempotent:  true,
	OpenWorld:   true,
	InputSchema: mcpserver.InputSchema[RegisterSchemaIn](func(s *jsonschema.Schema) {
		mcpserver.Enum(s, "schema_type", "AVRO", "JSON", "PROTOBUF")
	}),
}

func (h *handlers) registerSchema(ctx context.Context, in RegisterSchemaIn) (*RegisterSchemaOut, string, error) {
	subject, pid := strings.TrimSpace(in.Subject), strings.TrimSpace(in.ProposalID)
	switch {
	case subject == "":
		return nil, "", errors.New("subject is empty: give the subject to register under, e.g. api-usage-value")
	case strings.TrimSpace(in.Schema) == "":
		return nil, "", errors.New("schema is empty: give the schema text the proposal was approved for")
	case pid == "":
		return nil, "", errors.New("proposal_id is empty: a schema is registered only under an approved schema_version proposal (dw-incidents propose_remediation makes one; its owner approves it)")
	}
	kind, err := compat.ParseKind(in.SchemaType)
	if err != nil {
		return nil, "", err
	}
	canon, err := compat.Canonicalize(kind, compat.Schema{Text: in.Schema})
	if err != nil {
		return nil, "", fmt.Errorf("the schema does not parse as %s, so it cannot be matched to an approval: %w; nothing was registered", kind, err)
	}
	rc, err := h.registryClient()
	if err != nil {
		return nil, "", err
	}
	svc, err := h.approvalService(ctx)
	if err != nil {
		return nil, "", err
	}

	p, err := svc.Get(ctx, pid)
	if err != nil {
		return nil, "", err
	}
	if err := bindsSchema(h, p, subject, kind, canon.SHA256); err != nil {
		return nil, "", err
	}
	spec, err := approvals.SchemaVersionAction(h.registryURL(), subject, string(kind), canon.SHA256)
	if err != nil {
		return nil, "", err
	}
	ns := registry.NewSchema{Schema: in.Schema, Kind: kind}
	exec, err := svc.BeginExecution(ctx, approvals.Action{Asset: schemaAsset(subject), Kind: approvals.KindSchemaVersion, ProposalID: p.ID, Spec: spec},
		Name, registerLease)
	if err != nil {
		if approvals.IsRefusal(err) {
			// Read the state again: another process may have carried the
			// approval out since it was read above.
			if cur, gerr := svc.Get(ctx, p.ID); gerr == nil {
				p = cur
			}
			if p.State == approvals.StateExecuted || p.State == approvals.StateUndone {
				return h.alreadyCarriedOut(ctx, rc, p, subject, ns, canon.SHA256)
			}
			return nil, "", h.withAsk(ctx, svc, p, err)
		}
		return nil, "", err
	}
	if exec.Done {
		return h.answerRetry(ctx, svc, p, exec)
	}
	out, summary, err := h.carryOut(ctx, svc, rc, p, exec.Permit, subject, kind, ns, canon.SHA256)
	bg := context.WithoutCancel(ctx)
	if err != nil {
		// The registry lookup before registering and the receipt check
		// before recording make the next call safe, so the claim is let go.
		if rerr := svc.ReleaseExecution(bg, exec); rerr != nil {
			err = errors.Join(err, rerr)
		}
		return nil, "", err
	}
	if _, err := svc.FinishExecution(bg, exec, out); err != nil {
		return nil, "", h.unfinished(&registry.SchemaVersion{Subject: subject, Version: out.Version, ID: out.ID}, p, err)
	}
	return out, summary, nil
}

// registerLease is how long a registration's claim on an approval holds
// before another call may take it over (its holder died): a lookup, a
// registration and a lookup at the registry's timeout, with room to spare.
const registerLease = 2 * time.Minute

// registryURL is the registry an approval binds, as dw.yaml names it.
func (h *handlers) registryURL() string {
	if sc := h.d.Config.SchemaRegistry; sc != nil {
		return approvals.NormalizeURL(sc.URL)
	}
	return ""
}

// answerRetry answers a call for an approval an earlier call carried out:
// the same version and step, nothing done twice.
func (h *handlers) answerRetry(ctx context.Context, svc *approvals.Service, p *approvals.Proposal, exec *approvals.Execution) (*RegisterSchemaOut, string, error) {
	var out RegisterSchemaOut
	if err := json.Unmarshal(exec.Result, &out); err != nil {
		return nil, "", fmt.Errorf("proposal %s was carried out, but its recorded result is unreadable: %w", p.ID, err)
	}
	cur, err := svc.Get(ctx, p.ID)
	if err != nil {
		return nil, "", err
	}
	out.Registered, out.ProposalState = false, string(cur.State)
	out.Note = fmt.Sprintf("proposal %s was already carried out: %s version %d (schema id %d) holds the schema (receipt step %d); nothing was done twice",
		p.ID, out.Subject, out.Version, out.ID, out.StepSeq)
	return &out, out.Note + ".", nil
}

// carryOut registers the approved schema (unless the registry holds it
// already), records the version in the change log and a step in the
// receipt, and marks the proposal executed. It runs under the approval's
// execution claim.
func (h *handlers) carryOut(ctx context.Context, svc *approvals.Service, rc *registry.Client, p *approvals.Proposal, permit approvals.Permit,
	subject string, kind compat.Kind, ns registry.NewSchema, sha string) (*RegisterSchemaOut, string, error) {
	existing, found, err := lookup(ctx, rc, subject, ns)
	if err != nil {
		return nil, "", err
	}
	registered := false
	if !found {
		if _, err := rc.Register(ctx, subject, ns); err != nil {
			return nil, "", fmt.Errorf("the registry did not register the schema under %s: %w; nothing was registered and proposal %s stays approved (check_compatibility in dw-schema shows which fields the registry objects to)", subject, err, p.ID)
		}
		if existing, found, err = lookup(ctx, rc, subject, ns); err != nil || !found {
			return nil, "", fmt.Errorf("registered the schema under %s but the registry's lookup does not find it (%v); call register_stream_schema again to finish recording", subject, err)
		}
		registered = true
	}

	approver := p.Approver
	if p.Decision != nil {
		approver = p.Decision.PersonID
	}
	facts, err := h.describeVersion(ctx, rc, existing)
	if err != nil {
		return nil, "", h.unfinished(existing, p, err)
	}
	if facts.sha256 == "" {
		facts.sha256 = sha
	}
	when := fmt.Sprintf("registered by %s under approved proposal %s; at is the registration time", Name, p.ID)
	if !registered {
		when = fmt.Sprintf("found already registered when %s carried out proposal %s; %s", Name, p.ID, firstSeenNote)
	}
	actor := fmt.Sprintf("%s on behalf of %s (proposal %s)", Name, approver, p.ID)
	change, err := h.recordSchemaVersion(ctx, rc, existing, facts, actor, when, map[string]string{"proposal": p.ID, "approved_by": approver})
	if err != nil {
		return nil, "", h.unfinished(existing, p, err)
	}
	db, err := h.d.Store(ctx)
	if err != nil {
		return nil, "", h.unfinished(existing, p, err)
	}
	seq, err := priorStep(ctx, db, p)
	if err != nil {
		return nil, "", h.unfinished(existing, p, err)
	}
	if seq == 0 {
		desc := fmt.Sprintf("registered %s version %d (schema id %d) on behalf of %s's approval of %s", subject, existing.Version, existing.ID, approver, p.ID)
		if !registered {
			desc = fmt.Sprintf("confirmed %s version %d (schema id %d) already holds the approved schema; registered nothing new (proposal %s, approved by %s)", subject, existing.Version, existing.ID, p.ID, approver)
		}
		entry, err := svc.RecordStep(ctx, p.ID, approvals.Step{
			Actor:       Name,
			Description: desc,
			ChecksBefore: []approvals.Check{
				{Name: "proposal binds this schema", Passed: true, Detail: "schema_sha256 " + sha},
				{Name: "dispatch permitted", Passed: true, Detail: permit.Basis},
				{Name: "registry looked up under " + subject + " before registering", Passed: true, Detail: lookupDetail(registered, existing)},
			},
			ChecksAfter: []approvals.Check{
				{Name: "registry lookup finds the schema under " + subject, Passed: true, Detail: fmt.Sprintf("version %d, schema id %d", existing.Version, existing.ID)},
			},
			Details: map[string]any{
				"tool": registerSchemaTool.Name, "subject": subject, "version": existing.Version, "schema_id": existing.ID,
				"schema_sha256": sha, "registry": rc.URL(), "registered": registered, "change_id": change.ID,
			},
		})
		if err != nil {
			return nil, "", h.unfinished(existing, p, err)
		}
		seq = entry.Seq
	}
	done, err := svc.MarkExecuted(ctx, p.ID, Name, fmt.Sprintf("%s version %d (schema id %d)", subject, existing.Version, existing.ID))
	if err != nil {
		return nil, "", h.unfinished(existing, p, err)
	}
	out := &RegisterSchemaOut{
		Subject: subject, Version: existing.Version, ID: existing.ID, SchemaType: string(kind), SHA256: sha,
		Registered: registered, Proposal: p.ID, ProposalState: string(done.State), Basis: permit.Basis,
		ReceiptID: p.ReceiptID, StepSeq: seq, Change: change,
	}
	if registered {
		out.Note = fmt.Sprintf("registered %s version %d (schema id %d) under %s", subject, existing.Version, existing.ID, permit.Basis)
	} else {
		out.Note = fmt.Sprintf("%s version %d (schema id %d) already held the approved schema; nothing was registered again", subject, existing.Version, existing.ID)
	}
	summary := fmt.Sprintf("%s.\nChange log: change %d. Receipt %s, step %d; proposal %s is %s.", out.Note, change.ID, p.ReceiptID, seq, p.ID, done.State)
	return out, summary, nil
}

func schemaAsset(subject string) string { return "schema://" + subject }

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
func bindsSchema(h *handlers, p *approvals.Proposal, subject string, kind compat.Kind, sha string) error {
	asset := schemaAsset(subject)
	newProposal := fmt.Sprintf("ask dw-incidents to propose registering this schema on %s (propose_remediation, kind schema_version, with the schema text) and ask %s, who approves changes to %s, to approve it",
		asset, approvals.PersonLabel(h.d.Config, p.Approver), asset)
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
func (h *handlers) withAsk(ctx context.Context, svc *approvals.Service, p *approvals.Proposal, refusal error) error {
	var asks []string
	who := approvals.PersonLabel(h.d.Config, p.Approver)
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
		asks = append(asks, fmt.Sprintf("%s rejected proposal %s%s; registering this schema needs a new proposal that answers the objection, approved by %s", approvals.PersonLabel(h.d.Config, by), p.ID, why, who))
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
func (h *handlers) alreadyCarriedOut(ctx context.Context, rc *registry.Client, p *approvals.Proposal, subject string, ns registry.NewSchema, sha string) (*RegisterSchemaOut, string, error) {
	v, found, err := lookup(ctx, rc, subject, ns)
	if err != nil {
		return nil, "", err
	}
	if !found {
		return nil, "", &approvals.Refusal{Reason: fmt.Sprintf("proposal %s was already carried out (%s) and the schema is no longer registered under %s; an approval runs once, so registering it again needs a new proposal approved by %s; nothing was registered or recorded",
			p.ID, p.State, subject, approvals.PersonLabel(h.d.Config, p.Approver))}
	}
	out := &RegisterSchemaOut{
		Subject: subject, Version: v.Version, ID: v.ID, SchemaType: string(ns.Kind), SHA256: sha, Registered: false,
		Proposal: p.ID, ProposalState: string(p.State), ReceiptID: p.ReceiptID,
		Note: fmt.Sprintf("proposal %s was already carried out: %s version %d (schema id %d) holds the schema; nothing was done twice", p.ID, subject, v.Version, v.ID),
	}
	return out, out.Note + ".", nil
}

// unfinished explains a failure after the registry holds the version:
// calling again finishes the records without registering twice.
func (h *handlers) unfinished(v *registry.SchemaVersion, p *approvals.Proposal, err error) error {
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

// priorStep finds a step this agent already recorded for the proposal (a
// call that registered and then failed before marking the proposal
// executed), so a retry does not record a second one. It returns the
// step's position, 0 when there is none.
func priorStep(ctx context.Context, q store.Querier, p *approvals.Proposal) (int64, error) {
	entries, err := approvals.Entries(ctx, q, p.ReceiptID)
	if err != nil {
		return 0, err
	}
	for _, e := range entries {
		if e.Kind != approvals.EntryStep || e.Actor != Name {
			continue
		}
		var payload struct {
			Proposal string         `json:"proposal"`
			Details  map[string]any `json:"details"`
		}
		if json.Unmarshal(e.Payload, &payload) != nil {
			continue
		}
		if payload.Proposal == p.ID && payload.Details["tool"] == registerSchemaTool.Name {
			return e.Seq, nil
		}
	}
	return 0, nil
}
