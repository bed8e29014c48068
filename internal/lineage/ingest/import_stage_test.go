package ingest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/dataworkers/dw/internal/lineage"
	"github.com/dataworkers/dw/internal/lineage/lineagetest"
	"github.com/dataworkers/dw/internal/store"
	"github.com/dataworkers/dw/internal/store/storetest"
)

// stagedModels is a manifest large enough to be staged (assets plus edges
// over lineage's 20,000) and to span several 10,000-row batches.
const stagedModels = 5_200

// graphState is what a reader sees of the graph.
type graphState struct {
	Assets, Aliases, Edges, EdgeColumns int
	MaxSeq, Version                     int64
}

func readState(t *testing.T, db *store.DB) graphState {
	t.Helper()
	ctx := context.Background()
	var s graphState
	for q, dst := range map[string]any{
		"SELECT COUNT(*) FROM lineage_assets":              &s.Assets,
		"SELECT COUNT(*) FROM lineage_aliases":             &s.Aliases,
		"SELECT COUNT(*) FROM lineage_edges":               &s.Edges,
		"SELECT COUNT(*) FROM lineage_edge_columns":        &s.EdgeColumns,
		"SELECT COALESCE(MAX(seq), 0) FROM lineage_assets": &s.MaxSeq,
		"SELECT version FROM lineage_version WHERE id = 1": &s.Version,
	} {
		if err := db.QueryRowContext(ctx, q).Scan(dst); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	return s
}

// stagingTables lists the staging tables present in the store.
func stagingTables(t *testing.T, db *store.DB) []string {
	t.Helper()
	q := "SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE 'lineage_stage_%' ORDER BY name"
	if db.Dialect() == store.Postgres {
		q = "SELECT tablename FROM pg_tables WHERE schemaname = current_schema() AND tablename LIKE 'lineage_stage_%' ORDER BY tablename"
	}
	rows, err := db.QueryContext(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		out = append(out, n)
	}
	return out
}

// tableIdentity is which table lineage_assets is: its root page on SQLite,
// its object id on PostgreSQL. A staged import swaps a new table in; an
// import in place leaves the same one.
func tableIdentity(t *testing.T, db *store.DB) int64 {
	t.Helper()
	q := "SELECT rootpage FROM sqlite_master WHERE type = 'table' AND name = 'lineage_assets'"
	if db.Dialect() == store.Postgres {
		q = "SELECT 'lineage_assets'::regclass::oid::bigint"
	}
	var id int64
	if err := db.QueryRowContext(context.Background(), q).Scan(&id); err != nil {
		t.Fatal(err)
	}
	return id
}

// indexNames lists the lineage tables' index names.
func indexNames(t *testing.T, db *store.DB) []string {
	t.Helper()
	q := "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name LIKE 'lineage_%' ORDER BY name"
	if db.Dialect() == store.Postgres {
		q = "SELECT indexname FROM pg_indexes WHERE schemaname = current_schema() AND tablename LIKE 'lineage_%' ORDER BY indexname"
	}
	rows, err := db.QueryContext(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		out = append(out, n)
	}
	return out
}

// seedOldGraph writes a small graph the staged import must carry over: two
// tables with column lineage between them, and a dropped asset whose seq
// must never be handed out again.
func seedOldGraph(t *testing.T, db *store.DB, g *lineage.Graph) int64 {
	t.Helper()
	var dropped int64
	_, err := g.Write(context.Background(), func(w *lineage.Writer) error {
		a, err := w.UpsertAsset(&lineage.AssetInput{ID: "duckdb://old.orders"})
		if err != nil {
			return err
		}
		b, err := w.UpsertAsset(&lineage.AssetInput{ID: "duckdb://old.revenue"})
		if err != nil {
			return err
		}
		if dropped, err = w.UpsertAsset(&lineage.AssetInput{ID: "duckdb://old.gone"}); err != nil {
			return err
		}
		return w.Link(a, b, "", lineage.SourceDBT, []lineage.ColumnMapping{{From: "amount", To: "revenue"}}, false)
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(context.Background(), "DELETE FROM lineage_assets WHERE seq = ?", dropped); err != nil {
		t.Fatal(err)
	}
	return dropped
}

// TestStagedImportSwapsWhole: a large manifest is staged and swapped in on
// both stores: the old graph (assets, names, edges, column lineage) is
// carried over with its seqs, new seqs continue the counter past a
// deleted asset, the version moves once, no staging table is left, and the
// index names are the migrations' again (PostgreSQL) or alternate with a
// suffix (SQLite, which cannot rename an index). A re-import is written in
// place (the same tables, no staging) and changes nothing; so is a grown
// project's; a renamed project, which writes more than a batch of rows,
// gives way to staging and swaps cleanly after them.
func TestStagedImportSwapsWhole(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		g := lineage.New(db, nil)
		dropped := seedOldGraph(t, db, g)
		before := readState(t, db)
		idxBefore := indexNames(t, db)
		data, edges := lineagetest.DBTManifest(stagedModels)
		res, err := DBTManifest(ctx, g, bytes.NewReader(data), DBTOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if res.AssetsCreated != stagedModels || res.EdgesCreated != len(edges) || res.Unchanged || res.GraphVersion != before.Version+1 {
			t.Fatalf("staged import: %+v, want %d assets, %d edges, version %d", res.ImportStats, stagedModels, len(edges), before.Version+1)
		}
		after := readState(t, db)
		want := graphState{Assets: before.Assets + stagedModels, Aliases: after.Aliases, Edges: before.Edges + len(edges),
			EdgeColumns: before.EdgeColumns, MaxSeq: after.MaxSeq, Version: before.Version + 1}
		if after != want || after.Aliases < before.Aliases+stagedModels {
			t.Fatalf("after the swap %+v, want %+v", after, want)
		}
		var minNew int64
		if err := db.QueryRowContext(ctx, "SELECT MIN(seq) FROM lineage_assets WHERE id LIKE 'dbt://%'").Scan(&minNew); err != nil {
			t.Fatal(err)
		}
		if minNew <= dropped {
			t.Fatalf("new assets start at seq %d, not past the deleted asset's %d", minNew, dropped)
		}
		if cols, ok := edgeCols(t, g, "duckdb://old.orders", "duckdb://old.revenue"); !ok || len(cols) != 1 || cols[0].From != "amount" {
			t.Fatalf("old column lineage after the swap: %v (edge found %v)", cols, ok)
		}
		if left := stagingTables(t, db); len(left) != 0 {
			t.Fatalf("staging tables left: %v", left)
		}
		idxAfter := indexNames(t, db)
		if db.Dialect() == store.Postgres && !slices.Equal(idxAfter, idxBefore) {
			t.Errorf("indexes after the swap %v, want the migrations' %v", idxAfter, idxBefore)
		}
		if len(idxAfter) != len(idxBefore) {
			t.Errorf("indexes after the swap %v, before %v", idxAfter, idxBefore)
		}

		swapped := tableIdentity(t, db)
		again, err := DBTManifest(ctx, g, bytes.NewReader(data), DBTOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got := tableIdentity(t, db); got != swapped {
			t.Fatalf("the re-import swapped the tables (lineage_assets %d, was %d), want it written in place", got, swapped)
		}
		if !again.Unchanged || again.AssetsCreated != 0 || again.EdgesCreated != 0 || again.GraphVersion != after.Version {
			t.Fatalf("re-import: %+v (version before %d)", again.ImportStats, after.Version)
		}
		if got := readState(t, db); got != after {
			t.Fatalf("re-import changed the graph: %+v, was %+v", got, after)
		}
		grown, grownEdges := lineagetest.DBTManifest(stagedModels + 100)
		more, err := DBTManifest(ctx, g, bytes.NewReader(grown), DBTOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if more.AssetsCreated != 100 || more.EdgesCreated != len(grownEdges)-len(edges) || more.GraphVersion != after.Version+1 {
			t.Fatalf("grown import: %+v", more.ImportStats)
		}
		if got := tableIdentity(t, db); got != swapped {
			t.Fatalf("the grown import swapped the tables (lineage_assets %d, was %d), want it written in place", got, swapped)
		}
		if got := indexNames(t, db); !slices.Equal(got, idxAfter) {
			t.Errorf("indexes after an import in place %v, want %v", got, idxAfter)
		}
		grownState := readState(t, db)
		// Another project: other dbt names, models in another schema.
		renamed := bytes.ReplaceAll(bytes.ReplaceAll(grown, []byte(".bench."), []byte(".renamed.")), []byte(`"schema": "s"`), []byte(`"schema": "s2"`))
		moved, err := DBTManifest(ctx, g, bytes.NewReader(renamed), DBTOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if moved.AssetsCreated != stagedModels+100 || moved.EdgesCreated != len(grownEdges) || moved.GraphVersion != after.Version+2 {
			t.Fatalf("renamed project's import: %+v", moved.ImportStats)
		}
		if got := tableIdentity(t, db); got == swapped {
			t.Fatalf("the renamed project's import kept the tables (lineage_assets %d), want it staged and swapped in", got)
		}
		if got := readState(t, db); got.Assets != grownState.Assets+stagedModels+100 || got.Edges != grownState.Edges+len(grownEdges) {
			t.Fatalf("after the renamed project %+v, before %+v", got, grownState)
		}
		if got := indexNames(t, db); len(got) != len(idxBefore) || (db.Dialect() == store.Postgres && !slices.Equal(got, idxBefore)) {
			t.Errorf("indexes after four imports %v, want %v", got, idxBefore)
		}
		if left := stagingTables(t, db); len(left) != 0 {
			t.Fatalf("staging tables left: %v", left)
		}
	})
}

// TestStagedImportCancelledKeepsGraph: an import cancelled once its
// staging has committed batches leaves the live graph exactly as it was
// (a reader sees no part of it), and a rerun completes.
func TestStagedImportCancelledKeepsGraph(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		g := lineage.New(db, nil)
		seedOldGraph(t, db, g)
		before := readState(t, db)
		data, edges := lineagetest.DBTManifest(stagedModels)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go func() {
			// Cancel as soon as a batch of edges is committed in staging.
			for ctx.Err() == nil {
				var n int
				if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM lineage_stage_edges").Scan(&n); err == nil && n > 0 {
					cancel()
					return
				}
				time.Sleep(2 * time.Millisecond)
			}
		}()
		_, err := DBTManifest(ctx, g, bytes.NewReader(data), DBTOptions{})
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled import: %v, want context.Canceled", err)
		}
		if got := readState(t, db); got != before {
			t.Fatalf("after a cancelled import the graph reads %+v, want %+v", got, before)
		}
		res, err := DBTManifest(context.Background(), g, bytes.NewReader(data), DBTOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if res.AssetsCreated != stagedModels || res.EdgesCreated != len(edges) {
			t.Fatalf("rerun: %+v", res.ImportStats)
		}
		if left := stagingTables(t, db); len(left) != 0 {
			t.Fatalf("staging tables left: %v", left)
		}
	})
}

// TestStagedImportKilledKeepsGraph: a process killed in the middle of a
// staged import (SIGKILL: no cleanup runs) leaves the previous graph
// readable and whole, its staging tables behind; the next import drops
// them and completes.
func TestStagedImportKilledKeepsGraph(t *testing.T) {
	if path := os.Getenv("DW_TEST_STAGED_IMPORT_CHILD"); path != "" {
		// The child: import into the parent's store until killed.
		db, err := store.OpenSQLite(context.Background(), path)
		if err != nil {
			t.Fatal(err)
		}
		data, _ := lineagetest.DBTManifest(4 * stagedModels)
		_, err = DBTManifest(context.Background(), lineage.New(db, nil), bytes.NewReader(data), DBTOptions{})
		t.Fatalf("the import finished (%v) before the parent killed it", err)
	}
	path := filepath.Join(t.TempDir(), "dw.db")
	db, err := store.OpenSQLite(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	g := lineage.New(db, nil)
	seedOldGraph(t, db, g)
	before := readState(t, db)

	cmd := exec.Command(os.Args[0], "-test.run=^TestStagedImportKilledKeepsGraph$")
	cmd.Env = append(os.Environ(), "DW_TEST_STAGED_IMPORT_CHILD="+path)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	deadline := time.After(2 * time.Minute)
	for staged := 0; staged == 0; {
		select {
		case err := <-exited:
			t.Fatalf("the importing child exited before it was killed: %v", err)
		case <-deadline:
			cmd.Process.Kill()
			t.Fatal("the child staged no edges in 2 minutes")
		case <-time.After(5 * time.Millisecond):
		}
		if err := db.QueryRowContext(context.Background(), "SELECT COUNT(*) FROM lineage_stage_edges").Scan(&staged); err != nil {
			staged = 0
		}
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-exited

	if got := readState(t, db); got != before {
		t.Fatalf("after a killed import the graph reads %+v, want %+v", got, before)
	}
	if left := stagingTables(t, db); len(left) == 0 {
		t.Fatal("no staging tables left behind: the child was not killed mid-import")
	}
	if _, err := g.GetLineage(context.Background(), lineage.LineageParams{Asset: "duckdb://old.orders"}); err != nil {
		t.Fatalf("the old graph is not readable: %v", err)
	}
	data, edges := lineagetest.DBTManifest(stagedModels)
	res, err := DBTManifest(context.Background(), g, bytes.NewReader(data), DBTOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res.AssetsCreated != stagedModels || res.EdgesCreated != len(edges) {
		t.Fatalf("rerun after the kill: %+v", res.ImportStats)
	}
	if got := readState(t, db); got.Assets != before.Assets+stagedModels || got.Edges != before.Edges+len(edges) {
		t.Fatalf("rerun after the kill: %s", fmt.Sprint(got))
	}
	if left := stagingTables(t, db); len(left) != 0 {
		t.Fatalf("staging tables left: %v", left)
	}
}

// TestReimportInPlaceBesideAnotherWriter: while a re-import is written in
// place, another process records lineage into the same store. Both
// finish: the other's assets and edges are there, every model the
// re-import restated was seen at or after its start, and the re-import
// changed nothing of its own.
func TestReimportInPlaceBesideAnotherWriter(t *testing.T) {
	storetest.EachTwice(t, func(t *testing.T, a, b *store.DB) {
		ctx := context.Background()
		ga, gb := lineage.New(a, nil), lineage.New(b, nil)
		data, _ := lineagetest.DBTManifest(stagedModels)
		if _, err := DBTManifest(ctx, ga, bytes.NewReader(data), DBTOptions{}); err != nil {
			t.Fatal(err)
		}
		start := time.Now().UnixMilli()
		done := make(chan error, 1)
		var again *DBTImportResult
		go func() {
			var err error
			again, err = DBTManifest(ctx, ga, bytes.NewReader(data), DBTOptions{})
			done <- err
		}()
		const notes = 8
		for i := range notes {
			_, err := gb.RecordLineage(ctx, lineage.Note{Path: []string{fmt.Sprintf("kafka://prod/other%d", i), fmt.Sprintf("duckdb://db.s.m%d", i*50)}})
			if err != nil {
				t.Fatalf("note %d beside the re-import: %v", i, err)
			}
			time.Sleep(30 * time.Millisecond)
		}
		if err := <-done; err != nil {
			t.Fatalf("re-import beside another writer: %v", err)
		}
		if again.AssetsCreated != 0 || again.EdgesCreated != 0 || again.AssetsUpdated != 0 || again.EdgesUpdated != 0 {
			t.Fatalf("re-import: %+v, want nothing of its own changed", again.ImportStats)
		}
		var others, models, stale int
		if err := a.QueryRowContext(ctx, "SELECT COUNT(*) FROM lineage_assets WHERE id LIKE 'kafka://prod/other%'").Scan(&others); err != nil {
			t.Fatal(err)
		}
		// The notes named the models themselves: no new table.
		if err := a.QueryRowContext(ctx, "SELECT COUNT(*) FROM lineage_assets WHERE id LIKE 'dbt://model.bench.%'").Scan(&models); err != nil {
			t.Fatal(err)
		}
		if err := a.QueryRowContext(ctx, "SELECT COUNT(*) FROM lineage_assets WHERE id LIKE 'dbt://model.bench.%' AND last_seen_ms < ?", start).Scan(&stale); err != nil {
			t.Fatal(err)
		}
		var edges, staleEdges int
		if err := a.QueryRowContext(ctx, `SELECT COUNT(*) FROM lineage_edges e JOIN lineage_assets f ON f.seq = e.from_seq
			WHERE f.id LIKE 'kafka://prod/other%'`).Scan(&edges); err != nil {
			t.Fatal(err)
		}
		// Over 15,000 restated edges: their times move in several batches.
		if err := a.QueryRowContext(ctx, `SELECT COUNT(*) FROM lineage_edges e JOIN lineage_assets f ON f.seq = e.from_seq
			WHERE f.id LIKE 'dbt://model.bench.%' AND e.last_seen_ms < ?`, start).Scan(&staleEdges); err != nil {
			t.Fatal(err)
		}
		if others != notes || edges != notes || models != stagedModels || stale != 0 || staleEdges != 0 {
			t.Fatalf("after both: %d of the other's %d assets, %d of its edges, %d models (want %d), %d models and %d of their edges not seen since before the re-import",
				others, notes, edges, models, stagedModels, stale, staleEdges)
		}
	})
}
