package incidents

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
	"github.com/dataworkers/dw/internal/incidents"
	"github.com/dataworkers/dw/internal/lineage/ingest"
	"github.com/dataworkers/dw/internal/mcpserver"
	"github.com/dataworkers/dw/internal/orchestrate"
	"github.com/dataworkers/dw/internal/remediate"
	"github.com/dataworkers/dw/internal/warehouse"
)

// The details keys of a schema_version proposal, the contract with
// dw-connectors' register_stream_schema (agents/connectors/registration.go):
// subject, schema_type and the canonical SHA-256 of the schema
// (compat.Canonicalize), which binds the approval to exactly one schema.
// The schema text itself is kept beside them so whoever registers it has
// the approved text at hand.
const (
	detailSubject    = "subject"
	detailSchemaType = "schema_type"
	detailSchemaSHA  = "schema_sha256"
	detailSchema     = "schema"
	// detailLineageEvent keeps a lineage_event proposal's event beside the
	// hash its action binds.
	detailLineageEvent = "lineage_event"
)

// The details keys remediate reads from approved proposals: the table a
// fix replaces the symptomatic table with (verify_table, schema.table in
// the same warehouse), the symptomatic table or asset it replaces when the
// incident has several (replaces), and the warehouse to check when several
// of the asset's platform are configured (verify_warehouse).
const (
	detailVerifyTable     = remediate.DetailVerifyTable
	detailReplaces        = remediate.DetailReplaces
	detailVerifyWarehouse = remediate.DetailVerifyWarehouse
)

var proposalKinds = []string{"hold", "diff", "delete_with_undo", "replay", "schema_version", "rerun", "lineage_event"}

// ProposalSpec is one remediation to put to its approver.
type ProposalSpec struct {
	Kind       string         `json:"kind" jsonschema:"hold (pause a downstream job or sync), diff (a reviewed code or config change), delete_with_undo, replay (reprocess from offsets or a savepoint), schema_version (register a schema version), rerun, or lineage_event (post one OpenLineage run event to openlineage.url)"`
	What       string         `json:"what" jsonschema:"the change in one line, as the approver will read it, e.g. Pause sync_metered_usage_to_stripe until egress is verified"`
	Why        string         `json:"why,omitempty" jsonschema:"why this action, in the approver's terms; the ranked cause it addresses is added"`
	Targets    []string       `json:"targets" jsonschema:"asset ids the action acts on, e.g. airflow://dag/sync_metered_usage_to_stripe; for schema_version schema://<subject>; for lineage_event openlineage://<job namespace>/<job name> (the default when left out)"`
	Scope      []string       `json:"scope,omitempty" jsonschema:"assets and consumers it touches (its blast radius); default the incident's assets"`
	Undo       string         `json:"undo" jsonschema:"how to reverse it, concretely: unpause the DAG, revert the diff, point the dbt source back to usage.usage_hourly"`
	CauseRank  int            `json:"cause_rank,omitempty" jsonschema:"which ranked cause it addresses; default 1"`
	Run        *RunAction     `json:"run,omitempty" jsonschema:"for a rerun or replay that dw-connectors starts on an orchestrator: exactly the run the approval allows (system, target, every param). The approver sees every field, and no other run, target, location or param can be dispatched under it"`
	Details    map[string]any `json:"details,omitempty" jsonschema:"notes for the person carrying it out (savepoint, offsets, diff); verify_table names a replacement table remediate checks instead of the symptomatic one, replaces which symptomatic table it replaces, verify_warehouse the warehouse. Details never decide what a tool may run: bind a run with run"`
	Schema     string         `json:"schema,omitempty" jsonschema:"for schema_version: the schema text to register; its canonical SHA-256 is bound into the proposal so only this schema can be registered under it"`
	SchemaType string         `json:"schema_type,omitempty" jsonschema:"for schema_version: AVRO (default), JSON or PROTOBUF"`
	// LineageEvent is the one event a lineage_event approval lets
	// emit_lineage_event post.
	LineageEvent map[string]any `json:"lineage_event,omitempty" jsonschema:"for lineage_event: the OpenLineage RunEvent to post, exactly as emit_lineage_event (dw-connectors) will be given it. Its canonical SHA-256, job, run, datasets and the endpoint are bound and shown to the approver, so no other event can be posted under the approval"`
	// Replaces is bound into the sealed proposal (replacement.go).
	Replaces *remediate.ReplacementSpec `json:"replaces,omitempty" jsonschema:"replaces A with B: once approved, remediate reads the table with (B) for the checks and metrics of asset (A), and the receipt shows it; both canonical asset ids of warehouse tables, B in the catalog or the context graph"`
}

