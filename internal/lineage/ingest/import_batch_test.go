package ingest

import (
	"bytes"
	"context"
	"testing"

	"github.com/dataworkers/dw/internal/lineage"
	"github.com/dataworkers/dw/internal/lineage/lineagetest"

	"github.com/dataworkers/dw/internal/store"
	"github.com/dataworkers/dw/internal/store/storetest"
)

// TestImportEdgesBatched: a dbt import writes its edges in multi-row
// statements; counts, idempotent re-import (every edge through the stored
// path), a grown manifest adding only its new edges, no pair stored twice,
// and the graph version moving only when something changed.
func TestImportEdgesBatched(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		g := lineage.New(db, nil)
		data, edges := lineagetest.DBTManifest(900) // more pairs than one statement carries
		res, err := DBTManifest(ctx, g, bytes.NewReader(data), DBTOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if res.AssetsCreated != 900 || res.EdgesCreated != len(edges) || res.Unchanged {
			t.Fatalf("first import: %+v, want 900 assets and %d edges", res.ImportStats, len(edges))
		}
		var stored int
		if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM lineage_edges").Scan(&stored); err != nil || stored != len(edges) {
			t.Fatalf("stored %d edges (%v), want %d", stored, err, len(edges))
		}
		v1 := res.GraphVersion
		again, err := DBTManifest(ctx, g, bytes.NewReader(data), DBTOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !again.Unchanged || again.EdgesCreated != 0 || again.GraphVersion != v1 {
			t.Fatalf("re-import: %+v (version before %d)", again.ImportStats, v1)
		}
		grown, grownEdges := lineagetest.DBTManifest(950)
		more, err := DBTManifest(ctx, g, bytes.NewReader(grown), DBTOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if more.AssetsCreated != 50 || more.EdgesCreated != len(grownEdges)-len(edges) || more.GraphVersion <= v1 {
			t.Fatalf("grown import: %+v, want 50 assets and %d edges", more.ImportStats, len(grownEdges)-len(edges))
		}
		// Every edge is the model's upstream feeding it, stored once.
		var pairs, distinct int
		if err := db.QueryRowContext(ctx, "SELECT COUNT(*), COUNT(DISTINCT from_seq * 1000000 + to_seq) FROM lineage_edges").Scan(&pairs, &distinct); err != nil {
			t.Fatal(err)
		}
		if pairs != len(grownEdges) || distinct != pairs {
			t.Fatalf("%d edges, %d distinct; want %d", pairs, distinct, len(grownEdges))
		}
		var sources string
		if err := db.QueryRowContext(ctx, `SELECT e.sources FROM lineage_edges e
			JOIN lineage_assets a ON a.seq = e.from_seq JOIN lineage_assets b ON b.seq = e.to_seq
			WHERE a.name = 'm0' AND b.name = 'm1'`).Scan(&sources); err != nil || sources != "dbt" {
			t.Fatalf("edge m0 -> m1 sources %q (%v)", sources, err)
		}
	})
}
