package main

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/dataworkers/dw/internal/approvals"
)

func init() {
	register("approve", "ID [--reason …]", "approve a proposal you are the named approver of", func(ctx context.Context, e *env, args []string) error {
		return decide(ctx, e, args, approvals.VerdictApprove)
	})
	register("reject", "ID --reason …", "reject a proposal you are the named approver of", func(ctx context.Context, e *env, args []string) error {
		return decide(ctx, e, args, approvals.VerdictReject)
	})
}

// decide records a terminal decision. The person is the one the OS login
// running dw is mapped to in the config; nothing on the command line can
// name someone else.
func decide(ctx context.Context, e *env, args []string, v approvals.Verdict) error {
	fs := e.flags(string(v))
	reason := fs.String("reason", "", "why; recorded in the receipt (required to reject)")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return errUsage
	}
	if v == approvals.VerdictReject && strings.TrimSpace(*reason) == "" {
		return fmt.Errorf("--reason is required to reject: the proposer and the auditor need to know why")
	}
	svc, err := e.service(ctx)
	if err != nil {
		return err
	}
	by, err := approvals.OSUserDecider(e.cfg, approvals.ChannelTerminal, e.osUser)
	if err != nil {
		return err
	}
	if host, err := os.Hostname(); err == nil {
		by.Evidence["host"] = host
	}
	p, err := svc.Decide(ctx, pos[0], by, v, *reason)
	if err != nil {
		return err
	}
	verb := "Approved"
	if v == approvals.VerdictReject {
		verb = "Rejected"
	}
	fmt.Fprintf(e.stdout, "%s %s: %s\nRecorded as %s via terminal (OS user %s) in receipt %s.\n",
		verb, p.ID, p.What, approvals.PersonLabel(e.cfg, by.PersonID), e.osUser, p.ReceiptID)
	refreshSlack(ctx, e, svc)
	return nil
}
