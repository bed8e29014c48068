package remediate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/dataworkers/dw/internal/approvals"
	"github.com/dataworkers/dw/internal/compat"
	"github.com/dataworkers/dw/internal/incidents"
	"github.com/dataworkers/dw/internal/lineage/ingest"
	"github.com/dataworkers/dw/internal/orchestrate"
	"github.com/dataworkers/dw/internal/warehouse"
)

// The details keys of a schema_version proposal, the contract with
// dw-connectors' register_stream_schema (agents/connectors/registration.go):
// subject, schema_type and the canonical SHA-256 of the schema
// (compat.Canonicalize), which binds the approval to exactly one schema.
// The schema text itself is kept beside them so whoever registers it has
// the approved text at hand. DetailLineageEvent keeps a lineage_event
// proposal's event beside the hash its action binds.
const (
	DetailSubject      = "subject"
	DetailSchemaType   = "schema_type"
	DetailSchemaSHA    = "schema_sha256"
	DetailSchema       = "schema"
	DetailLineageEvent = "lineage_event"
)

// ProposalSpec is one remediation as its proposer gives it, before it is
// bound to the one action its approval will allow.
type ProposalSpec struct {
	Kind, What, Why string
	Targets, Scope  []string
	Undo            string
	// CauseRank is the ranked cause it addresses; 0 is the first.
	CauseRank int
	// Run is the one run a rerun or replay allows on a configured
	// orchestrator.
	Run *RunSpec
	// Details are notes for people; they never decide what runs. The keys
	// verification reads (verify_table, replaces, verify_warehouse) are
	// checked here, so a typo is caught when proposing.
	Details map[string]any
	// Schema and SchemaType are a schema_version's schema text and type.
	Schema, SchemaType string
	// LineageEvent is the one OpenLineage run event a lineage_event allows.
	LineageEvent map[string]any
	// Replaces is "replaces A with B": once approved, verification reads B.
	Replaces *ReplacementSpec
}

// RunSpec is the one run a proposal allows: every field as the trigger
// tool will send it.
type RunSpec struct {
	System, Target string
	Params         map[string]any
}

// ProposeParams is a set of remediations for one incident.
type ProposeParams struct {
	IncidentID string
	Proposals  []ProposalSpec
}

// AssetResolver names an asset as the context graph does; a replacement
// found there needs no warehouse catalog look-up.
type AssetResolver interface {
	Resolve(ctx context.Context, ref string) (string, error)
}

// Propose binds each proposal to the one action its approval allows (a
// schema version at the configured registry, a run on a configured
// orchestrator, a lineage event at the configured endpoint, a checked
// replacement) and sends them all through incidents.ProposeRemediations,
// in one transaction with the incident's move to proposed, as env.Agent.
// A proposal that cannot be bound refuses the set before anything is
// written, as a *incidents.RemediationError naming it.
func Propose(ctx context.Context, env *Env, graph AssetResolver, p ProposeParams) (*incidents.Proposed, error) {
	rems := make([]incidents.Remediation, len(p.Proposals))
	if n := len(p.Proposals); n > 0 && n <= incidents.MaxRemediations {
		inc, err := env.Incidents.GetIncident(ctx, p.IncidentID)
		if err != nil {
			return nil, err
		}
		for i, spec := range p.Proposals {
			r, err := Bind(ctx, env, graph, inc, spec)
			if err != nil {
				return nil, &incidents.RemediationError{Index: i, What: strings.TrimSpace(spec.What), Err: err}
			}
			rems[i] = *r
		}
	}
	// An empty or oversized set is refused by incidents, in its words.
	return env.Incidents.ProposeRemediations(ctx, env.Approvals, incidents.ProposeParams{IncidentID: p.IncidentID, Remediations: rems, Proposer: env.Agent})
}