// RunAction is the one run a proposal allows.
type RunAction struct {
	System string         `json:"system" jsonschema:"dagster, airflow, dbt_cloud or step_functions (configured under orchestrators in dw.yaml)"`
	Target string         `json:"target" jsonschema:"a Dagster location/repository/job (or location/job), an Airflow DAG id, a dbt Cloud job id, a Step Functions state machine ARN"`
	Params map[string]any `json:"params,omitempty" jsonschema:"every parameter the run will send, exactly as the trigger tool will send it: {\"conf\": {…}} for Airflow, {\"run_config\": {…}, \"tags\": {…}} for Dagster, dbt Cloud overrides such as {\"steps_override\": [\"dbt build -s fct_billable_egress\"]}, {\"input\": {…}} for Step Functions"`
}

// ProposeIn is a set of remediations for one incident.
type ProposeIn struct {
	Incident  string         `json:"incident" jsonschema:"incident id, e.g. INC-3; it must be diagnosed"`
	Proposals []ProposalSpec `json:"proposals" jsonschema:"the remediations, each decided on its own by its named approver"`
}

// Proposed is one proposal as sent.
type Proposed struct {
	ID            string                `json:"id" jsonschema:"proposal id to decide, e.g. P-7K3M9QXA"`
	Kind          string                `json:"kind" jsonschema:"action kind as approvals records it"`
	Class         string                `json:"class" jsonschema:"standard (domain approvers in order) or live (only the asset owner, for schema versions)"`
	Domain        string                `json:"domain" jsonschema:"domain whose rules apply"`
	What          string                `json:"what" jsonschema:"the change in one line"`
	Why           string                `json:"why" jsonschema:"why, with the cause it addresses"`
	Targets       []string              `json:"targets" jsonschema:"assets acted on"`
	Scope         []string              `json:"scope" jsonschema:"assets and consumers touched"`
	Undo          string                `json:"undo" jsonschema:"how to reverse it"`
	Approver      string                `json:"approver" jsonschema:"person id whose decision is awaited"`
	ApproverName  string                `json:"approver_name" jsonschema:"the approver as a person reads it"`
	ApproverOrder []string              `json:"approver_order" jsonschema:"escalation order when the approver does not answer in time"`
	Copied        []string              `json:"copied" jsonschema:"person ids copied on the request"`
	ExpiresAt     time.Time             `json:"expires_at" jsonschema:"when the request expires: it then escalates to the next approver, and expiry never grants"`
	State         string                `json:"state" jsonschema:"pending until a person decides"`
	Action        *approvals.ActionSpec `json:"action,omitempty" jsonschema:"the one action the approval allows, every field as the approver sees it"`
	Details       map[string]any        `json:"details,omitempty" jsonschema:"notes for people; they never decide what runs"`
	HowToDecide   string                `json:"how_to_decide" jsonschema:"how the approver records a decision"`
}

// ProposeOut lists what was sent.
type ProposeOut struct {
	Incident  string     `json:"incident" jsonschema:"incident id"`
	Status    string     `json:"status" jsonschema:"incident status after proposing (proposed)"`
	ReceiptID string     `json:"receipt_id" jsonschema:"receipt recording the cause, these proposals and their decisions"`
	Proposals []Proposed `json:"proposals" jsonschema:"the proposals, each waiting for its approver"`
}

var proposeTool = mcpserver.Tool{
	Name:  "propose_remediation",
	Title: "Propose remediations to their approvers",
	Description: "Sends structured remediations for a diagnosed incident through the approvals core: hold a downstream job, a diff for the owning team, a delete with its named undo, a replay from a position, a schema version, a rerun; each with targets, scope, a concrete undo and the ranked cause it addresses. " +
		"Approvals names the approver from the target's domain owners in dw.yaml (else the asset's owner in the catalog); the other owners involved in the incident are copied. Each approval binds the one action it allows, shown to the approver field by field: a schema_version proposal carries the schema text, and its subject, type and canonical SHA-256 at the configured registry are bound, so register_stream_schema (dw-connectors) registers exactly that schema; a rerun or replay names its run (system, target, every param), so the trigger tools start exactly that run; a lineage_event carries the OpenLineage event, bound by its SHA-256 with its job, run, datasets and the configured openlineage.url, so emit_lineage_event (dw-connectors) posts exactly that event, once. Details are notes and never allow anything. " +
		"Every proposal is checked before any is sent. This agent only proposes: a person decides (dw approve <id> at the terminal, or in Slack) and the owners carry the steps out; then call remediate.",
	ReadOnly:    false,
	Destructive: false,
	Idempotent:  false,
	OpenWorld:   false,
	InputSchema: mcpserver.InputSchema[ProposeIn](func(s *jsonschema.Schema) {
		item := s.Properties["proposals"].Items
		item.Properties["kind"].Enum = []any{}
		for _, k := range proposalKinds {
			item.Properties["kind"].Enum = append(item.Properties["kind"].Enum, k)
		}
		item.Properties["schema_type"].Enum = []any{"AVRO", "JSON", "PROTOBUF"}
	}),
}

