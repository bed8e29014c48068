package incidents

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"reflect"
	"strings"
	"time"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/dataworkers/dw/internal/approvals"
	"github.com/dataworkers/dw/internal/compat"
	"github.com/dataworkers/dw/internal/incidents"
	"github.com/dataworkers/dw/internal/mcpserver"
	"github.com/dataworkers/dw/internal/remediate"
)

// ProposalSpec is one remediation to put to its approver.
type ProposalSpec struct {
	Kind       string         `json:"kind" jsonschema:"hold (pause a downstream job or sync), diff (a reviewed code or config change), delete_with_undo, replay (reprocess from offsets or a savepoint), schema_version (register a schema version), rerun, or lineage_event (post one OpenLineage run event to openlineage.url)"`
	What       string         `json:"what" jsonschema:"the change in one line, as the approver will read it, e.g. Pause sync_metered_usage_to_stripe until egress is verified"`
	Why        string         `json:"why,omitempty" jsonschema:"why this action, in the approver's terms; the ranked cause it addresses is added"`
	Targets    []string       `json:"targets,omitempty" jsonschema:"asset ids the action acts on, e.g. airflow://dag/sync_metered_usage_to_stripe; for schema_version schema://<subject>. Required, except for lineage_event: openlineage://<job namespace>/<job name>, the default when left out; at most 100"`
	Scope      []string       `json:"scope,omitempty" jsonschema:"assets and consumers it touches (its blast radius); default the incident's assets; at most 1000"`
	Undo       string         `json:"undo" jsonschema:"how to reverse it, concretely: unpause the DAG, revert the diff, point the dbt source back to usage.usage_hourly"`
	CauseRank  int            `json:"cause_rank,omitempty" jsonschema:"which ranked cause it addresses; default 1"`
	Run        *RunAction     `json:"run,omitempty" jsonschema:"for a rerun or replay that dw-connectors starts on an orchestrator: exactly the run the approval allows (system, target, every param). The approver sees every field, and no other run, target, location or param can be dispatched under it"`
	Details    map[string]any `json:"details,omitempty" jsonschema:"notes for the person carrying it out (savepoint, offsets, diff); verify_table names a replacement table remediate checks instead of the symptomatic one, replaces which symptomatic table it replaces, verify_warehouse the warehouse. Details never decide what a tool may run: bind a run with run"`
	Schema     string         `json:"schema,omitempty" jsonschema:"for schema_version: the schema text to register; its canonical SHA-256 is bound into the proposal so only this schema can be registered under it"`
	SchemaType string         `json:"schema_type,omitempty" jsonschema:"for schema_version: AVRO (default), JSON or PROTOBUF"`
	// LineageEvent is the one event a lineage_event approval lets
	// emit_lineage_event post.
	LineageEvent map[string]any `json:"lineage_event,omitempty" jsonschema:"for lineage_event: the OpenLineage RunEvent to post, exactly as emit_lineage_event (dw-connectors) will be given it. Its canonical SHA-256, job, run, datasets and the endpoint are bound and shown to the approver, so no other event can be posted under the approval"`
	// Replaces is bound into the sealed proposal (remediate.Bind).
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
	Details       map[string]any        `json:"details,omitempty" jsonschema:"notes for people; they never decide what runs. A lineage event is named by its hash, job, run and counts"`
	HowToDecide   string                `json:"how_to_decide" jsonschema:"how the approver records a decision"`
	Omitted       []string              `json:"omitted,omitempty" jsonschema:"what this answer shortens or leaves out; dw approvals show <id> --json has all of it"`
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
		mcpserver.Enum(item, "kind", incidents.ProposalKinds...)
		mcpserver.Enum(item, "schema_type", compat.Kinds...)
		mcpserver.Items(s, "proposals", 1, incidents.MaxRemediations)
		mcpserver.Items(s, "proposals.targets", 0, approvals.MaxTargets)
		mcpserver.Items(s, "proposals.scope", 0, approvals.MaxScope)
		mcpserver.Range(s, "proposals.cause_rank", 0, incidents.DefaultMaxCauses)
	}),
}

