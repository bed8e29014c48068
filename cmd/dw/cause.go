package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/dataworkers/dw/internal/approvals"
	"github.com/dataworkers/dw/internal/incidents"
)

func init() {
	register("cause set", "INC-ID CHANGE-ID --reason … [--json]", "name the recorded change that caused an incident (or correct it); the receipt records who", causeSet)
}

// causeSet records a person's attribution of an incident's cause: it
// overrides the ranking wherever a cause is cited and is written to the
// incident's receipt under the person's name.
func causeSet(ctx context.Context, e *env, args []string) error {
	fs := e.flags("cause set")
	reason := fs.String("reason", "", "why this change caused it, in your words (required)")
	asJSON := fs.Bool("json", false, "print the incident as JSON")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 2 {
		return errUsage
	}
	changeID, err := parseChangeID(pos[1])
	if err != nil {
		return err
	}
	apv, err := e.service(ctx)
	if err != nil {
		return err
	}
	by, err := e.terminalDecider()
	if err != nil {
		return fmt.Errorf("%w (naming a cause needs a configured person, recorded in the receipt)", err)
	}
	svc := &incidents.Service{DB: e.db, Clock: e.clock}
	inc, err := svc.AttributeCause(ctx, incidents.AttributeParams{IncidentID: pos[0], ChangeID: changeID, Reason: *reason, Actor: by.PersonID})
	if err != nil {
		return err
	}
	facts, actor := inc.CauseFacts(by.PersonID)
	// Dated by the approvals clock, as every receipt entry is: DW_CLOCK on
	// a store not made for replay dates nothing, so the chain never reads
	// a cause later (or earlier) than the decisions around it.
	now, err := apv.Now(ctx)
	if err != nil {
		return fmt.Errorf("the cause is recorded on %s but not in its receipt: %w", inc.ID, err)
	}
	entry, err := approvals.AppendReceipt(ctx, e.db, now, inc.ID, approvals.EntryCause, actor, facts)
	if err != nil {
		return fmt.Errorf("the cause is recorded on %s but not in its receipt: %w", inc.ID, err)
	}
	if *asJSON {
		return writeJSON(e.stdout, inc)
	}
	a := inc.Attributed
	// Stored change text reaches the terminal escaped (approvals.Line), as
	// every proposal's text does: a row recorded before the text rule can't
	// recolour the screen or forge a line.
	fmt.Fprintf(e.stdout, "%s: cause named by %s: change %d, %s (%s on %s at %s).\nReason: %s\n", inc.ID, approvals.Line(a.Actor), a.Change.ID,
		approvals.Line(a.Change.Summary), a.Change.Kind, approvals.Line(a.Change.System), stamp(a.Change.At), approvals.Text(a.Reason, "        "))
	if a.Replaced != 0 {
		fmt.Fprintf(e.stdout, "It corrects the cause named before (change %d).\n", a.Replaced)
	}
	fmt.Fprintf(e.stdout, "Proposals now cite it. Receipt %s entry %d (dw receipt show %s).\n", inc.ID, entry.Seq, inc.ID)
	return nil
}

// parseChangeID accepts 42, CHANGE-42 and change-42.
func parseChangeID(s string) (int64, error) {
	t := strings.TrimSpace(s)
	if len(t) > 7 && strings.EqualFold(t[:7], "change-") {
		t = t[7:]
	}
	id, err := strconv.ParseInt(t, 10, 64)
	if err != nil || id <= 0 {
		return 0, fmt.Errorf("%q is not a change id: give the number list_changes shows, e.g. 42 or CHANGE-42", s)
	}
	return id, nil
}
