package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/dataworkers/dw/internal/approvals"
	"github.com/dataworkers/dw/internal/notify"
)

func init() {
	register("approvals list", "[--all] [--state S,…] [--incident ID] [--json]", "list proposals (open ones by default)", approvalsList)
	register("approvals show", "ID [--all] [--json]", "show one proposal and who may decide it (--all: every dataset a lineage event names)", approvalsShow)
	register("approvals sweep", "[--post]", "apply due expiries and escalations now (--post also posts to Slack)", approvalsSweep)
	register("approvals listen", "[--every 30s]", "run the Slack Socket Mode listener: post requests, receive clicks", approvalsListen)
}

func approvalsList(ctx context.Context, e *env, args []string) error {
	fs := e.flags("approvals list")
	all := fs.Bool("all", false, "include decided and expired proposals")
	states := fs.String("state", "", "comma-separated states to keep (pending, escalated, approved, rejected, expired, executed, undone)")
	incident := fs.String("incident", "", "keep proposals of this incident")
	asJSON := fs.Bool("json", false, "print JSON")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return errUsage
	}
	svc, err := e.service(ctx)
	if err != nil {
		return err
	}
	f := approvals.Filter{IncidentID: *incident}
	switch {
	case *states != "":
		for _, s := range strings.Split(*states, ",") {
			f.States = append(f.States, approvals.State(strings.TrimSpace(s)))
		}
	case !*all:
		f.States = []approvals.State{approvals.StatePending, approvals.StateEscalated}
	}
	ps, err := svc.List(ctx, f)
	if err != nil {
		return err
	}
	if *asJSON {
		return writeJSON(e.stdout, ps)
	}
	if len(ps) == 0 {
		fmt.Fprintln(e.stdout, "No proposals match.")
		return nil
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', 0)
	// RUNS is every field the approval binds: what a decision allows.
	fmt.Fprintln(tw, "ID\tSTATE\tDOMAIN\tKIND\tAPPROVER\tEXPIRES\tWHAT\tRUNS")
	for _, p := range ps {
		// Line escapes tabs and newlines too, so no text moves a column
		// or starts a row of its own.
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", p.ID, p.State, p.Domain, p.Kind, p.Approver, stamp(p.ExpiresAt), approvals.Line(p.What), p.Action.Summary())
	}
	return tw.Flush()
}

func approvalsShow(ctx context.Context, e *env, args []string) error {
	fs := e.flags("approvals show")
	asJSON := fs.Bool("json", false, "print JSON")
	all := fs.Bool("all", false, "also list every dataset the proposal's lineage event names (a request lists at most 8 of each side)")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return errUsage
	}
	svc, err := e.service(ctx)
	if err != nil {
		return err
	}
	p, err := svc.Get(ctx, pos[0])
	if err != nil {
		return err
	}
	var ds *approvals.LineageDatasets
	if *all {
		if ds, err = p.LineageDatasets(); err != nil {
			return err
		}
	}
	if *asJSON {
		if !*all {
			return writeJSON(e.stdout, p)
		}
		return writeJSON(e.stdout, struct {
			*approvals.Proposal
			Datasets *approvals.LineageDatasets `json:"datasets"`
		}{p, ds})
	}
	printProposal(e.stdout, e, p)
	if *all {
		printDatasets(e.stdout, p, ds)
	}
	return nil
}

// printDatasets lists every dataset a lineage_event proposal's event
// names, with the digest its action binds them by.
func printDatasets(w io.Writer, p *approvals.Proposal, ds *approvals.LineageDatasets) {
	if ds == nil {
		fmt.Fprintf(w, "  Datasets:     none: %s posts no lineage event\n", p.ID)
		return
	}
	fmt.Fprintf(w, "  Datasets:     all %d the event names (datasets_sha256 %s)\n", ds.Total(), ds.SHA256)
	for _, side := range []struct {
		name string
		list []string
	}{{"inputs", ds.Inputs}, {"outputs", ds.Outputs}} {
		fmt.Fprintf(w, "    %s (%d):\n", side.name, len(side.list))
		for _, n := range side.list {
			fmt.Fprintf(w, "      %s\n", approvals.Line(n))
		}
	}
}

