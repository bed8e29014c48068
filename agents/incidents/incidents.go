package incidents

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/dataworkers/dw/internal/approvals"
	"github.com/dataworkers/dw/internal/incidents"
	"github.com/dataworkers/dw/internal/lineage"
	"github.com/dataworkers/dw/internal/mcpserver"
	"github.com/dataworkers/dw/internal/page"
)

// ListIncidentsOut lists incidents.
type ListIncidentsOut struct {
	Incidents []incidents.IncidentSummary `json:"incidents" jsonschema:"this page of incidents, newest first"`
	page.Info
}

var listIncidentsTool = mcpserver.Tool{
	Name:        "list_incidents",
	Title:       "List incidents",
	Description: "Lists incidents newest first with their status (open, diagnosed, proposed, approved, fixing, verified, escalated, closed), onset and top-ranked cause; optionally only those in one status or with a symptom on one asset. Paged: limit (default 50, at most 500), next_cursor, total.",
	ReadOnly:    true,
	Destructive: false,
	Idempotent:  true,
	OpenWorld:   false,
	InputSchema: mcpserver.InputSchema[incidents.IncidentFilter](func(s *jsonschema.Schema) {
		mcpserver.Enum(s, "status", incidents.Statuses...)
	}),
}

func (h *handlers) listIncidents(ctx context.Context, in incidents.IncidentFilter) (*ListIncidentsOut, string, error) {
	e, err := h.env(ctx)
	if err != nil {
		return nil, "", err
	}
	list, info, err := e.svc.ListIncidents(ctx, in)
	if err != nil {
		return nil, "", err
	}
	out := &ListIncidentsOut{Incidents: list, Info: info}
	if info.Total == 0 {
		return out, "No incidents match.", nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d of %d incident(s):", len(list), info.Total)
	for i, inc := range list {
		if i == 20 {
			fmt.Fprintf(&b, "\n… and %d more on this page", len(list)-20)
			break
		}
		fmt.Fprintf(&b, "\n- %s [%s] %s", inc.ID, inc.Status, inc.Title)
	}
	if info.NextCursor != "" {
		b.WriteString("\nMore incidents: pass next_cursor as cursor.")
	}
	return out, b.String(), nil
}

// IncidentIn names an incident.
type IncidentIn struct {
	Incident string `json:"incident" jsonschema:"incident id, e.g. INC-3"`
}

// ProposalState is where one of an incident's proposals stands.
type ProposalState struct {
	ID      string   `json:"id" jsonschema:"proposal id"`
	Kind    string   `json:"kind" jsonschema:"action kind"`
	What    string   `json:"what" jsonschema:"the change in one line"`
	Targets []string `json:"targets" jsonschema:"assets acted on: the first 5 (targets_total counts them all; dw approvals show <id> lists every one)"`
	// TargetsTotal counts every target when Targets lists the first.
	TargetsTotal int       `json:"targets_total,omitempty" jsonschema:"assets acted on, in all"`
	State        string    `json:"state" jsonschema:"pending, escalated, approved, rejected, expired, executed or undone"`
	Approver     string    `json:"approver" jsonschema:"person whose decision is awaited or was given"`
	Copied       []string  `json:"copied,omitempty" jsonschema:"people copied on the request"`
	ExpiresAt    time.Time `json:"expires_at" jsonschema:"when the current request expires and escalates (never grants)"`
	DecidedBy    string    `json:"decided_by,omitempty" jsonschema:"who decided, once decided"`
	Via          string    `json:"via,omitempty" jsonschema:"channel of the decision: slack, elicitation or terminal"`
	Reason       string    `json:"reason,omitempty" jsonschema:"the decider's reason, if given"`
}

// What an answer lists of an incident's proposals: an incident takes up
// to 20 proposals a call, each acting on up to 100 targets, and may be
// proposed for again after a failed verification.
const (
	listedProposals = 30
	listedTargets   = 5
)

func proposalState(p *approvals.Proposal) ProposalState {
	ps := ProposalState{ID: p.ID, Kind: p.Kind, What: p.What, Targets: p.Targets, State: string(p.State),
		Approver: p.Approver, Copied: p.Copied, ExpiresAt: p.ExpiresAt}
	if n := len(p.Targets); n > listedTargets {
		ps.Targets, ps.TargetsTotal = p.Targets[:listedTargets:listedTargets], n
	}
	if d := p.Decision; d != nil {
		ps.DecidedBy, ps.Via, ps.Reason = d.PersonID, string(d.Channel), d.Reason
	}
	return ps
}

// IncidentOut is an incident with what remediate will re-run and where its
// proposals stand.
type IncidentOut struct {
	Incident   incidents.Incident    `json:"incident" jsonschema:"the incident with symptoms, ranked causes and timeline"`
	Assertions []incidents.Assertion `json:"assertions" jsonschema:"what remediate re-runs to verify a fix: one per distinct symptom that fired"`
	Proposals  []ProposalState       `json:"proposals" jsonschema:"the incident's proposals and their decisions: the latest 30 (proposals_total counts them all)"`
	Next       string                `json:"next" jsonschema:"what to do next at this status"`
	// ProposalsTotal counts every proposal when Proposals lists the latest.
	ProposalsTotal int `json:"proposals_total,omitempty" jsonschema:"the incident's proposals, in all"`
	// The counts say how much get_incident left out of a long incident.
	SymptomsTotal     int `json:"symptoms_total,omitempty" jsonschema:"symptoms in all; when more than 20, incident.symptoms lists the first 10 (the onset) and the latest 10"`
	TimelineTotal     int `json:"timeline_total,omitempty" jsonschema:"timeline events in all; when more than 30, incident.timeline lists the first 5 (how it opened) and the latest 25"`
	MergedFromTotal   int `json:"merged_from_total,omitempty" jsonschema:"duplicates merged into the incident, in all; when more than 50, incident.merged_from lists the latest 50"`
	AssertionsOmitted int `json:"assertions_omitted,omitempty" jsonschema:"assertions left out of assertions (at most 50 are listed)"`
}

// Bounds on get_incident's answer: a metric that stays anomalous for days
// joins thousands of symptoms to one incident.
const (
	symptomsHead  = 10
	symptomsTail  = 10
	maxAssertions = 50
	// An incident re-diagnosed or re-verified for weeks keeps a status
	// change per run, and a feed that breaks daily can have hundreds of
	// duplicates merged into it.
	timelineHead  = 5
	timelineTail  = 25
	maxMergedFrom = 50
)

// bound shortens a long incident for the answer only; the incident in the
// store keeps every symptom, and diagnosis works on all of them.
func (o *IncidentOut) bound() {
	syms := o.Incident.Symptoms
	o.SymptomsTotal = len(syms)
	if len(syms) > symptomsHead+symptomsTail {
		o.Incident.Symptoms = append(slices.Clip(syms[:symptomsHead]), syms[len(syms)-symptomsTail:]...)
	}
	if n := len(o.Assertions); n > maxAssertions {
		o.Assertions, o.AssertionsOmitted = o.Assertions[:maxAssertions], n-maxAssertions
	}
	if tl := o.Incident.Timeline; len(tl) > timelineHead+timelineTail {
		o.TimelineTotal = len(tl)
		o.Incident.Timeline = append(slices.Clip(tl[:timelineHead]), tl[len(tl)-timelineTail:]...)
	}
	if mf := o.Incident.MergedFrom; len(mf) > maxMergedFrom {
		o.MergedFromTotal = len(mf)
		o.Incident.MergedFrom = mf[len(mf)-maxMergedFrom:]
	}
	o.Proposals, o.ProposalsTotal = latestProposals(o.Proposals)
}

// latestProposals is the latest listedProposals of an incident's
// proposals (oldest first) and how many there are, when that is more.
func latestProposals(ps []ProposalState) ([]ProposalState, int) {
	if n := len(ps); n > listedProposals {
		return ps[n-listedProposals:], n
	}
	return ps, 0
}

var getIncidentTool = mcpserver.Tool{
	Name:        "get_incident",
	Title:       "Show an incident",
	Description: "Shows an incident: status in its life (open → diagnosed → proposed → approved → fixing → verified → closed; escalated after a failed verification), symptoms, ranked causes with evidence, timeline, the assertions a fix must pass again, its proposals and their decisions, and what to do next.",
	ReadOnly:    true,
	Destructive: false,
	Idempotent:  true,
	OpenWorld:   false,
}

func (h *handlers) getIncident(ctx context.Context, in IncidentIn) (*IncidentOut, string, error) {
	e, err := h.env(ctx)
	if err != nil {
		return nil, "", err
	}
	out, err := h.incidentView(ctx, e, in.Incident)
	if err != nil {
		return nil, "", err
	}
	out.bound()
	inc := out.Incident
	var b strings.Builder
	fmt.Fprintf(&b, "%s [%s] %s\nOnset %s; %d symptom(s) on %s.", inc.ID, inc.Status, inc.Title,
		inc.Onset.UTC().Format("2006-01-02 15:04 UTC"), out.SymptomsTotal, strings.Join(inc.Assets, ", "))
	switch c := inc.CitedCause(); {
	case inc.Attributed != nil:
		fmt.Fprintf(&b, "\nCause named by %s: %s.", inc.Attributed.Actor, inc.Attributed.Change.Summary)
	case c != nil:
		fmt.Fprintf(&b, "\nTop cause (%.2f): %s.", c.Confidence, c.Change.Summary)
	case inc.Verdict == incidents.VerdictNone:
		fmt.Fprintf(&b, "\nNo credible cause among %d change(s) considered.", len(inc.Causes))
	}
	for _, p := range out.Proposals {
		fmt.Fprintf(&b, "\n- %s %s [%s] approver %s", p.ID, p.What, p.State, p.Approver)
	}
	fmt.Fprintf(&b, "\nNext: %s", out.Next)
	return out, b.String(), nil
}

func (h *handlers) incidentView(ctx context.Context, e *env, id string) (*IncidentOut, error) {
	v, err := e.svc.View(ctx, e.apv, id)
	if err != nil {
		return nil, err
	}
	out := &IncidentOut{Incident: *v.Incident, Assertions: v.Assertions, Proposals: make([]ProposalState, 0, len(v.Proposals)), Next: v.Next}
	for _, p := range v.Proposals {
		out.Proposals = append(out.Proposals, proposalState(p))
	}
	return out, nil
}

// DiagnoseIn asks for a diagnosis.
type DiagnoseIn struct {
	Incident      string `json:"incident" jsonschema:"incident id, e.g. INC-3"`
	LookbackHours int    `json:"lookback_hours,omitempty" jsonschema:"hours before the onset to consider changes from; default 72, at most 720"`
}

// BlastRadius is what the symptomatic data reaches downstream, from the
// catalog.
type BlastRadius = lineage.MergedBlast

// DiagnoseOut is the ranked diagnosis with the blast radius.
type DiagnoseOut struct {
	Diagnosis   incidents.Diagnosis `json:"diagnosis" jsonschema:"ranked candidate causes with evidence and confidence"`
	BlastRadius BlastRadius         `json:"blast_radius" jsonschema:"what the symptomatic data reaches downstream"`
}

var diagnoseTool = mcpserver.Tool{
	Name: "diagnose_incident",
	InputSchema: mcpserver.InputSchema[DiagnoseIn](func(s *jsonschema.Schema) {
		mcpserver.Range(s, "lookback_hours", 0, incidents.MaxLookbackHours)
	}),
	Title: "Rank an incident's causes",
	Description: "Ranks the recorded changes from lookback_hours before the onset to shortly after it as candidate causes, deterministically: lineage relation to the symptomatic assets (upstream, hops), time before the onset, whether a job on the path reads a field the change removed or retyped (column lineage, recorded SQL), how the kind of change fits the kind of symptom, and whether this feed broke the same way before. " +
		"Each cause has evidence a person can check and a confidence. The answer includes the blast radius from the catalog: everything downstream of the symptomatic assets, critical and scheduled first with owners and next runs. Moves the incident to diagnosed.",
	ReadOnly:    false,
	Destructive: false,
	Idempotent:  true,
	OpenWorld:   false,
}

func (h *handlers) diagnose(ctx context.Context, in DiagnoseIn) (*DiagnoseOut, string, error) {
	e, err := h.env(ctx)
	if err != nil {
		return nil, "", err
	}
	d, br, err := e.svc.DiagnoseWithBlastRadius(ctx, e.graph, incidents.DiagnoseParams{IncidentID: in.Incident, LookbackHours: in.LookbackHours})
	if err != nil {
		return nil, "", err
	}
	out := &DiagnoseOut{Diagnosis: *d, BlastRadius: *br}
	var b strings.Builder
	b.WriteString(d.Summary)
	if len(d.Causes) > 0 && d.Causes[0].Credible {
		for _, ev := range d.Causes[0].Evidence {
			fmt.Fprintf(&b, "\n- %s", ev)
		}
	}
	fmt.Fprintf(&b, "\n%s\nNext: propose_remediation %s.", br.Summary, d.IncidentID)
	return out, b.String(), nil
}

var historyTool = mcpserver.Tool{
	Name: "get_incident_history",
	InputSchema: mcpserver.InputSchema[incidents.HistoryParams](func(s *jsonschema.Schema) {
		mcpserver.Range(s, "hops", 0, incidents.MaxHistoryHops)
	}),
	Title:       "Earlier incidents on a feed",
	Description: "Lists earlier incidents on an asset or its feed (assets within hops up- or downstream in the lineage), newest first, with their top cause, time to detect and to resolve, and which kinds of cause recur on the same asset. Paged: limit (default 50, at most 500), next_cursor, total.",
	ReadOnly:    true,
	Destructive: false,
	Idempotent:  true,
	OpenWorld:   false,
}

func (h *handlers) history(ctx context.Context, in incidents.HistoryParams) (*incidents.HistoryResult, string, error) {
	e, err := h.env(ctx)
	if err != nil {
		return nil, "", err
	}
	res, err := e.svc.History(ctx, in)
	if err != nil {
		return nil, "", err
	}
	var b strings.Builder
	b.WriteString(res.Summary)
	for i, pi := range res.Incidents {
		if i == 10 {
			break
		}
		cause := "not diagnosed"
		if pi.TopCause != nil {
			cause = fmt.Sprintf("%s: %s", pi.TopCause.Kind, pi.TopCause.Summary)
		}
		fmt.Fprintf(&b, "\n- %s [%s] on %s (%s): %s; detected in %s, resolved in %s", pi.ID, pi.Status, pi.Asset, pi.Relation, cause, pi.TimeToDetect, pi.TimeToResolve)
	}
	return res, b.String(), nil
}

// CloseIn closes an incident.
type CloseIn struct {
	Incident string `json:"incident" jsonschema:"incident id, e.g. INC-3"`
	Note     string `json:"note,omitempty" jsonschema:"why; required to dismiss an incident that was never verified (e.g. a false alarm: the metric's definition changed)"`
	// DuplicateOf closes the incident as a duplicate: its symptoms join
	// the named incident and the close reason is "duplicate of …".
	DuplicateOf string `json:"duplicate_of,omitempty" jsonschema:"close as a duplicate of this incident (e.g. INC-3): its symptoms are merged into that one, and the close reason is duplicate, not dismissed"`
}

var closeIncidentTool = mcpserver.Tool{
	Name:        "close_incident",
	Title:       "Close an incident",
	Description: "Closes a verified incident, or dismisses an open or diagnosed one as a false alarm with a note saying why. With duplicate_of, closes an open or diagnosed incident as a duplicate of another: its symptoms join that incident and the close reason is duplicate. An incident with a fix in progress cannot be closed: verify it with remediate first.",
	ReadOnly:    false,
	Destructive: false,
	Idempotent:  false,
	OpenWorld:   false,
}

func (h *handlers) closeIncident(ctx context.Context, in CloseIn) (*IncidentOut, string, error) {
	e, err := h.env(ctx)
	if err != nil {
		return nil, "", err
	}
	if strings.TrimSpace(in.DuplicateOf) != "" {
		kept, err := e.svc.MergeIncidents(ctx, incidents.MergeParams{Into: in.DuplicateOf, From: in.Incident, Actor: Name, Note: in.Note})
		if err != nil {
			return nil, "", err
		}
		out, err := h.incidentView(ctx, e, in.Incident)
		if err != nil {
			return nil, "", err
		}
		out.bound()
		return out, fmt.Sprintf("%s closed as a duplicate of %s; its symptoms are merged there.", out.Incident.ID, kept.ID), nil
	}
	inc, err := e.svc.Transition(ctx, incidents.TransitionParams{IncidentID: in.Incident, To: string(incidents.StatusClosed), Actor: Name, Note: in.Note})
	if err != nil {
		return nil, "", err
	}
	how := "closed after its verified fix"
	if inc.VerifiedAt.IsZero() {
		how = "dismissed: " + strings.TrimSpace(in.Note)
	}
	// The answer is the incident as get_incident shows it, so a long one
	// stays bounded here too.
	out, err := h.incidentView(ctx, e, inc.ID)
	if err != nil {
		return nil, "", err
	}
	out.bound()
	return out, fmt.Sprintf("%s %s.", inc.ID, how), nil
}
