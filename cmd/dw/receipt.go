package main

import (
	"context"
	"fmt"

	"github.com/dataworkers/dw/internal/approvals"
)

func init() {
	register("receipt show", "ID [--json]", "print a receipt (incident, proposal or org) as Markdown or JSON", receiptShow)
	register("receipt verify", "[ID] [--json] [--anchor dw1:SEQ:MAC]", "check receipts, proposals, decisions and steps for edited or removed records", receiptVerify)
	register("receipt anchor", "", "print the head of the receipt chain, to post outside the store", receiptAnchor)
}

func receiptShow(ctx context.Context, e *env, args []string) error {
	fs := e.flags("receipt show")
	asJSON := fs.Bool("json", false, "print JSON")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return errUsage
	}
	if _, err := e.service(ctx); err != nil {
		return err
	}
	doc, err := approvals.Receipt(ctx, e.db, pos[0])
	if err != nil {
		return err
	}
	if *asJSON {
		return writeJSON(e.stdout, doc)
	}
	fmt.Fprint(e.stdout, approvals.RenderMarkdown(doc))
	return nil
}

func receiptVerify(ctx context.Context, e *env, args []string) error {
	fs := e.flags("receipt verify")
	asJSON := fs.Bool("json", false, "print JSON")
	anchor := fs.String("anchor", "", "a head printed earlier by dw receipt anchor: check the chain still holds it")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 1 {
		return errUsage
	}
	if _, err := e.service(ctx); err != nil {
		return err
	}
	id := ""
	if len(pos) == 1 {
		if id, err = approvals.ResolveReceiptID(ctx, e.db, pos[0]); err != nil {
			return err
		}
	}
	rep, err := approvals.Audit(ctx, e.db, id, *anchor)
	if err != nil {
		return err
	}
	if *asJSON {
		if err := writeJSON(e.stdout, rep); err != nil {
			return err
		}
	} else {
		printAudit(e, rep)
	}
	switch rep.Status {
	case approvals.StatusTampered:
		return fmt.Errorf("verification failed: the store was changed outside Data Workers (see above)")
	case approvals.StatusUnauthenticated:
		return fmt.Errorf("nothing was found edited, but some records were written before keys existed and cannot be proven")
	}
	return nil
}

func printAudit(e *env, rep *approvals.AuditReport) {
	if len(rep.Receipts) == 0 {
		fmt.Fprintln(e.stdout, "The store holds no receipts yet.")
	}
	for _, v := range rep.Receipts {
		switch v.Status {
		case approvals.StatusOK:
			fmt.Fprintf(e.stdout, "ok        %s  %d entries, head %s\n", v.ReceiptID, v.Entries, short(v.Head))
		case approvals.StatusUnauthenticated:
			fmt.Fprintf(e.stdout, "UNAUTHENTICATED  %s  %d entries, %d written before keys (plain SHA-256: anyone could have rewritten them)\n", v.ReceiptID, v.Entries, v.Unauthenticated)
		default:
			fmt.Fprintf(e.stdout, "TAMPERED  %s  %d entries\n", v.ReceiptID, v.Entries)
			for _, p := range v.Problems {
				fmt.Fprintf(e.stdout, "          - %s\n", p)
			}
		}
	}
	r := rep.Records
	if len(r.Problems) == 0 {
		fmt.Fprintf(e.stdout, "ok        records  %d proposals, %d decisions, %d steps\n", r.Proposals, r.Decisions, r.Steps)
	} else {
		fmt.Fprintf(e.stdout, "TAMPERED  records  %d proposals, %d decisions, %d steps\n", r.Proposals, r.Decisions, r.Steps)
		for _, p := range r.Problems {
			fmt.Fprintf(e.stdout, "          - %s\n", p)
		}
	}
	for _, u := range r.Unauthenticated {
		fmt.Fprintf(e.stdout, "          unauthenticated: %s\n", u)
	}
	if rep.Global.OK {
		fmt.Fprintf(e.stdout, "ok        global chain  %d keyed entries, head %s\n", rep.Global.Entries, rep.Global.Head)
	} else {
		fmt.Fprintf(e.stdout, "TAMPERED  global chain  %d keyed entries\n", rep.Global.Entries)
		for _, p := range rep.Global.Problems {
			fmt.Fprintf(e.stdout, "          - %s\n", p)
		}
	}
	if a := rep.Anchor; a != nil {
		if a.OK {
			fmt.Fprintf(e.stdout, "ok        anchor  %s is still in the chain\n", a.Anchor)
		} else {
			fmt.Fprintf(e.stdout, "TAMPERED  anchor  %s\n          - %s\n", a.Anchor, a.Problem)
		}
	}
	fmt.Fprintf(e.stdout, "Key: %s. Verify proves records against that key; it cannot see what was never written, and a tail removed together with its heads shows against the highest head this machine has seen (receipt.anchor beside the key) or a posted anchor (dw receipt anchor).\n", rep.KeyFrom)
}

// receiptAnchor prints the head of the global chain, to be posted where
// the store's users cannot edit it (a Slack channel, a ticket).
func receiptAnchor(ctx context.Context, e *env, args []string) error {
	fs := e.flags("receipt anchor")
	if pos, err := parseFlags(fs, args); err != nil {
		return err
	} else if len(pos) > 0 {
		return errUsage
	}
	if _, err := e.service(ctx); err != nil {
		return err
	}
	a, err := approvals.CurrentAnchor(ctx, e.db)
	if err != nil {
		return err
	}
	fmt.Fprintln(e.stdout, a.String())
	fmt.Fprintf(e.stderr, "Post this line where the store's users cannot edit it (Slack, a ticket). Later, dw receipt verify --anchor %s proves no entry up to %d was removed or rewritten.\n", a.String(), a.Seq)
	return nil
}

func short(h string) string {
	if len(h) > 16 {
		return h[:16]
	}
	return h
}
