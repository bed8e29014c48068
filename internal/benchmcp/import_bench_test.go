package benchmcp

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/dataworkers/dw/internal/lineage/lineagetest"
	"github.com/dataworkers/dw/internal/store"
)

// importModels is the manifest's size: issue 18's 100k models (about 300k
// edges) by default; DW_BENCH_IMPORT_ASSETS gives a smaller one while
// iterating (the row names the size that ran).
func importModels() int {
	if n, err := strconv.Atoi(os.Getenv("DW_BENCH_IMPORT_ASSETS")); err == nil && n >= 1000 {
		return n
	}
	return 100_000
}

// importAnswer is what the benchmark reads of import_dbt_manifest's answer.
type importAnswer struct {
	AssetsCreated int  `json:"assets_created"`
	EdgesCreated  int  `json:"edges_created"`
	Unchanged     bool `json:"unchanged"`
}

// imported is what importOnce measured.
type imported struct {
	took    time.Duration            // the first import
	walPeak float64                  // the store's write-ahead log at its largest during it, MiB
	rssPeak float64                  // the agent's memory at its largest during it, MiB
	rows    *lineagetest.CatalogRows // what it stored, for the floor to write
	// again is the same manifest imported a second time into the catalog
	// the first made (what a scheduled dbt run does every day), with the
	// log's and the agent's peaks during it.
	again              time.Duration
	againWAL, againRSS float64
}

// importOnce imports the manifest at path through a dw-context-catalog
// started on a new store, warmed by a search so the store is open and
// migrated before the measured call, then imports it again.
func importOnce(b *testing.B, dir, path string, models, edges int) imported {
	b.Helper()
	home, err := os.MkdirTemp(dir, "home-")
	if err != nil {
		b.Fatal(err)
	}
	conf := filepath.Join(home, "dw.yaml")
	if err := os.WriteFile(conf, []byte("home: "+home+"\n"), 0o600); err != nil {
		b.Fatal(err)
	}
	agent := Start(b, "dw-context-catalog", "DW_CONFIG="+conf, "DW_HOME="+home)
	defer agent.session.Close()
	agent.Call(b, "search_assets", map[string]any{"query": "m1"}, nil)
	dbPath := filepath.Join(home, "dw.db")
	if _, err := os.Stat(dbPath); err != nil {
		b.Fatalf("the warm-up call did not open the store at %s: %v", dbPath, err)
	}
	stopWAL, stopMem := lineagetest.PeakWAL(dbPath), PeakRSS(b, agent.Pid())
	var r imported
	var out importAnswer
	r.took = agent.Call(b, "import_dbt_manifest", map[string]any{"path": path}, &out)
	r.walPeak, r.rssPeak = stopWAL(), stopMem()
	if out.AssetsCreated != models || out.EdgesCreated != edges {
		b.Fatalf("import_dbt_manifest created %d assets and %d edges, want %d and %d", out.AssetsCreated, out.EdgesCreated, models, edges)
	}
	stopWAL, stopMem = lineagetest.PeakWAL(dbPath), PeakRSS(b, agent.Pid())
	out = importAnswer{}
	r.again = agent.Call(b, "import_dbt_manifest", map[string]any{"path": path}, &out)
	r.againWAL, r.againRSS = stopWAL(), stopMem()
	if out.AssetsCreated != 0 || out.EdgesCreated != 0 || !out.Unchanged {
		b.Fatalf("importing the manifest again created %d assets and %d edges (unchanged %v), want none", out.AssetsCreated, out.EdgesCreated, out.Unchanged)
	}
	db, err := store.OpenSQLite(context.Background(), dbPath)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	r.rows = lineagetest.ReadCatalogRows(b, db)
	if got := r.rows.Count("lineage_assets"); got != models {
		b.Fatalf("read %d assets back for the floor, want %d", got, models)
	}
	return r
}

