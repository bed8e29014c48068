package main

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/dataworkers/dw/internal/approvals"
	"github.com/dataworkers/dw/internal/changelog"
)

func init() {
	register("changes show", "CHANGE-ID [--json]", "print one recorded change whole: every asset, field and detail (tool answers list the first)", changesShow)
}

// changesShow prints a change as the log keeps it. Tool answers list a
// change's first assets, fields and details with their totals
// (changelog.Change.Bounded) and point here for the rest.
func changesShow(ctx context.Context, e *env, args []string) error {
	fs := e.flags("changes show")
	asJSON := fs.Bool("json", false, "print the change as JSON")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return errUsage
	}
	id, err := parseChangeID(pos[0])
	if err != nil {
		return err
	}
	if _, err := e.service(ctx); err != nil {
		return err
	}
	c, found, err := changelog.ByID(ctx, e.db, id)
	if err != nil {
		return err
	}
	if !found {
		return fmt.Errorf("no change %d is recorded; list_changes (dw-incidents) lists them", id)
	}
	if *asJSON {
		return writeJSON(e.stdout, c)
	}
	// Stored text reaches the terminal escaped, as a proposal's does.
	fmt.Fprintf(e.stdout, "change %d: %s\n%s on %s at %s, recorded by %s at %s\n", c.ID, approvals.Line(c.Summary), c.Kind,
		approvals.Line(c.System), stamp(c.At), approvals.Line(c.Source), stamp(c.RecordedAt))
	if c.Actor != "" {
		fmt.Fprintf(e.stdout, "made by %s\n", approvals.Line(c.Actor))
	}
	if c.Key != "" {
		fmt.Fprintf(e.stdout, "key %s\n", approvals.Line(c.Key))
	}
	fmt.Fprintf(e.stdout, "assets (%d):\n", len(c.Assets))
	for _, a := range c.Assets {
		fmt.Fprintf(e.stdout, "  %s\n", approvals.Line(a))
	}
	if len(c.Fields) > 0 {
		fmt.Fprintf(e.stdout, "fields (%d):\n", len(c.Fields))
		for _, f := range c.Fields {
			line := fmt.Sprintf("%s %s", f.How, f.Name)
			if f.NewName != "" {
				line += " to " + f.NewName
			}
			if f.Detail != "" {
				line += ": " + f.Detail
			}
			fmt.Fprintf(e.stdout, "  %s (%s)\n", approvals.Line(line), approvals.Line(f.Asset))
		}
	}
	if len(c.Details) > 0 {
		fmt.Fprintf(e.stdout, "details (%d):\n", len(c.Details))
		for _, k := range slices.Sorted(maps.Keys(c.Details)) {
			fmt.Fprintf(e.stdout, "  %s: %s\n", approvals.Line(k), approvals.Line(c.Details[k]))
		}
	}
	return nil
}
