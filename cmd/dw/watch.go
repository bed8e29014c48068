package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/dataworkers/dw/internal/clock"
	"github.com/dataworkers/dw/internal/connect"
	"github.com/dataworkers/dw/internal/deps"
	"github.com/dataworkers/dw/internal/deps/clients"
	"github.com/dataworkers/dw/internal/flink"
	"github.com/dataworkers/dw/internal/kafka"
	"github.com/dataworkers/dw/internal/packload"
	"github.com/dataworkers/dw/internal/page"
	"github.com/dataworkers/dw/internal/registry"
	"github.com/dataworkers/dw/internal/routines"
	"github.com/dataworkers/dw/internal/warehouses"
)

func init() {
	register("watch", "[--once [--at RFC3339]] [--parallel N]",
		"run the routines of dw.yaml on their schedules (logs on stderr; --once runs what is due and prints JSON)", watch)
	register("routines list", "[--routine R] [--status S] [--json]", "recorded routine runs, newest first (paged: --limit, --cursor)", routinesList)
	register("routines show", "RUN-ID [--json]", "one routine run: what it saw, the incidents and who was told", routinesShow)
}

func watch(ctx context.Context, e *env, args []string) error {
	fs := e.flags("watch")
	once := fs.Bool("once", false, "run every routine due now once, print a JSON summary on stdout, and exit")
	at := fs.String("at", "", "with --once: act as if it were this instant (RFC 3339), e.g. to replay the demo's incident time")
	parallel := fs.Int("parallel", 8, "runs in flight at once")
	lease := fs.Duration("lease", 30*time.Second, "how long a run's claim lives without a heartbeat (a killed watcher's routine is free after this)")
	grace := fs.Duration("grace", 20*time.Second, "on SIGTERM, how long runs in flight may finish before they are cancelled")
	watcher := fs.String("watcher", "", "this watcher's name in the store (default host:pid)")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 0 {
		return errUsage
	}
	if *parallel < 1 || *parallel > 256 {
		return fmt.Errorf("--parallel %d is out of range: use 1 to 256", *parallel)
	}
	if *lease < time.Second {
		return fmt.Errorf("--lease %s is too short: use at least 1s (e.g. 30s)", *lease)
	}
	clk := e.clock
	if *at != "" {
		if !*once {
			return fmt.Errorf("--at needs --once: a long-running watcher follows the clock (set DW_CLOCK to replay a day)")
		}
		t, err := time.Parse(time.RFC3339, *at)
		if err != nil {
			return fmt.Errorf("--at %q is not an RFC 3339 time such as 2026-03-10T15:05:00Z", *at)
		}
		clk = clock.NewOffset(t)
	}
	cfg, err := e.config()
	if err != nil {
		return err
	}
	if *at == "" {
		clk = e.clock // e.config gives the embedded default its demo clock
	}
	if len(routines.Routines(cfg)) == 0 {
		return fmt.Errorf("no routines in %s: add them under routines: (name, cron or every, and what to observe)", cfg.Source)
	}
	// One deps for the watcher's life, as an agent has: the store, the
	// held graph, each warehouse (in process: dw links the drivers) and
	// each client, built on first use.
	d := deps.New("dw-watch", cfg, clk, e.log)
	defer d.Close()
	d.OpenWarehouse = warehouses.Open
	// The embedded default seeds its store and warehouse on first use, on
	// the incident day of the clock, so --at replays the demo's day.
	d.SeedStore = packload.SeedDefault
	db, err := d.Store(ctx)
	if err != nil {
		return err
	}
	g, err := d.Graph(ctx)
	if err != nil {
		return err
	}
	notifier, err := routines.NewSlack(cfg, e.log)
	if err != nil {
		return err
	}
	opts := routines.Options{DB: db, Config: cfg, Graph: g, Clock: clk, Warehouse: d.Warehouse,
		Sources: watchSources(d), Watcher: *watcher, Lease: *lease, Parallel: *parallel, Grace: *grace, Log: e.log}
	if notifier != nil {
		opts.Notifier = notifier
	}
	r, err := routines.New(opts)
	if err != nil {
		return err
	}
	if !*once {
		return r.Watch(ctx)
	}
	runs, err := r.RunDue(ctx, clk.Now().Truncate(time.Minute))
	if err != nil {
		return err
	}
	return writeJSON(e.stdout, struct {
		Runs []*routines.Run `json:"runs"`
	}{runs})
}

