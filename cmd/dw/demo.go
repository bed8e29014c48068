package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/dataworkers/dw/internal/approvals"
	"github.com/dataworkers/dw/internal/demo"
	"github.com/dataworkers/dw/internal/demo/tables"
	"github.com/dataworkers/dw/internal/packload"
	"github.com/dataworkers/dw/internal/store"
	"github.com/dataworkers/dw/internal/story"
	"github.com/dataworkers/dw/internal/suggest"
)

func init() {
	register("demo run", "[--home DIR]", "run story A end to end over stdio through the five agents, and print the receipt", demoRun)
	register("demo load", "PACK [--into-existing-store]", "load a scenario pack (billing, loyalty) into the configured DuckDB warehouse and store", demoLoad)
}

func demoRun(ctx context.Context, e *env, args []string) error {
	fs := e.flags("demo run")
	home := fs.String("home", "", "data directory for this run (default: a new temporary directory)")
	if _, err := parseFlags(fs, args); err != nil {
		return err
	}
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	binDir := filepath.Dir(exe)
	// The five agents and the child that reads the demo's DuckDB file for them.
	for _, a := range []string{"dw-quality", "dw-incidents", "dw-context-catalog", "dw-schema", "dw-connectors", "dw-warehouse-duckdb"} {
		if _, err := os.Stat(filepath.Join(binDir, a)); err != nil {
			return fmt.Errorf("%s is not next to dw in %s: run make build first", a, binDir)
		}
	}
	if *home == "" {
		if *home, err = os.MkdirTemp("", "dw-demo-"); err != nil {
			return err
		}
	} else if entries, _ := os.ReadDir(*home); len(entries) > 0 {
		return fmt.Errorf("--home %s is not empty; the demo needs a fresh directory", *home)
	}
	start := time.Now()
	run, err := story.Billing(ctx, &story.Env{BinDir: binDir, Home: *home, Out: e.stdout, Now: e.clock.Now()})
	if err != nil {
		return fmt.Errorf("demo stopped: %w (agent logs: %s)", err, filepath.Join(*home, "agents.log"))
	}
	fmt.Fprintf(e.stdout, "\nDone in %.1fs: incident %s verified; receipt chain intact. Data directory: %s\n",
		time.Since(start).Seconds(), run.IncidentID, *home)
	return nil
}

func demoLoad(ctx context.Context, e *env, args []string) error {
	fs := e.flags("demo load")
	existing := fs.Bool("into-existing-store", false, "load into a store that already holds data the demo did not make; it stays a real store (never marked for replay)")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return errUsage
	}
	pack := pos[0]
	valid := demo.Packs()
	ok := false
	for _, p := range valid {
		ok = ok || p == pack
	}
	if !ok {
		return fmt.Errorf("unknown pack %q; closest: %s (valid: %s)", pack, strings.Join(suggest.Closest(pack, valid, 1), ", "), strings.Join(valid, ", "))
	}
	cfg, err := e.config()
	if err != nil {
		return err
	}
	wc, err := cfg.Warehouse("")
	if err != nil {
		return err
	}
	if wc.Kind != "duckdb" {
		return fmt.Errorf("demo packs load into a DuckDB warehouse; the first warehouse in %s is %s (%s)", cfg.Source, wc.Name, wc.Kind)
	}
	if _, err := e.service(ctx); err != nil {
		return err
	}
	// Only a store made for the demo becomes a replay store (on which
	// DW_CLOCK also dates decisions): one already marked, or one holding
	// nothing yet. A store with real records is refused, and with
	// --into-existing-store it gets the pack but stays a real store.
	replay, err := approvals.IsReplayStore(ctx, e.db, cfg.Home)
	if err != nil {
		return err
	}
	var held []string
	if !replay {
		if held, err = storeHolds(ctx, e.db); err != nil {
			return err
		}
	}
	mark := replay || len(held) == 0
	if !mark && !*existing {
		return fmt.Errorf("the store %s already holds data the demo did not make (%s); nothing was loaded. Load the demo into a store of its own "+
			"(a fresh DW_HOME with no dw.yaml, or a dw.yaml whose store.path is a new file), or pass --into-existing-store to add the pack to this store anyway: "+
			"it then stays a real store, whose decisions are always dated by the real clock", e.db.Source(), strings.Join(held, ", "))
	}
	now := e.clock.Now()
	if err := os.MkdirAll(filepath.Dir(wc.Path), 0o700); err != nil {
		return err
	}
	if err := tables.LoadWarehouse(ctx, wc.Path, pack, now); err != nil {
		return err
	}
	p, tl, err := packload.Read(pack, now)
	if err != nil {
		return err
	}
	rep, err := packload.LoadStore(ctx, e.db, e.clock, p, wc.Name)
	if err != nil {
		return err
	}
	// A store made for the scenario is made for replay: on it DW_CLOCK
	// also dates decisions (see approvals.MarkReplayStore). A real store
	// never is.
	if mark {
		if err := approvals.MarkReplayStore(ctx, e.db, cfg.Home, now); err != nil {
			return err
		}
	}
	fmt.Fprintf(e.stdout, "Loaded %s into %s (%s) and the store: %d graph assets and %d edges created, %d changes, %d metrics, %d schema versions.\nIncident day %s; its 15:05 check is %s.\n",
		pack, wc.Name, wc.Path, rep.GraphAssets, rep.GraphEdges, rep.Changes, rep.Metrics, rep.Versions,
		tl.Day.Format("2006-01-02"), tl.QualityCheck.Format(time.RFC3339))
	if !mark {
		fmt.Fprintln(e.stdout, "The store held other data, so it was not marked for replay: DW_CLOCK does not date decisions on it.")
	}
	return nil
}

// realDataTables are the tables whose rows are records of something
// (proposals, receipts, incidents, the graph, history): a store with a
// row in any of them is not empty. kv and the version and head rows are
// bookkeeping a fresh store may already have.
var realDataTables = []string{"approval_proposals", "approval_decisions", "receipt_entries", "incidents", "incident_changes",
	"lineage_assets", "lineage_edges", "metric_points", "quality_expectations", "registry_versions", "table_snapshots",
	"kafka_lag_samples", "orchestrate_runs", "routine_runs"}

// storeHolds names the tables of realDataTables that hold a row.
func storeHolds(ctx context.Context, db *store.DB) ([]string, error) {
	var held []string
	for _, t := range realDataTables {
		// t is one of the constant names above, never user text.
		rows, err := db.QueryContext(ctx, "SELECT 1 FROM "+t+" LIMIT 1")
		if err != nil {
			return nil, fmt.Errorf("check whether the store is empty (%s): %w", t, err)
		}
		found := rows.Next()
		err = errors.Join(rows.Err(), rows.Close())
		if err != nil {
			return nil, fmt.Errorf("check whether the store is empty (%s): %w", t, err)
		}
		if found {
			held = append(held, t)
		}
	}
	return held, nil
}
