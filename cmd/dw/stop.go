package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/dataworkers/dw/internal/approvals"
)

func init() {
	register("stop", "--reason …", "halt all dispatch org-wide until dw resume (reads keep working)", stopCmd)
	register("resume", "[--reason …]", "lift the org-wide stop", resumeCmd)
	register("status", "[--json]", "show the org-wide stop, autonomy levels and open proposals", statusCmd)
}

func stopCmd(ctx context.Context, e *env, args []string) error {
	fs := e.flags("stop")
	reason := fs.String("reason", "", "why; quoted in every refused dispatch (required)")
	if pos, err := parseFlags(fs, args); err != nil {
		return err
	} else if len(pos) > 0 {
		return errUsage
	}
	svc, err := e.service(ctx)
	if err != nil {
		return err
	}
	// Anyone may pull the cord, even a uid without an account: a stop only
	// makes the system do less, and the uid is recorded.
	who, err := e.login()
	if err != nil {
		who = "uid:" + strconv.Itoa(os.Getuid())
	}
	st, err := svc.Stop(ctx, who, *reason)
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "Org-wide stop in force since %s by %s: %q.\nEvery dispatching tool now refuses with this reason; read tools keep working.\nLift it with: dw resume --reason …\n",
		stamp(st.Since), st.By, st.Reason)
	return nil
}

func resumeCmd(ctx context.Context, e *env, args []string) error {
	fs := e.flags("resume")
	reason := fs.String("reason", "", "why it is safe again; recorded in the org receipt")
	if pos, err := parseFlags(fs, args); err != nil {
		return err
	} else if len(pos) > 0 {
		return errUsage
	}
	svc, err := e.service(ctx)
	if err != nil {
		return err
	}
	by, err := e.recordedPerson()
	if err != nil {
		return fmt.Errorf("%w (lifting the stop needs a person recorded as an approver)", err)
	}
	was, err := svc.Resume(ctx, by, *reason)
	if err != nil {
		return err
	}
	who := by.PersonID
	if who == "" {
		who = "OS user " + by.OSUser
	}
	if was.Tampered != "" {
		fmt.Fprintf(e.stdout, "Stop lifted by %s over a tampered store (%s); the org receipt records what was found. Agents may dispatch again within their domains' levels.\n", who, was.Tampered)
		return nil
	}
	fmt.Fprintf(e.stdout, "Stop lifted by %s (it was in force since %s by %s: %q). Agents may dispatch again within their domains' levels.\n",
		who, stamp(was.Since), was.By, was.Reason)
	return nil
}

// status is what a person checks first during an incident.
type status struct {
	Stop      approvals.StopState   `json:"stop"`
	Levels    []approvals.LevelInfo `json:"levels"`
	Open      int                   `json:"open_proposals"`
	Store     string                `json:"store"`
	OSUser    string                `json:"os_user"`
	Person    string                `json:"person,omitempty"`
	ConfigSrc string                `json:"config"`
}

func statusCmd(ctx context.Context, e *env, args []string) error {
	fs := e.flags("status")
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
	var st status
	if st.Stop, err = svc.StopStatus(ctx); err != nil {
		return err
	}
	if st.Levels, err = svc.Levels(ctx); err != nil {
		return err
	}
	open, err := svc.List(ctx, approvals.Filter{States: []approvals.State{approvals.StatePending, approvals.StateEscalated}, Limit: 1000})
	if err != nil {
		return err
	}
	st.Open, st.Store, st.OSUser, st.ConfigSrc = len(open), e.db.Source(), e.osUser, e.cfg.Source
	if st.ConfigSrc == "" {
		st.ConfigSrc = "(embedded default)"
	}
	if p, ok := e.cfg.PersonForOSUser(e.osUser); ok {
		st.Person = p.ID
	}
	if *asJSON {
		return writeJSON(e.stdout, st)
	}
	switch {
	case st.Stop.Tampered != "":
		fmt.Fprintf(e.stdout, "STOPPED: the store's governance state was tampered with: %s.\nAll dispatch is refused as if stopped; run dw receipt verify to see what was changed, then a person lifts it with dw resume.\n", st.Stop.Tampered)
	case st.Stop.Active:
		fmt.Fprintf(e.stdout, "STOPPED since %s by %s: %q (dw resume lifts it)\n", stamp(st.Stop.Since), st.Stop.By, st.Stop.Reason)
	default:
		fmt.Fprintln(e.stdout, "No org-wide stop.")
	}
	who := "not mapped to a person"
	if st.Person != "" {
		who = "person " + st.Person
	}
	fmt.Fprintf(e.stdout, "Config %s, store %s, OS user %s (%s).\nOpen proposals: %d\n", st.ConfigSrc, st.Store, st.OSUser, who, st.Open)
	if len(st.Levels) == 0 {
		fmt.Fprintln(e.stdout, "No domains are configured: agents dispatch nothing until dw.yaml defines domains.")
		return nil
	}
	return printLevels(e, st.Levels)
}

func printLevels(e *env, levels []approvals.LevelInfo) error {
	tw := tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "DOMAIN\tLEVEL\tSOURCE\tOPEN CLASSES")
	for _, l := range levels {
		src := "config"
		switch l.Source {
		case "set":
			src = fmt.Sprintf("set by %s at %s (config: %s): %q", l.SetBy, stamp(l.SetAt), l.ConfigLevel, l.Reason)
		case "tampered":
			src = "TAMPERED: " + l.Tampered
		}
		fmt.Fprintf(tw, "%s\t%s %s\t%s\t%s\n", l.Domain, l.Level, l.Name, src, strings.Join(l.OpenClasses, ", "))
	}
	return tw.Flush()
}