// BenchmarkE2EImportDBT is issue 18's catalog-import row through MCP:
// import_dbt_manifest of a 100k-model manifest (about 300k edges, by path)
// on a dw-context-catalog over stdio, each import into a new store,
// alternating with the floor in this process: a bulk insert of the same
// rows (the assets, names and edges the import stored, read back from the
// agent's store; prepared multi-row INSERTs in one transaction) into
// another new store.
// Both write-ahead logs are sampled for their peak. A flat log is one that
// does not grow with the import: the row also imports a manifest half the
// size once and compares the two peaks. A second row imports the same
// manifest again into the catalog each import made, against the same
// floor: the import a scheduled dbt run repeats every day.
func BenchmarkE2EImportDBT(b *testing.B) {
	n := importModels()
	dir := b.TempDir()
	write := func(models int) (string, [][2]int32) {
		data, edges := lineagetest.DBTManifest(models)
		path := filepath.Join(dir, fmt.Sprintf("manifest-%d.json", models))
		if err := os.WriteFile(path, data, 0o600); err != nil {
			b.Fatal(err)
		}
		return path, edges
	}
	path, edges := write(n)
	edgeCount := len(edges)
	runs := 3
	if v, err := strconv.Atoi(os.Getenv("DW_BENCH_IMPORT_RUNS")); err == nil && v >= 1 {
		runs = v
	}
	row := Row{Key: "import", What: fmt.Sprintf("catalog import through MCP, %dk assets / %dk edges, into a new store", n/1000, edgeCount/1000)}
	again := Row{Key: "import", What: fmt.Sprintf("catalog re-import through MCP, the same %dk assets / %dk edges into the catalog they made", n/1000, edgeCount/1000)}
	var wal, floorWAL, againWAL float64
	for i := 0; i < b.N; i++ {
		for r := 0; r < runs; r++ {
			imp := importOnce(b, dir, path, n, edgeCount)
			row.Product = append(row.Product, imp.took)
			again.Product = append(again.Product, imp.again)
			wal, row.RSSMiB = max(wal, imp.walPeak), max(row.RSSMiB, imp.rssPeak)
			againWAL, again.RSSMiB = max(againWAL, imp.againWAL), max(again.RSSMiB, imp.againRSS)

			floorPath := filepath.Join(dir, fmt.Sprintf("floor-%d-%d.db", i, r))
			db, err := store.OpenSQLite(context.Background(), floorPath)
			if err != nil {
				b.Fatal(err)
			}
			stop := lineagetest.PeakWAL(floorPath)
			t := time.Now()
			imp.rows.Insert(b, db)
			row.Floor = append(row.Floor, time.Since(t))
			floorWAL = max(floorWAL, stop())
			db.Close()
		}
	}
	half, halfEdges := write(n / 2)
	halfImp := importOnce(b, dir, half, n/2, len(halfEdges))
	halfTook, halfWAL := halfImp.took, halfImp.walPeak
	// Flat: the full import's log no larger than a quarter over the half
	// import's (a log that grew with the import would be about twice).
	flat := wal <= 1.25*halfWAL
	_, mid := row.Ratios()
	met := mid <= 2 && flat
	row.Met = &met
	row.Note = fmt.Sprintf("%d alternating runs; write-ahead log peak %.1f MiB (half the manifest: %.1f MiB, so %s; the floor's one-transaction bulk insert: %.1f MiB); half the manifest took %s (the full one %s median); memory: the agent at its largest during the import",
		runs, wal, halfWAL, map[bool]string{true: "flat", false: "growing with the import"}[flat], floorWAL,
		halfTook.Round(time.Millisecond), med(row.Product).Round(time.Millisecond))
	b.ReportMetric(wal, "MiB-wal-peak")
	b.ReportMetric(halfWAL, "MiB-wal-peak-half")
	b.ReportMetric(floorWAL, "MiB-wal-floor")
	row.Report(b)
	// The re-import against the same floor: writing the rows it holds.
	again.Floor = row.Floor
	againFlat := againWAL <= 1.25*halfImp.againWAL
	_, againMid := again.Ratios()
	againMet := againMid <= 2 && againFlat
	again.Met = &againMet
	again.Note = fmt.Sprintf("the same runs, each import followed by the same manifest again (nothing new: it moves every last-seen time); write-ahead log peak %.1f MiB (half the manifest again: %.1f MiB)",
		againWAL, halfImp.againWAL)
	again.Log(b)
}