// watchSources reaches the streaming systems dw.yaml configures through
// d's clients (internal/deps/clients), as the agents do.
func watchSources(d *deps.Deps) routines.Sources {
	cfg := d.Config
	s := routines.Sources{Cluster: "default"}
	if k := cfg.Kafka; k != nil {
		if strings.TrimSpace(k.Name) != "" {
			s.Cluster = strings.TrimSpace(k.Name)
		}
		s.Kafka = func(ctx context.Context) (*kafka.Client, error) { return clients.Kafka(ctx, d) }
	}
	if cfg.KafkaConnect != nil {
		s.Connect = func() (*connect.Client, error) { return clients.Connect(d) }
	}
	if clients.RegistryConfigured(d) {
		s.Registry = func() (*registry.Client, error) { return clients.Registry(d) }
	}
	if cfg.Flink != nil {
		s.Flink = func() (*flink.Client, error) { return clients.Flink(d) }
	}
	return s
}

func routinesList(ctx context.Context, e *env, args []string) error {
	fs := e.flags("routines list")
	name := fs.String("routine", "", "only this routine's runs")
	status := fs.String("status", "", "only runs with this status: running, ok, flagged, failed, canceled, lost")
	limit := fs.Int("limit", 20, "runs per page (1 to 500)")
	cursor := fs.String("cursor", "", "next_cursor from the previous page")
	asJSON := fs.Bool("json", false, "print JSON")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 0 {
		return errUsage
	}
	st, err := routines.ParseStatus(*status)
	if err != nil {
		return err
	}
	if _, err := e.service(ctx); err != nil {
		return err
	}
	res, err := routines.List(ctx, e.db, routines.ListParams{Routine: *name, Status: string(st), Params: page.Params{Limit: *limit, Cursor: *cursor}})
	if err != nil {
		return err
	}
	if *asJSON {
		return writeJSON(e.stdout, res)
	}
	if len(res.Runs) == 0 {
		fmt.Fprintln(e.stdout, "No routine runs recorded yet: `dw watch` runs the routines of dw.yaml (`dw watch --once` runs what is due now).")
		return nil
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 2, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tROUTINE\tTICK\tSTATUS\tINCIDENTS\tTOLD\tSUMMARY")
	for _, r := range res.Runs {
		var incs, told []string
		for _, i := range r.Incidents {
			incs = append(incs, i.ID)
		}
		for _, n := range r.Notified {
			if n.Person != "" {
				told = append(told, n.Person)
			}
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\n", r.ID, r.Routine, stamp(r.Tick), r.Status,
			orDash(strings.Join(incs, ",")), orDash(strings.Join(told, ",")), r.Summary)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if res.NextCursor != "" {
		fmt.Fprintf(e.stdout, "\n%d of %d runs; next page: dw routines list --cursor %s\n", len(res.Runs), res.Total, res.NextCursor)
	}
	return nil
}

func routinesShow(ctx context.Context, e *env, args []string) error {
	fs := e.flags("routines show")
	asJSON := fs.Bool("json", false, "print JSON")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return errUsage
	}
	id, err := strconv.ParseInt(pos[0], 10, 64)
	if err != nil || id <= 0 {
		return fmt.Errorf("%q is not a run id: give the number `dw routines list` shows", pos[0])
	}
	if _, err := e.service(ctx); err != nil {
		return err
	}
	r, err := routines.GetRun(ctx, e.db, id)
	if err != nil {
		return err
	}
	if *asJSON {
		return writeJSON(e.stdout, r)
	}
	fmt.Fprintf(e.stdout, "Run %d of %s for %s: %s\n", r.ID, r.Routine, stamp(r.Tick), r.Status)
	fmt.Fprintf(e.stdout, "Watcher %s, started %s, finished %s\n", r.Watcher, stamp(r.Started), stamp(r.Finished))
	if r.Summary != "" {
		fmt.Fprintln(e.stdout, r.Summary)
	}
	if r.Error != "" {
		fmt.Fprintln(e.stdout, "Error:", r.Error)
	}
	for _, f := range r.Findings {
		fmt.Fprintf(e.stdout, "- %s %s: %s — %s\n", f.Kind, f.Target, f.Status, f.Detail)
	}
	for _, i := range r.Incidents {
		verb := "joined"
		if i.Opened {
			verb = "opened"
		}
		fmt.Fprintf(e.stdout, "Incident %s %s (%s) on %s\n", i.ID, verb, i.Status, i.Asset)
	}
	for _, n := range r.Notified {
		what := "told via " + n.Via
		if !n.Sent {
			what = "not messaged"
		}
		fmt.Fprintf(e.stdout, "Owner %s (%s) %s about %s", orDash(n.Person), n.Role, what, n.Incident)
		if n.Note != "" {
			fmt.Fprintf(e.stdout, ": %s", n.Note)
		}
		fmt.Fprintln(e.stdout)
	}
	return nil
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