// Bind turns one proposal into the remediation incidents drafts and
// approvals checks: the schema version's hash, the replacement pair, the
// run or event the approval allows, each written into the details the
// approval seals. Drafting, routing and recording are
// incidents.ProposeRemediations'.
func Bind(ctx context.Context, env *Env, graph AssetResolver, inc *incidents.Incident, spec ProposalSpec) (*incidents.Remediation, error) {
	details := maps.Clone(spec.Details)
	if details == nil {
		details = map[string]any{}
	}
	kind := strings.ToLower(strings.TrimSpace(spec.Kind))
	if kind == string(incidents.ProposalSchemaVersion) {
		if err := bindSchema(spec, details); err != nil {
			return nil, err
		}
	} else if strings.TrimSpace(spec.Schema) != "" || strings.TrimSpace(spec.SchemaType) != "" {
		return nil, fmt.Errorf("schema and schema_type apply only to kind schema_version (this one is %s)", orDefault(kind, "without a kind"))
	}
	if len(spec.LineageEvent) > 0 && kind != string(incidents.ProposalLineageEvent) {
		return nil, fmt.Errorf("lineage_event applies only to kind lineage_event (this one is %s)", orDefault(kind, "without a kind"))
	}
	if err := checkVerifyDetails(details); err != nil {
		return nil, err
	}
	why, err := bindReplacement(ctx, env, graph, inc, spec, details)
	if err != nil {
		return nil, err
	}
	action, err := bindAction(env, kind, spec, details)
	if err != nil {
		return nil, err
	}
	targets := spec.Targets
	if kind == string(incidents.ProposalLineageEvent) {
		// The event's job is what the post acts on: the target by default,
		// and a target list that leaves it out is refused, named.
		switch {
		case len(targets) == 0:
			targets = []string{action.Asset}
		case !slices.Contains(targets, action.Asset):
			return nil, fmt.Errorf("a lineage_event proposal targets the event's job %s (targets: %s); leave targets out and it is set", action.Asset, strings.Join(targets, ", "))
		}
	}
	return &incidents.Remediation{
		Draft: incidents.DraftParams{IncidentID: inc.ID, Kind: kind, What: spec.What, Targets: targets, Scope: spec.Scope,
			Undo: spec.Undo, CauseRank: spec.CauseRank, Details: details},
		Why: why, Action: action,
	}, nil
}

// bindReplacement checks a proposal's "replaces A with B" and records the
// canonical pair in its details, which the approval seals with the rest of
// the proposal, and says it first in its why, which the approver reads in
// every request: approving it is approving that verification reads B. The
// answer is the proposal's why.
func bindReplacement(ctx context.Context, env *Env, graph AssetResolver, inc *incidents.Incident, spec ProposalSpec, details map[string]any) (string, error) {
	if _, ok := details[DetailReplacement]; ok {
		return "", fmt.Errorf("details.%s is written from replaces, so the approval seals a checked pair: give replaces {asset, with} instead", DetailReplacement)
	}
	if spec.Replaces == nil {
		return spec.Why, nil
	}
	if _, ok := details[DetailVerifyTable]; ok {
		return "", fmt.Errorf("give the replacement once: replaces {asset, with} or details.%s, not both", DetailVerifyTable)
	}
	r, err := CheckReplacement(ctx, env, inc, *spec.Replaces, graph)
	if err != nil {
		return "", err
	}
	details[DetailReplacement] = map[string]any{"asset": r.Asset, "with": r.With}
	said := fmt.Sprintf("Replaces %s with %s: once approved, remediate reads %s for the checks and metrics of %s", r.Asset, r.With, r.With, r.Asset)
	if w := strings.TrimSpace(spec.Why); w != "" {
		said += ". " + w
	}
	return said, nil
}

// bindAction builds the action the approval will allow: a run on a
// configured orchestrator, a lineage event at the configured endpoint, or
// a schema version at the configured registry. It is built as the
// executing tool builds it, so dw-connectors can compare the two field by
// field. Other kinds allow nothing to run (nil).
func bindAction(env *Env, kind string, spec ProposalSpec, details map[string]any) (*approvals.ActionSpec, error) {
	if r := spec.Run; r != nil {
		if kind != string(incidents.ProposalRerun) && kind != string(incidents.ProposalReplay) {
			return nil, fmt.Errorf("run applies to kinds rerun and replay (this one is %s)", orDefault(kind, "without a kind"))
		}
		runners, err := env.runners()
		if err != nil {
			return nil, err
		}
		a, err := orchestrate.ActionFor(runners, r.System, r.Target, r.Params)
		if err != nil {
			return nil, fmt.Errorf("run: %w", err)
		}
		return a, nil
	}
	if kind == string(incidents.ProposalLineageEvent) {
		return lineageAction(env, spec, details)
	}
	if kind != string(incidents.ProposalSchemaVersion) {
		return nil, nil
	}
	sr := env.Config.SchemaRegistry
	if sr == nil || strings.TrimSpace(sr.URL) == "" {
		return nil, errors.New("no schema_registry.url in dw.yaml: a schema_version approval binds the registry it is registered at, so configure it first")
	}
	subject, _ := details[DetailSubject].(string)
	schemaType, _ := details[DetailSchemaType].(string)
	sha, _ := details[DetailSchemaSHA].(string)
	return approvals.SchemaVersionAction(sr.URL, subject, schemaType, sha)
}

