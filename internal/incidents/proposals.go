package incidents

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/dataworkers/dw/internal/changelog"
	"github.com/dataworkers/dw/internal/suggest"
)

// ProposalKind is the action a remediation proposal asks a person to approve.
type ProposalKind string

// Proposal kinds.
const (
	// ProposalHold pauses a downstream job or sync (the Stripe DAG, the
	// Braze sync) until the data is right.
	ProposalHold ProposalKind = "hold"
	// ProposalDiff changes code or configuration (a dbt model, a job's
	// deployment) by a reviewed diff.
	ProposalDiff ProposalKind = "diff"
	// ProposalDeleteWithUndo removes data or objects, with a named way back.
	ProposalDeleteWithUndo ProposalKind = "delete_with_undo"
	// ProposalReplay reprocesses input from a point (offsets, a savepoint).
	ProposalReplay ProposalKind = "replay"
	// ProposalSchemaVersion registers a new schema version.
	ProposalSchemaVersion ProposalKind = "schema_version"
	// ProposalRerun re-runs a job or model for a range.
	ProposalRerun ProposalKind = "rerun"
	// ProposalLineageEvent posts one OpenLineage run event to the
	// configured endpoint (a job the lineage server lacks, or corrects).
	ProposalLineageEvent ProposalKind = "lineage_event"
)

// ProposalKinds lists every proposal kind.
var ProposalKinds = []ProposalKind{ProposalHold, ProposalDiff, ProposalDeleteWithUndo, ProposalReplay, ProposalSchemaVersion, ProposalRerun, ProposalLineageEvent}

// ApprovalKind is the kind internal/approvals records the action as.
func (k ProposalKind) ApprovalKind() string {
	if k == ProposalDeleteWithUndo {
		return "delete"
	}
	return string(k)
}

// DraftParams is a remediation the agent wants to propose for an incident.
type DraftParams struct {
	IncidentID string         `json:"incident_id" jsonschema:"incident the remediation is for"`
	Kind       string         `json:"kind" jsonschema:"hold, diff, delete_with_undo, replay, schema_version, rerun or lineage_event"`
	What       string         `json:"what" jsonschema:"the change in one line, as the approver will read it"`
	Targets    []string       `json:"targets" jsonschema:"asset ids the action acts on"`
	Scope      []string       `json:"scope,omitempty" jsonschema:"assets and consumers it touches; default the incident's assets"`
	Undo       string         `json:"undo" jsonschema:"how to reverse it, named concretely (e.g. point the dbt source back to usage.usage_hourly)"`
	CauseRank  int            `json:"cause_rank,omitempty" jsonschema:"which ranked cause it addresses, if credible; default the cause a person named, else the credible top cause, else none"`
	Details    map[string]any `json:"details,omitempty" jsonschema:"parameters the executing tool needs verbatim (schema text, savepoint, job id)"`
}

// ProposalDraft is a remediation ready to hand to approvals: what, why
// (the cause it addresses), on what, with what scope and undo.
type ProposalDraft struct {
	IncidentID   string         `json:"incident_id" jsonschema:"incident id"`
	Kind         ProposalKind   `json:"kind" jsonschema:"proposal kind"`
	ApprovalKind string         `json:"approval_kind" jsonschema:"the kind approvals records it as"`
	What         string         `json:"what" jsonschema:"the change in one line"`
	Why          string         `json:"why" jsonschema:"the cause it addresses, with its confidence or who named it; or that no credible cause is known"`
	Targets      []string       `json:"targets" jsonschema:"asset ids acted on"`
	Scope        []string       `json:"scope" jsonschema:"assets and consumers touched"`
	Undo         string         `json:"undo" jsonschema:"how to reverse it"`
	Rationale    []string       `json:"rationale" jsonschema:"the cause's evidence, or the symptoms when no cause is cited, for the approver to check"`
	Details      map[string]any `json:"details" jsonschema:"action parameters"`
}

// MaxDetailsBytes bounds a proposal's details as JSON. A schema_version
// proposal carries the schema text to register there, so the bound is the
// schema argument's own (1 MiB) with room for the other keys.
const MaxDetailsBytes = 1<<20 + 64<<10

// noUndo are answers that name no way back.
var noUndo = []string{"none", "n/a", "na", "no", "-", "nothing", "not possible", "cannot be undone"}

