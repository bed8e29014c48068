package main

import (
	"context"
	"fmt"

	"github.com/dataworkers/dw/internal/approvals"
)

func init() {
	register("receipt show", "ID [--json]", "print a receipt (incident, proposal or org) as Markdown or JSON", receiptShow)
	register("receipt verify", "[ID] [--json]", "check receipts' hash chains for edited or removed entries", receiptVerify)
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
	var results []approvals.Verification
	if len(pos) == 1 {
		id, err := approvals.ResolveReceiptID(ctx, e.db, pos[0])
		if err != nil {
			return err
		}
		v, err := approvals.Verify(ctx, e.db, id)
		if err != nil {
			return err
		}
		results = append(results, v)
	} else if results, err = approvals.VerifyAll(ctx, e.db); err != nil {
		return err
	}
	bad := 0
	for _, v := range results {
		if !v.OK {
			bad++
		}
	}
	if *asJSON {
		if err := writeJSON(e.stdout, results); err != nil {
			return err
		}
	} else {
		if len(results) == 0 {
			fmt.Fprintln(e.stdout, "The store holds no receipts yet.")
		}
		for _, v := range results {
			if v.OK {
				fmt.Fprintf(e.stdout, "ok        %s  %d entries, head %s\n", v.ReceiptID, v.Entries, short(v.Head))
				continue
			}
			fmt.Fprintf(e.stdout, "TAMPERED  %s  %d entries\n", v.ReceiptID, v.Entries)
			for _, p := range v.Problems {
				fmt.Fprintf(e.stdout, "          - %s\n", p)
			}
		}
	}
	if bad > 0 {
		return fmt.Errorf("%d of %d receipts failed verification", bad, len(results))
	}
	return nil
}

func short(h string) string {
	if len(h) > 16 {
		return h[:16]
	}
	return h
}
