package benchmcp

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/dataworkers/dw/internal/lineage"
	"github.com/dataworkers/dw/internal/store"
)

// BenchmarkE2EBlastRadiusAfterWrite is issue 17's held graph under writes:
// a warm dw-context-catalog answers blast_radius_analysis, and before each
// call another process (this one, on its own store connection) records one
// edge with record_lineage's domain call (lineage.Graph.RecordLineage), so
// every call first catches up with a write. The floor is the plain BFS over
// the same edges, the new one included, in the same run. Two rows: edges
// between assets noted before (the write changes only edges) and edges
// from assets never noted (the write also records their sources, so the
// agent reads the listed names afresh). DW_BENCH_BIN_DIR naming binaries
// built before the change log gives the "before" figures: their agent
// loads the whole index again after every write.
func BenchmarkE2EBlastRadiusAfterWrite(b *testing.B) {
	ctx := context.Background()
	n := blastAssets()
	home := b.TempDir()
	conf := filepath.Join(home, "dw.yaml")
	if err := os.WriteFile(conf, []byte("home: "+home+"\n"), 0o600); err != nil {
		b.Fatal(err)
	}
	g := NewGraph(n)
	db, err := store.OpenSQLite(ctx, filepath.Join(home, "dw.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	if err := g.Load(ctx, db); err != nil {
		b.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, "PRAGMA wal_checkpoint(TRUNCATE)"); err != nil {
		b.Fatal(err)
	}
	// The written edges join assets of a1's component (the first tenth of
	// the graph, lineagetest.NewGraph), so the walk stays about the size
	// of the first row's. The bench graph is stored without names, and the
	// lineage writer finds an asset by its names: the assets used get
	// their id as one, as every write through the writer gives them.
	comp := max(n*1065/10000, 4)
	rng := rand.New(rand.NewPCG(3, 5))
	perm := rng.Perm(comp)
	noted, fresh := perm[:24], perm[24:48]
	id := func(node int) string { return "bench://a" + strconv.Itoa(node+1) }
	for _, node := range append(slices.Clone(noted), fresh...) {
		if _, err := db.ExecContext(ctx, "INSERT INTO lineage_aliases (alias, asset_seq, weak) VALUES (?, ?, 0)", id(node), node+1); err != nil {
			b.Fatal(err)
		}
	}
	writer := lineage.New(db, nil)
	var before lineage.Note
	for _, node := range noted {
		before.Assets = append(before.Assets, lineage.NoteAsset{ID: id(node)})
	}
	if _, err := writer.RecordLineage(ctx, before); err != nil {
		b.Fatal(err)
	}

	adj := g.Adjacency()
	agent := Start(b, "dw-context-catalog", "DW_CONFIG="+conf, "DW_HOME="+home)
	args := map[string]any{"asset": "bench://a1", "max_depth": 10000, "max_assets": 10_000_000, "timeout": "60s"}
	var res struct {
		Total       int     `json:"total"`
		Partial     bool    `json:"partial"`
		IndexLoadMS float64 `json:"index_load_ms"`
	}
	first := agent.Call(b, "blast_radius_analysis", args, &res)
	if want := BFS(adj, 0); res.Total != want || res.Partial {
		b.Fatalf("blast radius reached %d (partial %v); the plain BFS reached %d", res.Total, res.Partial, want)
	}
	b.Logf("bench graph: %d assets, %d edges; first call %s, of which loading the index %.0f ms", n, len(g.Edges), first.Round(time.Millisecond), res.IndexLoadMS)
	held := lineage.New(db, nil)
	params := lineage.BlastParams{Asset: "bench://a1", MaxDepth: 10000, MaxAssets: 10_000_000, Timeout: "60s"}
	if _, err := held.BlastRadius(ctx, params); err != nil {
		b.Fatal(err)
	}
	// Fewer calls than the warm row's (blastCalls): each reads the index
	// whole for its note (1.7 s at 1M assets), and the assets to link are
	// drawn for this many.
	calls := 20
	if n > 200_000 {
		calls = 10
	}
	linked := map[[2]int]bool{}
	for _, e := range g.Edges {
		linked[[2]int{int(e[0]), int(e[1])}] = true
	}
	for _, phase := range []struct {
		name, what string
		from       []int
	}{
		{"noted", "between assets already noted", noted},
		{"new", "from assets never noted", fresh},
	} {
		b.Run(phase.name, func(b *testing.B) {
			row := Row{Key: "blast", What: fmt.Sprintf("blast radius, %d assets, after another process's record_lineage of one edge %s before each call", n, phase.what)}
			var writes, reloads, inProcess, warmFloor []time.Duration
			reloaded := 0
			from := slices.Clone(phase.from)
			for i := 0; i < b.N; i++ {
				for c := 0; c < calls; c++ {
					if len(from) == 0 {
						b.Fatal("no assets left to link")
					}
					u := from[0]
					from = from[1:]
					v := noted[rng.IntN(len(noted))]
					for v == u || linked[[2]int{u, v}] {
						v = noted[rng.IntN(len(noted))]
					}
					linked[[2]int{u, v}] = true
					t := time.Now()
					if _, err := writer.RecordLineage(ctx, lineage.Note{Path: []string{id(u), id(v)}}); err != nil {
						b.Fatal(err)
					}
					writes = append(writes, time.Since(t))
					adj[u] = append(adj[u], int32(v))

					t = time.Now()
					want := BFS(adj, 0)
					row.Floor = append(row.Floor, time.Since(t))
					// The same walk again, its arrays now in the caches:
					// what the write before the floor cost it.
					t = time.Now()
					BFS(adj, 0)
					warmFloor = append(warmFloor, time.Since(t))
					res.IndexLoadMS = 0
					row.Product = append(row.Product, agent.Call(b, "blast_radius_analysis", args, &res))
					if res.Total != want || res.Partial {
						b.Fatalf("call %d reached %d (partial %v), the plain BFS %d", c, res.Total, res.Partial, want)
					}
					if res.IndexLoadMS > 0 {
						reloaded++
					}
					t = time.Now()
					if r, err := held.BlastRadius(ctx, params); err != nil || r.Total != want {
						b.Fatalf("in-process blast radius: %v", err)
					}
					inProcess = append(inProcess, time.Since(t))
				}
			}
			// What catching up cost before the change log: the whole
			// index read again. Measured after the calls, not between
			// them: reading 1M assets (2.3 s, hundreds of MB allocated)
			// left every cache cold for the next call, and the agent's
			// call, which reads more memory than the floor, paid most of
			// it (a third of its median).
			for range 3 {
				t := time.Now()
				if _, err := lineage.ReadIndex(ctx, db); err != nil {
					b.Fatal(err)
				}
				reloads = append(reloads, time.Since(t))
			}
			row.RSSMiB = agent.RSSMiB()
			ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
			row.Note = fmt.Sprintf("the agent loaded its index whole on %d of %d calls; in-process the same code on a held graph kept current %.1f ms median (%+v); reading the index whole %.0f ms; the write %.1f ms; the floor run again straight after itself %.1f ms median",
				reloaded, len(row.Product), ms(med(inProcess)), held.IndexStats(), ms(med(reloads)), ms(med(writes)), ms(med(warmFloor)))
			row.Report(b)
		})
	}
}