func (h *handlers) propose(ctx context.Context, in ProposeIn) (*ProposeOut, string, error) {
	// Bounded before the store is opened.
	if len(in.Proposals) > incidents.MaxRemediations {
		return nil, "", fmt.Errorf("%d proposals in one call; at most %d", len(in.Proposals), incidents.MaxRemediations)
	}
	e, err := h.env(ctx)
	if err != nil {
		return nil, "", err
	}
	p := remediate.ProposeParams{IncidentID: in.Incident, Proposals: make([]remediate.ProposalSpec, len(in.Proposals))}
	for i, spec := range in.Proposals {
		p.Proposals[i] = spec.domain()
	}
	res, err := remediate.Propose(ctx, h.remediateEnv(e), e.graph, p)
	if err != nil {
		return nil, "", err
	}
	out := &ProposeOut{Incident: res.Incident.ID, Status: string(res.Incident.Status), ReceiptID: res.Incident.ID, Proposals: []Proposed{}}
	// The answer is bounded whatever was proposed (details alone may be a
	// megabyte, a lineage event naming thousands of datasets): each
	// proposal gets an equal share of answerBudget.
	share := answerBudget / max(1, len(res.Proposals))
	for _, p := range res.Proposals {
		out.Proposals = append(out.Proposals, h.proposed(p, share))
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s is proposed: %d proposal(s) sent; nothing changes until a person approves.", out.Incident, len(out.Proposals))
	for _, p := range out.Proposals {
		fmt.Fprintf(&b, "\n- %s %s (%s): approver %s", p.ID, approvals.Line(p.What), p.Kind, p.ApproverName)
		if len(p.Copied) > 0 {
			fmt.Fprintf(&b, ", copied %s", strings.Join(p.Copied, ", "))
		}
		fmt.Fprintf(&b, "; expires %s. %s.", p.ExpiresAt.UTC().Format("2006-01-02 15:04 UTC"), p.HowToDecide)
	}
	b.WriteString("\nAfter the owners carry out the approved steps, call remediate.")
	return out, b.String(), nil
}

// domain is the proposal as remediate.Propose binds it.
func (spec ProposalSpec) domain() remediate.ProposalSpec {
	d := remediate.ProposalSpec{Kind: spec.Kind, What: spec.What, Why: spec.Why, Targets: spec.Targets, Scope: spec.Scope,
		Undo: spec.Undo, CauseRank: spec.CauseRank, Details: spec.Details, Schema: spec.Schema, SchemaType: spec.SchemaType,
		LineageEvent: spec.LineageEvent, Replaces: spec.Replaces}
	if r := spec.Run; r != nil {
		d.Run = &remediate.RunSpec{System: r.System, Target: r.Target, Params: r.Params}
	}
	return d
}

// answerBudget bounds the JSON of all proposals in propose_remediation's
// answer; with the text summary the answer stays well under 80,000
// characters.
const answerBudget = 40000

// proposed is one proposal as the answer shows it, in at most about share
// characters of JSON: free text clipped, lists cut, notes summarized
// (approvals.NotesSummary), and, when that is still too long, only what
// names the proposal and how it is decided. Omitted says what was cut.
func (h *handlers) proposed(p *approvals.Proposal, share int) Proposed {
	var omitted []string
	text := func(name, s string, n int) string {
		if r := []rune(s); len(r) > n {
			omitted = append(omitted, fmt.Sprintf("%s: %d of %d characters shown", name, n-1, len(r)))
			return string(r[:n-1]) + "…"
		}
		return s
	}
	items := func(name string, list []string, n int) []string {
		out, used := []string{}, 0
		for i, v := range list {
			if used += len(v) + 3; used > n {
				omitted = append(omitted, fmt.Sprintf("%s: %d of %d shown", name, i, len(list)))
				break
			}
			out = append(out, v)
		}
		return out
	}
	textCap := min(max(share/10, 120), 2000)
	out := Proposed{
		ID: p.ID, Kind: p.Kind, Class: string(p.Class), Domain: p.Domain, What: text("what", p.What, textCap), Why: text("why", p.Why, textCap),
		Targets: items("targets", p.Targets, share/8), Scope: items("scope", p.Scope, share/8), Undo: text("undo", p.Undo, textCap),
		Approver: p.Approver, ApproverName: h.personLabel(p.Approver), ApproverOrder: p.ApproverOrder,
		Copied: p.Copied, ExpiresAt: p.ExpiresAt, State: string(p.State), Action: p.Action,
		Details: approvals.NotesSummary(p.ID, p.Details, share/4), HowToDecide: h.decideHow(p),
	}
	if out.Copied == nil {
		out.Copied = []string{}
	}
	if len(out.Details) < len(p.Details) || (len(p.Details) > 0 && !reflect.DeepEqual(out.Details, p.Details)) {
		omitted = append(omitted, "details: summarized (a lineage event by its hash, job, run and counts; long notes by their size)")
	}
	out.Omitted = omitted
	if raw, _ := json.Marshal(out); len(raw) <= share {
		return out
	}
	// Still too long (long ids, a long action target): name the proposal
	// and how it is decided, and point at the rest.
	return Proposed{
		ID: p.ID, Kind: p.Kind, Class: string(p.Class), Domain: p.Domain, What: text("what", p.What, 120), Targets: []string{}, Scope: []string{},
		Approver: p.Approver, ApproverName: h.personLabel(p.Approver), ApproverOrder: p.ApproverOrder, Copied: out.Copied,
		ExpiresAt: p.ExpiresAt, State: string(p.State), HowToDecide: h.decideHow(p),
		Omitted: []string{"why, targets, scope, undo, action and details: too long for this answer; read them with dw approvals show " + p.ID + " --json"},
	}
}

// involvedOwners are who the incident's requests copy, by approvals' rule:
// the first owners of the domains of its assets, its cited cause and extra.
func (h *handlers) involvedOwners(ctx context.Context, e *env, inc *incidents.Incident, extra []string) []string {
	owners, err := e.apv.InvolvedOwners(ctx, append(inc.InvolvedAssets(), extra...))
	if err != nil {
		slog.Warn("the owners of an incident's domains could not be read", "incident", inc.ID, "err", err)
	}
	return owners
}