// lineageAction binds a lineage_event proposal to its event as
// emit_lineage_event builds the action: the same event at the configured
// endpoint gives the same action, any other event a different hash. The
// event is kept in the details, so whoever forwards it has the approved
// event at hand.
func lineageAction(env *Env, spec ProposalSpec, details map[string]any) (*approvals.ActionSpec, error) {
	if len(spec.LineageEvent) == 0 {
		return nil, errors.New("a lineage_event proposal needs lineage_event: the OpenLineage RunEvent to post, so its hash can bind the approval to exactly that event")
	}
	ol := env.Config.OpenLineage
	if ol == nil || strings.TrimSpace(ol.URL) == "" {
		return nil, errors.New("no openlineage.url in dw.yaml: a lineage_event approval binds the endpoint the event is posted to, so configure it first")
	}
	raw, err := json.Marshal(spec.LineageEvent)
	if err != nil {
		return nil, fmt.Errorf("lineage_event cannot be encoded as JSON: %w", err)
	}
	if err := ingest.ValidateRunEvent(raw); err != nil {
		return nil, fmt.Errorf("lineage_event: %w", err)
	}
	a, err := approvals.LineageEventAction(ol.URL, spec.LineageEvent)
	if err != nil {
		return nil, err
	}
	details[DetailLineageEvent] = spec.LineageEvent
	return a, nil
}

// bindSchema checks a schema_version proposal's schema and writes the
// details register_stream_schema requires.
func bindSchema(spec ProposalSpec, details map[string]any) error {
	text := strings.TrimSpace(spec.Schema)
	if text == "" {
		return errors.New("a schema_version proposal needs schema: the schema text to register, so its hash can bind the approval to exactly that schema")
	}
	kind, err := compat.ParseKind(spec.SchemaType)
	if err != nil {
		return err
	}
	canon, err := compat.Canonicalize(kind, compat.Schema{Text: spec.Schema})
	if err != nil {
		return fmt.Errorf("the schema does not parse as %s: %w", kind, err)
	}
	var subjects []string
	for _, t := range spec.Targets {
		if s, ok := strings.CutPrefix(strings.TrimSpace(t), "schema://"); ok && s != "" {
			subjects = append(subjects, s)
		}
	}
	subject, _ := details[DetailSubject].(string)
	subject = strings.TrimSpace(subject)
	switch {
	case len(subjects) != 1:
		return fmt.Errorf("a schema_version proposal targets exactly one subject as schema://<subject> (targets: %s)", strings.Join(spec.Targets, ", "))
	case subject != "" && subject != subjects[0]:
		return fmt.Errorf("details.subject %q differs from the target schema://%s", subject, subjects[0])
	}
	if given, ok := details[DetailSchemaSHA].(string); ok && strings.TrimSpace(given) != "" && !strings.EqualFold(strings.TrimSpace(given), canon.SHA256) {
		return fmt.Errorf("details.schema_sha256 %s is not the schema's canonical SHA-256 %s; leave it out and it is computed from schema", given, canon.SHA256)
	}
	if given, ok := details[DetailSchemaType].(string); ok && strings.TrimSpace(given) != "" {
		if gk, err := compat.ParseKind(given); err != nil || gk != kind {
			return fmt.Errorf("details.schema_type %q differs from schema_type %s", given, kind)
		}
	}
	details[DetailSubject] = subjects[0]
	details[DetailSchemaType] = string(kind)
	details[DetailSchemaSHA] = canon.SHA256
	details[DetailSchema] = spec.Schema
	return nil
}

// checkVerifyDetails validates the keys verification reads, so a typo is
// caught when proposing rather than when verifying.
func checkVerifyDetails(details map[string]any) error {
	for _, k := range []string{DetailVerifyTable, DetailReplaces, DetailVerifyWarehouse} {
		v, ok := details[k]
		if !ok {
			continue
		}
		s, isString := v.(string)
		if !isString || strings.TrimSpace(s) == "" {
			return fmt.Errorf("details.%s must be a non-empty string", k)
		}
	}
	if v, ok := details[DetailVerifyTable].(string); ok {
		if _, err := warehouse.ParseTableName(v); err != nil {
			return fmt.Errorf("details.%s: %w", DetailVerifyTable, err)
		}
	}
	if _, ok := details[DetailReplaces]; ok {
		if _, ok := details[DetailVerifyTable]; !ok {
			return fmt.Errorf("details.%s names the table replaced; give the replacement in details.%s too", DetailReplaces, DetailVerifyTable)
		}
	}
	return nil
}
