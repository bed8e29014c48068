package catalog

import (
	"context"
	"errors"
	"testing"

	"github.com/dataworkers/dw/internal/lineage"
	"github.com/dataworkers/dw/internal/lineage/lineagetest"
)

// TestRecordLineageRefusesBadIDs: record_lineage refuses an asset id
// with a control or invisible format character (NUL, ESC, a zero-width
// space that would pose as a real DAG's name) and writes nothing.
func TestRecordLineageRefusesBadIDs(t *testing.T) {
	ctx := context.Background()
	d := testDeps(t)
	h := &handlers{d: d}
	for _, c := range []struct {
		note lineage.Note
		r    rune
	}{
		{lineage.Note{Assets: []lineage.NoteAsset{{ID: "duckdb://a\x00b"}}}, 0},
		{lineage.Note{Assets: []lineage.NoteAsset{{ID: "airflow://dag/sync_metered_usage_to_stripe\u200b"}}}, 0x200b},
		{lineage.Note{Path: []string{"kafka://prod/api-usage", "kafka://prod/evil\x1b[2K"}}, 0x1b},
		{lineage.Note{Assets: []lineage.NoteAsset{{ID: "sigma://w", Aliases: []string{"dbt://exposure.b.\u2066x"}}}}, 0x2066},
	} {
		_, _, err := h.recordLineage(ctx, c.note)
		if te, ok := errors.AsType[*lineage.IDTextError](err); !ok || te.Rune != c.r {
			t.Errorf("%+v: %v, want the id text rule refusing U+%04X", c.note, err, c.r)
		}
	}
	db, err := d.Store(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n := lineagetest.Count(t, db, "lineage_assets"); n != 0 {
		t.Errorf("refused notes wrote %d assets", n)
	}
}
