package benchmcp

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/dataworkers/dw/internal/lineage"
	"github.com/dataworkers/dw/internal/store"
)

// blastAssets is the graph size: issue 18's 1M assets (3M edges) by
// default, which make bench runs; DW_BENCH_BLAST_ASSETS gives a smaller one
// while iterating (the row names the size that ran).
func blastAssets() int {
	if n, err := strconv.Atoi(os.Getenv("DW_BENCH_BLAST_ASSETS")); err == nil && n >= 1000 {
		return n
	}
	return 1_000_000
}

// BenchmarkE2EBlastRadius is issue 18's first row: blast_radius_analysis
// on a warm dw-context-catalog over stdio, against a plain in-process BFS
// over the same edges in the same run. The first call (which loads the
// graph's index) is reported apart; the ratio is over the warm calls.
func BenchmarkE2EBlastRadius(b *testing.B) {
	ctx := context.Background()
	n := blastAssets()
	home := b.TempDir()
	conf := filepath.Join(home, "dw.yaml")
	if err := os.WriteFile(conf, []byte("home: "+home+"\n"), 0o600); err != nil {
		b.Fatal(err)
	}
	g := NewGraph(n)
	t0 := time.Now()
	db, err := store.OpenSQLite(ctx, filepath.Join(home, "dw.db"))
	if err != nil {
		b.Fatal(err)
	}
	if err := g.Load(ctx, db); err != nil {
		b.Fatal(err)
	}
	// A store in use has its write-ahead log folded into the file.
	if _, err := db.ExecContext(ctx, "PRAGMA wal_checkpoint(TRUNCATE)"); err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	b.Logf("bench graph: %d assets, %d edges, stored in %s", n, len(g.Edges), time.Since(t0).Round(time.Millisecond))

	adj := g.Adjacency()
	want := BFS(adj, 0)
	// The second floor: the product's own traversal in this process on a
	// held graph, so the table separates the walk from the MCP hop.
	held := lineage.New(db, nil)
	params := lineage.BlastParams{Asset: "bench://a1", MaxDepth: 10000, MaxAssets: 10_000_000, Timeout: "60s"}
	if r, err := held.BlastRadius(ctx, params); err != nil || r.Total != want {
		b.Fatalf("in-process blast radius: %v", err)
	}
	var inProcess []time.Duration
	agent := Start(b, "dw-context-catalog", "DW_CONFIG="+conf, "DW_HOME="+home)
	args := map[string]any{"asset": "bench://a1", "max_depth": 10000, "max_assets": 10_000_000, "timeout": "60s"}
	var res struct {
		Total       int     `json:"total"`
		Partial     bool    `json:"partial"`
		IndexLoadMS float64 `json:"index_load_ms"`
	}
	first := agent.Call(b, "blast_radius_analysis", args, &res)
	if res.Total != want || res.Partial {
		b.Fatalf("blast radius reached %d (partial %v); the plain BFS reached %d", res.Total, res.Partial, want)
	}
	// The first call loads the index and must say how long that took.
	if res.IndexLoadMS <= 0 {
		// Measured on, so binaries from before the field still give figures.
		b.Errorf("the first call after start does not say how long loading the index took (index_load_ms %v)", res.IndexLoadMS)
	}
	loadMS := res.IndexLoadMS
	// The protocol's own share: a bare go-sdk server (testdata/bareserver)
	// answering a warm call's recorded result, timed in the same loop.
	warm, _ := agent.CallResult(b, "blast_radius_analysis", args)
	recorded, err := json.Marshal(warm)
	if err != nil {
		b.Fatal(err)
	}
	answerFile := filepath.Join(home, "answer.json")
	if err := os.WriteFile(answerFile, recorded, 0o600); err != nil {
		b.Fatal(err)
	}
	bare := StartBin(b, buildBare(b), "DW_BARE_ANSWER="+answerFile)
	var sdk []time.Duration
	calls := blastCalls()
	row := Row{Key: "blast", What: "blast radius, " + strconv.Itoa(n) + " assets / " + strconv.Itoa(len(g.Edges)) + " edges, " + strconv.Itoa(want) + " reached"}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for c := 0; c < calls; c++ {
			t := time.Now()
			if BFS(adj, 0) != want {
				b.Fatal("floor BFS changed its answer")
			}
			row.Floor = append(row.Floor, time.Since(t))
			t = time.Now()
			if _, err := held.BlastRadius(ctx, params); err != nil {
				b.Fatal(err)
			}
			inProcess = append(inProcess, time.Since(t))
			res.IndexLoadMS = 0 // absent from a warm answer, so not overwritten by decoding it
			row.Product = append(row.Product, agent.Call(b, "blast_radius_analysis", args, &res))
			if res.Total != want || res.IndexLoadMS != 0 {
				b.Fatalf("call %d reached %d (index load %v ms), want %d on the held index", c, res.Total, res.IndexLoadMS, want)
			}
			sdk = append(sdk, bare.Call(b, "replay", nil, nil))
		}
	}
	b.StopTimer()
	row.RSSMiB = agent.RSSMiB()
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	row.Note = fmt.Sprintf("first call after start: %s, of which loading the index %.0f ms (as the answer says); the same code in-process on a held graph: %.1f ms median; "+
		"a bare go-sdk server sending the same answer (%.1f KB): %.1f ms median, so the plain BFS plus the protocol's own share is %.1f ms and the product %.2f× that",
		first.Round(time.Millisecond), loadMS, ms(med(inProcess)), float64(len(recorded))/1000, ms(med(sdk)),
		ms(med(row.Floor))+ms(med(sdk)), float64(med(row.Product))/float64(med(row.Floor)+med(sdk)))
	b.ReportMetric(ms(med(sdk)), "sdk-answer-ms")
	b.ReportMetric(float64(first.Microseconds())/1000, "first-call-ms")
	row.Report(b)
}

// blastCalls is how many calls the warm blast radius row times: 40, or
// DW_BENCH_BLAST_CALLS. A call at 1M assets is a few milliseconds, and
// with ten the median moved by a third between runs on a shared VM.
func blastCalls() int {
	if n, err := strconv.Atoi(os.Getenv("DW_BENCH_BLAST_CALLS")); err == nil && n >= 1 {
		return n
	}
	return 40
}