func (h *handlers) propose(ctx context.Context, in ProposeIn) (*ProposeOut, string, error) {
	if len(in.Proposals) > incidents.MaxRemediations {
		return nil, "", fmt.Errorf("%d proposals in one call; at most %d", len(in.Proposals), incidents.MaxRemediations)
	}
	e, err := h.env(ctx)
	if err != nil {
		return nil, "", err
	}
	var rems []incidents.Remediation
	if len(in.Proposals) > 0 {
		inc, err := e.svc.GetIncident(ctx, in.Incident)
		if err != nil {
			return nil, "", err
		}
		for i, spec := range in.Proposals {
			r, err := h.bind(ctx, e, inc, spec)
			if err != nil {
				return nil, "", fmt.Errorf("proposals[%d] (%s): %w", i, strings.TrimSpace(spec.What), err)
			}
			rems = append(rems, *r)
		}
	}
	res, err := e.svc.ProposeRemediations(ctx, e.apv, incidents.ProposeParams{IncidentID: in.Incident, Remediations: rems, Proposer: Name})
	if err != nil {
		return nil, "", err
	}
	out := &ProposeOut{Incident: res.Incident.ID, Status: string(res.Incident.Status), ReceiptID: res.Incident.ID, Proposals: []Proposed{}}
	for _, p := range res.Proposals {
		out.Proposals = append(out.Proposals, h.proposed(p))
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s is proposed: %d proposal(s) sent; nothing changes until a person approves.", out.Incident, len(out.Proposals))
	for _, p := range out.Proposals {
		fmt.Fprintf(&b, "\n- %s %s (%s): approver %s", p.ID, p.What, p.Kind, p.ApproverName)
		if len(p.Copied) > 0 {
			fmt.Fprintf(&b, ", copied %s", strings.Join(p.Copied, ", "))
		}
		fmt.Fprintf(&b, "; expires %s. %s.", p.ExpiresAt.UTC().Format("2006-01-02 15:04 UTC"), p.HowToDecide)
	}
	b.WriteString("\nAfter the owners carry out the approved steps, call remediate.")
	return out, b.String(), nil
}

func (h *handlers) proposed(p *approvals.Proposal) Proposed {
	copied := p.Copied
	if copied == nil {
		copied = []string{}
	}
	scope := p.Scope
	if scope == nil {
		scope = []string{}
	}
	return Proposed{
		ID: p.ID, Kind: p.Kind, Class: string(p.Class), Domain: p.Domain, What: p.What, Why: p.Why, Targets: p.Targets,
		Scope: scope, Undo: p.Undo, Approver: p.Approver, ApproverName: h.personLabel(p.Approver), ApproverOrder: p.ApproverOrder,
		Copied: copied, ExpiresAt: p.ExpiresAt, State: string(p.State), Action: p.Action, Details: p.Details, HowToDecide: h.decideHow(p),
	}
}

// bind decodes one proposal into a remediation: the schema version's
// hash, the replacement pair, the run or event the approval allows.
// Drafting, routing and recording are incidents.ProposeRemediations'.
func (h *handlers) bind(ctx context.Context, e *env, inc *incidents.Incident, spec ProposalSpec) (*incidents.Remediation, error) {
	details := map[string]any{}
	for k, v := range spec.Details {
		details[k] = v
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
	if err := h.bindReplacement(ctx, e, inc, &spec, details); err != nil {
		return nil, err
	}
	action, err := h.bindAction(kind, spec, details)
	if err != nil {
		return nil, err
	}
	if kind == string(incidents.ProposalLineageEvent) {
		// The event's job is what the post acts on: the target by default,
		// and a target list that leaves it out is refused, named.
		switch {
		case len(spec.Targets) == 0:
			spec.Targets = []string{action.Asset}
		case !slices.Contains(spec.Targets, action.Asset):
			return nil, fmt.Errorf("a lineage_event proposal targets the event's job %s (targets: %s); leave targets out and it is set", action.Asset, strings.Join(spec.Targets, ", "))
		}
	}
	return &incidents.Remediation{
		Draft: incidents.DraftParams{IncidentID: inc.ID, Kind: kind, What: spec.What, Targets: spec.Targets, Scope: spec.Scope,
			Undo: spec.Undo, CauseRank: spec.CauseRank, Details: details},
		Why: spec.Why, Action: action,
	}, nil
}

// bindAction builds the action the approval will allow: a run on a
// configured orchestrator, or a schema version at the configured
// registry. It is built as the executing tool builds it, so dw-connectors
// can compare the two field by field.
func (h *handlers) bindAction(kind string, spec ProposalSpec, details map[string]any) (*approvals.ActionSpec, error) {
	if r := spec.Run; r != nil {
		if kind != string(incidents.ProposalRerun) && kind != string(incidents.ProposalReplay) {
			return nil, fmt.Errorf("run applies to kinds rerun and replay (this one is %s)", orDefault(kind, "without a kind"))
		}
		runners, err := orchestrate.NewRunners(h.d.Config.Orchestrators)
		if err != nil {
			return nil, fmt.Errorf("orchestrators in dw.yaml: %w", err)
		}
		a, err := orchestrate.ActionFor(runners, r.System, r.Target, r.Params)
		if err != nil {
			return nil, fmt.Errorf("run: %w", err)
		}
		return a, nil
	}
	if kind == string(incidents.ProposalLineageEvent) {
		return h.lineageAction(spec, details)
	}
	if kind != string(incidents.ProposalSchemaVersion) {
		return nil, nil
	}
	sr := h.d.Config.SchemaRegistry
	if sr == nil || strings.TrimSpace(sr.URL) == "" {
		return nil, errors.New("no schema_registry.url in dw.yaml: a schema_version approval binds the registry it is registered at, so configure it first")
	}
	subject, _ := details[detailSubject].(string)
	schemaType, _ := details[detailSchemaType].(string)
	sha, _ := details[detailSchemaSHA].(string)
	return approvals.SchemaVersionAction(sr.URL, subject, schemaType, sha)
}

// lineageAction binds a lineage_event proposal to its event as
// emit_lineage_event builds the action: the same event at the configured
// endpoint gives the same action, any other event a different hash. The
// event is kept in the details, so whoever forwards it has the approved
// event at hand.
func (h *handlers) lineageAction(spec ProposalSpec, details map[string]any) (*approvals.ActionSpec, error) {
	if len(spec.LineageEvent) == 0 {
		return nil, errors.New("a lineage_event proposal needs lineage_event: the OpenLineage RunEvent to post, so its hash can bind the approval to exactly that event")
	}
	ol := h.d.Config.OpenLineage
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
	details[detailLineageEvent] = spec.LineageEvent
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
	subject, _ := details[detailSubject].(string)
	subject = strings.TrimSpace(subject)
	switch {
	case len(subjects) != 1:
		return fmt.Errorf("a schema_version proposal targets exactly one subject as schema://<subject> (targets: %s)", strings.Join(spec.Targets, ", "))
	case subject != "" && subject != subjects[0]:
		return fmt.Errorf("details.subject %q differs from the target schema://%s", subject, subjects[0])
	}
	if given, ok := details[detailSchemaSHA].(string); ok && strings.TrimSpace(given) != "" && !strings.EqualFold(strings.TrimSpace(given), canon.SHA256) {
		return fmt.Errorf("details.schema_sha256 %s is not the schema's canonical SHA-256 %s; leave it out and it is computed from schema", given, canon.SHA256)
	}
	if given, ok := details[detailSchemaType].(string); ok && strings.TrimSpace(given) != "" {
		if gk, err := compat.ParseKind(given); err != nil || gk != kind {
			return fmt.Errorf("details.schema_type %q differs from schema_type %s", given, kind)
		}
	}
	details[detailSubject] = subjects[0]
	details[detailSchemaType] = string(kind)
	details[detailSchemaSHA] = canon.SHA256
	details[detailSchema] = spec.Schema
	return nil
}

// checkVerifyDetails validates the keys remediate reads, so a typo is
// caught when proposing rather than when verifying.
func checkVerifyDetails(details map[string]any) error {
	for _, k := range []string{detailVerifyTable, detailReplaces, detailVerifyWarehouse} {
		v, ok := details[k]
		if !ok {
			continue
		}
		s, isString := v.(string)
		if !isString || strings.TrimSpace(s) == "" {
			return fmt.Errorf("details.%s must be a non-empty string", k)
		}
	}
	if v, ok := details[detailVerifyTable].(string); ok {
		if _, err := warehouse.ParseTableName(v); err != nil {
			return fmt.Errorf("details.%s: %w", detailVerifyTable, err)
		}
	}
	if _, ok := details[detailReplaces]; ok {
		if _, ok := details[detailVerifyTable]; !ok {
			return fmt.Errorf("details.%s names the table replaced; give the replacement in details.%s too", detailReplaces, detailVerifyTable)
		}
	}
	return nil
}

// involvedOwners are who the incident's requests copy, by approvals' rule:
// the first owners of the domains of its assets, its cited cause and extra.
func (h *handlers) involvedOwners(inc *incidents.Incident, extra []string) []string {
	return approvals.InvolvedOwners(h.d.Config, append(inc.InvolvedAssets(), extra...))
}
