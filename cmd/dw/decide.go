package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/term"

	"github.com/dataworkers/dw/internal/approvals"
	"github.com/dataworkers/dw/internal/config"
)

func init() {
	register("approve", "ID [--reason …] [--datasets-sha256 SHA]", "approve a proposal you are the named approver of", func(ctx context.Context, e *env, args []string) error {
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
	datasets := fs.String("datasets-sha256", "", "approving a lineage event whose request lists only some of its datasets: the datasets_sha256 printed with the full list, confirming you read it (instead of answering the prompt)")
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
	if v == approvals.VerdictApprove {
		if err := e.confirmDatasets(ctx, svc, pos[0], *datasets, &by); err != nil {
			return err
		}
	} else if *datasets != "" {
		return errors.New("--datasets-sha256 confirms an approval; a rejection needs only --reason")
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
		verb, p.ID, approvals.Line(p.What), approvals.PersonLabel(e.cfg, who), login, p.ReceiptID)
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

// confirmDatasets is what dw approve does first for a lineage_event
// proposal whose request lists only some of the event's datasets: it
// prints every one, then asks the person to confirm (at a terminal) or
// takes --datasets-sha256, the digest printed with the list. The digest
// is recorded in the decision's evidence, so the receipt shows the
// approver was shown the whole list the action binds.
func (e *env) confirmDatasets(ctx context.Context, svc *approvals.Service, id, given string, by *approvals.Decider) error {
	p, err := svc.Get(ctx, id)
	if err != nil {
		return err
	}
	given = strings.ToLower(strings.TrimSpace(given))
	if !p.DatasetsSummarized() {
		if given != "" {
			return fmt.Errorf("--datasets-sha256 applies to a lineage event whose request lists only some of its datasets; %s's request lists every one, so leave it out (nothing was decided)", p.ID)
		}
		return nil
	}
	ds, err := p.LineageDatasets()
	if err != nil {
		return fmt.Errorf("%s cannot be approved: %w; nothing was decided", p.ID, err)
	}
	fmt.Fprintf(e.stdout, "%s posts a lineage event naming %d datasets; its request lists only some, so here is every one you would approve:\n", p.ID, ds.Total())
	printDatasets(e.stdout, p, ds)
	switch {
	case given != "":
		if given != ds.SHA256 {
			return fmt.Errorf("--datasets-sha256 %s is not the digest of %s's datasets listed above (%s); nothing was decided", strconv.Quote(given), p.ID, ds.SHA256)
		}
	case e.interactive():
		fmt.Fprintf(e.stdout, "Approve %s, covering all %d datasets above? Type yes to approve: ", p.ID, ds.Total())
		if a := strings.ToLower(strings.TrimSpace(readAnswer(ctx, e.stdin))); a != "yes" && a != "y" {
			return fmt.Errorf("not confirmed; %s was not decided", p.ID)
		}
	default:
		return fmt.Errorf("%s's event names %d datasets, all listed above, and no terminal is here to confirm you read them; nothing was decided. Rerun at a terminal and answer the prompt, or with --datasets-sha256 %s", p.ID, ds.Total(), ds.SHA256)
	}
	if by.Evidence == nil {
		by.Evidence = map[string]string{}
	}
	by.Evidence["datasets_sha256"] = ds.SHA256
	by.Evidence["datasets_shown"] = strconv.Itoa(ds.Total())
	return nil
}

// interactive reports whether stdin can answer a prompt: a terminal
// (isatty, not merely a character device: /dev/null and /dev/zero are
// none), or a reader a test put there; a pipe or file from a script cannot.
func (e *env) interactive() bool {
	switch in := e.stdin.(type) {
	case nil:
		return false
	case *os.File:
		return term.IsTerminal(int(in.Fd()))
	}
	return true
}

// maxAnswer bounds the confirmation read: "yes" and a newline, with room
// to spare; whatever stdin holds beyond it is never read.
const maxAnswer = 256

// readAnswer reads one line of at most maxAnswer bytes, so a stdin that
// never ends a line (a device, a stuck pipe) cannot fill memory; a longer
// line is not an answer. A signal (ctx done) ends the wait unanswered: the
// blocked read is left behind, and dw exits.
func readAnswer(ctx context.Context, r io.Reader) string {
	got := make(chan string, 1)
	go func() { got <- readLine(r) }()
	select {
	case line := <-got:
		return line
	case <-ctx.Done():
		return ""
	}
}

func readLine(r io.Reader) string {
	var buf [maxAnswer]byte
	n := 0
	for n < len(buf) {
		m, err := r.Read(buf[n : n+1])
		if m == 1 {
			if buf[n] == '\n' {
				return string(buf[:n])
			}
			n++
		}
		if err != nil {
			return string(buf[:n])
		}
	}
	return ""
}
