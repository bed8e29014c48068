package main

import (
	"context"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/dataworkers/dw/internal/approvals"
)

func init() {
	register("approvers show", "[DOMAIN] [--json]", "show the store admin and each domain's recorded approvers", approversShow)
	register("approvers pin", "DOMAIN --reason …", "record a domain's approvers from this config; the store admin only, recorded", approversPin)
}

// approversView is what dw approvers show prints.
type approversView struct {
	Admin     approvals.StoreAdmin        `json:"admin"`
	Approvers []approvals.ApproversRecord `json:"approvers"`
}

func approversShow(ctx context.Context, e *env, args []string) error {
	fs := e.flags("approvers show")
	asJSON := fs.Bool("json", false, "print JSON")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 1 {
		return errUsage
	}
	domain := ""
	if len(pos) == 1 {
		domain = pos[0]
	}
	svc, err := e.service(ctx)
	if err != nil {
		return err
	}
	var v approversView
	if v.Admin, err = svc.StoreAdmin(ctx); err != nil {
		return err
	}
	if v.Approvers, err = svc.DomainRecords(ctx, domain); err != nil {
		return err
	}
	if v.Approvers == nil {
		v.Approvers = []approvals.ApproversRecord{}
	}
	if *asJSON {
		return writeJSON(e.stdout, v)
	}
	rec := "recorded in org receipt entry " + fmt.Sprint(v.Admin.Seq)
	if !v.Admin.Recorded {
		rec = "not yet recorded; recorded with the admin's first act"
	}
	fmt.Fprintf(e.stdout, "Store admin: %s, %s (%s).\n", v.Admin, v.Admin.How, rec)
	if len(v.Approvers) == 0 {
		fmt.Fprintln(e.stdout, "No approvers are recorded: they are recorded with a domain's first proposal, or by the store admin with dw approvers pin DOMAIN --reason …")
		return nil
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "DOMAIN\tCLASS\tAPPROVERS\tRECORDED")
	for _, r := range v.Approvers {
		var who []string
		for _, a := range r.Approvers {
			who = append(who, fmt.Sprintf("%s (os: %s)", a.ID, strings.Join(a.OSUsers, ", ")))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\tby %s at %s (org entry %d)\n", r.Domain, r.Class, strings.Join(who, "; "), r.By, stamp(r.At), r.Seq)
	}
	return tw.Flush()
}

func approversPin(ctx context.Context, e *env, args []string) error {
	act, err := e.governanceAct(ctx, "approvers pin", 1, args)
	if err != nil {
		return err
	}
	svc, by, pos, reason := act.svc, act.by, act.pos, act.reason
	recs, err := svc.PinDomain(ctx, pos[0], by, reason)
	if err != nil {
		return err
	}
	if len(recs) == 0 {
		fmt.Fprintf(e.stdout, "Domain %s's recorded approvers already match this config; nothing was recorded.\n", pos[0])
		return nil
	}
	for _, r := range recs {
		var ids []string
		for _, a := range r.Approvers {
			ids = append(ids, a.ID)
		}
		fmt.Fprintf(e.stdout, "Domain %s (%s) approvers recorded: %s. Recorded in receipt %s, entry %d.\n",
			r.Domain, r.Class, strings.Join(ids, ", "), approvals.OrgReceiptID, r.Seq)
	}
	return nil
}
