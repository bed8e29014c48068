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
	register("approvals show", "ID [--json]", "show one proposal and who may decide it", approvalsShow)
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
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", p.ID, p.State, p.Domain, p.Kind, p.Approver, stamp(p.ExpiresAt), p.What, p.Action.Summary())
	}
	return tw.Flush()
}

func approvalsShow(ctx context.Context, e *env, args []string) error {
	fs := e.flags("approvals show")
	asJSON := fs.Bool("json", false, "print JSON")
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
	if *asJSON {
		return writeJSON(e.stdout, p)
	}
	printProposal(e.stdout, e, p)
	return nil
}

func printProposal(w io.Writer, e *env, p *approvals.Proposal) {
	cfg := e.cfg
	fmt.Fprintf(w, "%s  %s  [%s]\n", p.ID, p.What, p.State)
	row := func(k, v string) {
		if v != "" {
			fmt.Fprintf(w, "  %-13s %s\n", k+":", v)
		}
	}
	row("Why", p.Why)
	row("Action", fmt.Sprintf("%s (%s class) in domain %s", p.Kind, p.Class, p.Domain))
	row("Targets", strings.Join(p.Targets, ", "))
	row("Blast radius", strings.Join(p.Scope, ", "))
	row("Undo", p.Undo)
	row("Incident", p.IncidentID)
	row("Proposed", fmt.Sprintf("by %s at %s", p.Proposer, stamp(p.CreatedAt)))
	row("Approver", approvals.PersonLabel(cfg, p.Approver)+"  (order: "+strings.Join(p.ApproverOrder, " → ")+")")
	row("Copied", strings.Join(p.Copied, ", "))
	if p.State.Open() {
		row("Expires", stamp(p.ExpiresAt)+" (then it escalates; it is never granted by default)")
		row("May decide", strings.Join(approvals.MayDecide(*p), " or "))
	}
	if d := p.Decision; d != nil {
		row("Decision", fmt.Sprintf("%s by %s via %s at %s", d.Verdict, approvals.PersonLabel(cfg, d.PersonID), d.Channel, stamp(d.At)))
		row("Reason", d.Reason)
	}
	fmt.Fprint(w, approvals.ActionText(p.Action, "  "))
	if len(p.Details) > 0 {
		raw, _ := json.Marshal(p.Details)
		row("Notes", string(raw)+" (notes only: they allow nothing)")
	}
	row("Receipt", "dw receipt show "+p.ReceiptID)
}

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
