package deps

import (
	"context"
	"github.com/dataworkers/dw/internal/lineage/graphindex"
	"testing"
	"time"

	"github.com/dataworkers/dw/internal/clock"
	"github.com/dataworkers/dw/internal/config"
	"github.com/dataworkers/dw/internal/lineage"
	"github.com/dataworkers/dw/internal/store/storetest"
	"github.com/dataworkers/dw/internal/storeconfig"
)

// TestHeldGraphSeesOtherProcessesWrites: the graph deps holds loads its
// index once, keeps it while nothing changes, and picks up an edge that a
// second store connection (another agent process) writes, on the very
// next call, by applying the change that write logged: one load in all.
// Run on both store engines.
func TestHeldGraphSeesOtherProcessesWrites(t *testing.T) {
	engines := map[string]func(t *testing.T) string{
		"sqlite": func(t *testing.T) string { return "home: " + t.TempDir() + "\n" },
		"postgres": func(t *testing.T) string {
			return "store: {driver: postgres, url: '" + storetest.PostgresSchemaURL(t) + "'}\n"
		},
	}
	for name, conf := range engines {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			yaml := conf(t)
			cfg, err := config.Parse("dw.yaml", []byte(yaml))
			if err != nil {
				t.Fatal(err)
			}
			clk := clock.NewFake(time.Date(2026, 3, 10, 15, 0, 0, 0, time.UTC))
			d := New("dw-test", cfg, clk, nil)
			t.Cleanup(func() { d.Close() })

			g, err := d.Graph(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := g.RecordLineage(ctx, lineage.Note{Path: []string{"kafka://prod/a", "flink://job", "kafka://prod/b"}}); err != nil {
				t.Fatal(err)
			}
			loads := map[*graphindex.Index]bool{}
			blast := func() int {
				t.Helper()
				g2, err := d.Graph(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if g2 != g {
					t.Fatal("deps built a second graph for the same store")
				}
				br, err := g2.BlastRadius(ctx, lineage.BlastParams{Asset: "kafka://prod/a"})
				if err != nil {
					t.Fatal(err)
				}
				ix, err := g2.Index(ctx)
				if err != nil {
					t.Fatal(err)
				}
				loads[ix] = true
				return br.Total
			}
			for range 5 {
				if n := blast(); n != 2 {
					t.Fatalf("blast radius of a = %d, want 2", n)
				}
			}
			if len(loads) != 1 {
				t.Fatalf("%d index loads for 5 calls on an unchanged graph, want 1", len(loads))
			}

			// Another process: its own connection to the same store.
			other, err := storeconfig.Open(ctx, cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer other.Close()
			if _, err := lineage.New(other, clk).RecordLineage(ctx, lineage.Note{Path: []string{"kafka://prod/b", "snowflake://db.s.c"}}); err != nil {
				t.Fatal(err)
			}
			for range 5 {
				if n := blast(); n != 3 {
					t.Fatalf("after the other process's edge, blast radius of a = %d, want 3", n)
				}
			}
			if len(loads) != 2 {
				t.Fatalf("%d indexes in all, want 2 (one more for the one change)", len(loads))
			}
			if st := g.IndexStats(); st.Loads != 1 || st.Applied != 1 {
				t.Fatalf("index kept current by %+v; want one load and the other process's write applied once", st)
			}
		})
	}
}

// TestHeldGraphFollowsAReopenedStore: after Close the next call opens the
// store again and gets a graph over the new connection, never one over the
// closed one.
func TestHeldGraphFollowsAReopenedStore(t *testing.T) {
	ctx := context.Background()
	cfg, err := config.Parse("dw.yaml", []byte("home: "+t.TempDir()+"\n"))
	if err != nil {
		t.Fatal(err)
	}
	d := New("dw-test", cfg, nil, nil)
	g1, err := d.Graph(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	g2, err := d.Graph(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	if g1 == g2 || g2.DB() == g1.DB() {
		t.Fatal("the graph over a closed store was kept")
	}
	if _, err := g2.Index(ctx); err != nil {
		t.Fatalf("graph over the reopened store: %v", err)
	}
}