func printProposal(w io.Writer, e *env, p *approvals.Proposal) {
	cfg := e.cfg
	fmt.Fprintf(w, "%s  %s  [%s]\n", p.ID, approvals.Line(p.What), p.State)
	// row shows one label and its value; free text reaches it through
	// approvals.Line or text, so a value's own lines are marked as its
	// continuation and never pass for a label.
	row := func(k, v string) {
		if v != "" {
			fmt.Fprintf(w, "  %-13s %s\n", k+":", v)
		}
	}
	text := func(s string) string { return approvals.Text(s, valueIndent) }
	row("Why", text(p.Why))
	row("Action", fmt.Sprintf("%s (%s class) in domain %s", p.Kind, p.Class, p.Domain))
	row("Targets", approvals.Line(strings.Join(p.Targets, ", ")))
	row("Blast radius", approvals.Line(strings.Join(p.Scope, ", ")))
	row("Undo", text(p.Undo))
	row("Incident", approvals.Line(p.IncidentID))
	row("Proposed", fmt.Sprintf("by %s at %s", p.Proposer, stamp(p.CreatedAt)))
	row("Approver", approvals.PersonLabel(cfg, p.Approver)+"  (order: "+strings.Join(p.ApproverOrder, " → ")+")")
	row("Copied", strings.Join(p.Copied, ", "))
	if p.State.Open() {
		row("Expires", stamp(p.ExpiresAt)+" (then it escalates; it is never granted by default)")
		row("May decide", strings.Join(approvals.MayDecide(*p), " or "))
	}
	if d := p.Decision; d != nil {
		row("Decision", fmt.Sprintf("%s by %s via %s at %s", d.Verdict, approvals.PersonLabel(cfg, d.PersonID), d.Channel, stamp(d.At)))
		row("Reason", text(d.Reason))
	}
	fmt.Fprint(w, approvals.ActionText(p.Action, "  "))
	if len(p.Details) > 0 {
		row("Notes", approvals.Line(approvals.NotesText(p.ID, p.Details, maxNotes))+" (notes only: they allow nothing)")
	}
	row("Receipt", "dw receipt show "+p.ReceiptID)
}

// valueIndent lines a row's continuation up under its value (two spaces,
// the 13-character label column and a space).
const valueIndent = "                "

// maxNotes bounds the Notes line of dw approvals show: details hold up to
// a megabyte (a whole lineage event), which --json prints in full.
const maxNotes = 2000

func approvalsSweep(ctx context.Context, e *env, args []string) error {
	fs := e.flags("approvals sweep")
	post := fs.Bool("post", false, "also post new requests to Slack and update closed ones")
	if pos, err := parseFlags(fs, args); err != nil {
		return err
	} else if len(pos) > 0 {
		return errUsage
	}
	svc, err := e.service(ctx)
	if err != nil {
		return err
	}
	esc, err := svc.Sweep(ctx)
	if err != nil {
		return err
	}
	for _, x := range esc {
		if x.Expired {
			fmt.Fprintf(e.stdout, "%s expired: no answer from %s; nothing was granted\n", x.ProposalID, x.From)
		} else {
			fmt.Fprintf(e.stdout, "%s escalated from %s to %s\n", x.ProposalID, x.From, x.To)
		}
	}
	if len(esc) == 0 {
		fmt.Fprintln(e.stdout, "Nothing was due.")
	}
	if *post {
		sl, err := notify.New(e.cfg, svc, e.log)
		if err != nil {
			return err
		}
		res, err := sl.Flush(ctx)
		fmt.Fprintf(e.stdout, "Slack: %d posted, %d updated\n", res.Posted, res.Refreshed)
		return err
	}
	return nil
}

func approvalsListen(ctx context.Context, e *env, args []string) error {
	fs := e.flags("approvals listen")
	every := fs.Duration("every", 30*time.Second, "how often to sweep expiries and post waiting requests")
	if pos, err := parseFlags(fs, args); err != nil {
		return err
	} else if len(pos) > 0 {
		return errUsage
	}
	svc, err := e.service(ctx)
	if err != nil {
		return err
	}
	sl, err := notify.New(e.cfg, svc, e.log)
	if err != nil {
		return err
	}
	e.log.Info("approvals listener started", "store", e.db.Source(), "every", every.String())
	return sl.Listen(ctx, *every)
}

// refreshSlack updates posted Slack requests after a terminal decision,
// when Slack is configured; a failure is only a warning, the decision
// stands.
func refreshSlack(ctx context.Context, e *env, svc *approvals.Service) {
	if e.cfg == nil || e.cfg.Slack == nil {
		return
	}
	sl, err := notify.New(e.cfg, svc, e.log)
	if err != nil {
		fmt.Fprintf(e.stderr, "note: Slack messages not updated: %v\n", err)
		return
	}
	if _, err := sl.Flush(ctx); err != nil {
		fmt.Fprintf(e.stderr, "note: Slack messages not updated: %v\n", err)
	}
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func stamp(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format("2006-01-02 15:04 UTC")
}
