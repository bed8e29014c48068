package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/dataworkers/dw/internal/approvals"
	"github.com/dataworkers/dw/internal/config"
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
	by, err := e.recordedPerson()
	if err != nil {
		return err
	}
	login := by.OSUser
	p, err := svc.Decide(ctx, pos[0], by, v, *reason)
	if err != nil {
		return err
	}
	verb := "Approved"
	if v == approvals.VerdictReject {
		verb = "Rejected"
	}
	who := by.PersonID
	if p.Decision != nil {
		who = p.Decision.PersonID
	}
	fmt.Fprintf(e.stdout, "%s %s: %s\nRecorded as %s via terminal (OS user %s) in receipt %s.\n",
		verb, p.ID, p.What, approvals.PersonLabel(e.cfg, who), login, p.ReceiptID)
	refreshSlack(ctx, e, svc)
	return nil
}

// recordedPerson is the person at this terminal for the acts the store's
// records govern (a decision, an autonomy change, lifting the stop): the
// OS account running dw, looked up by uid; the person it stands for is
// found in the approvers recorded in the store. The loaded config's
// mapping only picks among them when one login stands for several.
func (e *env) recordedPerson() (approvals.Decider, error) {
	login, err := e.login()
	if err != nil {
		return approvals.Decider{}, err
	}
	by := approvals.Decider{Channel: approvals.ChannelTerminal, OSUser: login,
		Evidence: map[string]string{"os_user": login, "uid": strconv.Itoa(os.Getuid())}}
	// A login that stands for several people (the embedded default's demo
	// maps this terminal's login to every owner) names nobody here: the
	// records say who it acts as.
	if person, ok := e.cfg.PersonForOSUser(login); ok && loginPeople(e.cfg, login) == 1 {
		by.PersonID = person.ID
	}
	if host, err := os.Hostname(); err == nil {
		by.Evidence["host"] = host
	}
	return by, nil
}

// loginPeople counts the people a login is mapped to.
func loginPeople(cfg *config.Config, login string) int {
	n := 0
	for _, p := range cfg.People {
		if slices.Contains(p.OSUsers, login) {
			n++
		}
	}
	return n
}
