package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/dataworkers/dw/internal/approvals"
)

func init() {
	register("step", "ID --did \"…\" [--done]", "record a step you ran for an approved proposal (and, with --done, that it is carried out)", stepCmd)
}

// stepCmd records, in the proposal's receipt, a step a person ran: agents
// never run stream, job or table changes, so the owners' own steps reach
// the receipt this way, signed by their OS login's mapping.
func stepCmd(ctx context.Context, e *env, args []string) error {
	fs := e.flags("step")
	did := fs.String("did", "", "what you did, in a sentence (required)")
	done := fs.Bool("done", false, "the proposal is now carried out in full")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return errUsage
	}
	if strings.TrimSpace(*did) == "" {
		return fmt.Errorf("--did is required: say what you ran, for the receipt")
	}
	svc, err := e.service(ctx)
	if err != nil {
		return err
	}
	by, err := e.terminalDecider()
	if err != nil {
		return err
	}
	entry, err := svc.RecordStep(ctx, pos[0], approvals.Step{Actor: by.PersonID, Description: *did,
		Details: map[string]any{"os_user": by.OSUser}})
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "Recorded step on %s by %s (receipt entry %d).\n", pos[0], approvals.PersonLabel(e.cfg, by.PersonID), entry.Seq)
	if *done {
		p, err := svc.MarkExecuted(ctx, pos[0], by.PersonID, *did)
		if err != nil {
			return err
		}
		fmt.Fprintf(e.stdout, "%s is now %s.\n", p.ID, p.State)
	}
	return nil
}