// DraftProposal turns a remediation the agent wants into a draft grounded in
// the incident's diagnosis: it must address a ranked cause, act on named
// assets and say concretely how to undo it. The lead hands the draft to
// approvals; nothing here runs anything.
func (s *Service) DraftProposal(ctx context.Context, p DraftParams) (*ProposalDraft, error) {
	kind, err := suggest.Parse("proposal kind", p.Kind, ProposalKinds)
	if err != nil {
		return nil, invalid("%v", err)
	}
	// Details are free-form, so the schema cannot bound them field by field:
	// bound them whole, before anything is read or stored. They are notes
	// for the approver (an approval binds its action, never its details),
	// and every answer echoes them.
	if text, err := json.Marshal(p.Details); err != nil {
		return nil, invalid("details cannot be encoded as JSON: %v", err)
	} else if len(text) > MaxDetailsBytes {
		return nil, invalid("details are %d characters of JSON; at most %d: put large documents (a schema, a manifest) where the executing tool reads them and name them here", len(text), MaxDetailsBytes)
	}
	what := strings.TrimSpace(p.What)
	if what == "" {
		return nil, invalid("what is empty: say in one line what the approver is approving")
	}
	undo := strings.TrimSpace(p.Undo)
	if undo == "" || slices.Contains(noUndo, strings.ToLower(undo)) {
		return nil, invalid("undo %q names no way back: say concretely how to reverse the action (e.g. resume the DAG, revert the diff, re-register version 12)", p.Undo)
	}
	if len(p.Targets) == 0 {
		return nil, invalid("targets is empty: name the asset ids the action acts on")
	}
	targets := []string{}
	for _, t := range p.Targets {
		t, err := s.assetID(ctx, "targets", t)
		if err != nil {
			return nil, err
		}
		if !slices.Contains(targets, t) {
			targets = append(targets, t)
		}
	}
	inc, err := loadIncident(ctx, s.DB, p.IncidentID)
	if err != nil {
		return nil, err
	}
	switch inc.Status {
	case StatusDiagnosed, StatusProposed, StatusEscalated:
	default:
		return nil, invalid("incident %s is %s; remediations are proposed for a diagnosed incident (run the diagnosis first)", inc.ID, inc.Status)
	}
	// The cause the proposal cites: the one a person named, else the
	// credible top cause, else an explicit cause_rank that is credible. A
	// change below the credibility line is never cited: the proposal then
	// says no cause is known and rests on the symptoms.
	var cause *Cause
	rank := p.CauseRank
	switch {
	case rank < 0 || rank > len(inc.Causes) && rank != 0:
		return nil, invalid("cause_rank %d out of range: incident %s has %d ranked cause(s)", rank, inc.ID, len(inc.Causes))
	case rank > 0 && inc.Attributed == nil:
		c := inc.Causes[rank-1]
		if !c.Credible {
			return nil, invalid("cause #%d of %s (%s, confidence %.2f, %s) is not a credible cause: it has %s; "+
				"a person who knows it is the cause names it with dw cause set %s %d --reason ..., or propose without cause_rank",
				rank, inc.ID, c.Change.Summary, c.Confidence, c.Relation, legsText(missingLegs(c)), inc.ID, c.Change.ID)
		}
		cause = &c
	default:
		cause = inc.CitedCause()
	}
	why := fmt.Sprintf("%s: no credible cause identified (%d change(s) considered); the action addresses the symptoms", inc.Title, len(inc.Causes))
	rationale := []string{}
	switch {
	case cause != nil && inc.Attributed != nil && cause.Change.ID == inc.Attributed.Change.ID:
		why = fmt.Sprintf("%s: cause named by %s: %s (%s), %s the onset", inc.Title, inc.Attributed.Actor, cause.Change.Summary,
			inc.Attributed.Reason, cause.LeadTime)
		rationale = append(rationale, cause.Evidence...)
	case cause != nil:
		why = fmt.Sprintf("%s: cause #%d (confidence %.2f): %s, %s the onset", inc.Title, cause.Rank, cause.Confidence,
			cause.Change.Summary, cause.LeadTime)
		rationale = append(rationale, cause.Evidence...)
	default:
		for _, sym := range inc.Symptoms {
			rationale = append(rationale, fmt.Sprintf("%s on %s: %s", sym.Kind, sym.Asset, sym.describe()))
		}
	}
	scope := []string{}
	for _, a := range p.Scope {
		a, err := changelog.CleanAsset("scope", a)
		if err != nil {
			return nil, err
		}
		if !slices.Contains(scope, a) {
			scope = append(scope, a)
		}
	}
	if len(scope) == 0 {
		scope = append(scope, inc.Assets...)
	}
	details := map[string]any{}
	for k, v := range p.Details {
		details[k] = v
	}
	return &ProposalDraft{
		IncidentID: inc.ID, Kind: kind, ApprovalKind: kind.ApprovalKind(), What: what,
		Why: why, Targets: targets, Scope: scope, Undo: undo, Rationale: rationale, Details: details,
	}, nil
}
