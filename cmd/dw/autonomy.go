package main

import (
	"context"
	"fmt"

	"github.com/dataworkers/dw/internal/approvals"
)

func init() {
	register("autonomy show", "[--json]", "show each domain's autonomy level", autonomyShow)
	register("autonomy set", "DOMAIN LEVEL --reason …", "set a domain's level (L0-L4); domain owners only, recorded", autonomySet)
	register("autonomy reset", "DOMAIN --reason …", "return a domain to its configured level (or clear a level stored for one not configured), recorded", autonomyReset)
}

func autonomyShow(ctx context.Context, e *env, args []string) error {
	fs := e.flags("autonomy show")
	asJSON := fs.Bool("json", false, "print JSON")
	if pos, err := parseFlags(fs, args); err != nil {
		return err
	} else if len(pos) > 0 {
		return errUsage
	}
	svc, err := e.service(ctx)
	if err != nil {
		return err
	}
	levels, err := svc.Levels(ctx)
	if err != nil {
		return err
	}
	if *asJSON {
		return writeJSON(e.stdout, levels)
	}
	if len(levels) == 0 {
		fmt.Fprintln(e.stdout, "No domains are configured.")
		return nil
	}
	return printLevels(e, levels)
}

func autonomySet(ctx context.Context, e *env, args []string) error {
	act, err := e.governanceAct(ctx, "autonomy set", 2, args)
	if err != nil {
		return err
	}
	svc, by, pos, reason := act.svc, act.by, act.pos, act.reason
	li, err := svc.SetAutonomy(ctx, pos[0], pos[1], by, reason)
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "Domain %s is now %s (%s), set by %s; its config says %s. Recorded in receipt %s.\n",
		li.Domain, li.Level, li.Name, li.SetBy, li.ConfigLevel, approvals.OrgReceiptID)
	return nil
}

func autonomyReset(ctx context.Context, e *env, args []string) error {
	act, err := e.governanceAct(ctx, "autonomy reset", 1, args)
	if err != nil {
		return err
	}
	svc, by, pos, reason := act.svc, act.by, act.pos, act.reason
	li, err := svc.ResetAutonomy(ctx, pos[0], by, reason)
	if err != nil {
		return err
	}
	if li.Source == "cleared" {
		fmt.Fprintf(e.stdout, "Domain %s is not in the config; the level the store held for it is cleared by %s. Recorded in receipt %s.\n", li.Domain, li.SetBy, approvals.OrgReceiptID)
		return nil
	}
	fmt.Fprintf(e.stdout, "Domain %s is back at its configured level %s (%s). Recorded in receipt %s.\n", li.Domain, li.Level, li.Name, approvals.OrgReceiptID)
	return nil
}

// governanceAct is what every governance change at the terminal starts
// with: its flags (a required --reason), exactly n arguments, the store's
// approvals service and the person the OS account is on record as.
type governanceAct struct {
	svc    *approvals.Service
	by     approvals.Decider
	pos    []string
	reason string
}

func (e *env) governanceAct(ctx context.Context, name string, n int, args []string) (governanceAct, error) {
	fs := e.flags(name)
	reason := fs.String("reason", "", "why; recorded in the org receipt (required)")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return governanceAct{}, err
	}
	if len(pos) != n {
		return governanceAct{}, errUsage
	}
	svc, err := e.service(ctx)
	if err != nil {
		return governanceAct{}, err
	}
	by, err := e.recordedPerson()
	if err != nil {
		return governanceAct{}, err
	}
	return governanceAct{svc: svc, by: by, pos: pos, reason: *reason}, nil
}
