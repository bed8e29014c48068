package lineage

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/dataworkers/dw/internal/store"
	"github.com/dataworkers/dw/internal/store/storetest"
)

// rawTitle changes asset id's title as a writer outside this binary
// would: with no rows, moving only the facts version (a write of facts
// alone, or one from a binary before Facts rows); else moving facts and
// topology by one, with the given log rows (op, from_seq, kind) under the
// new topology version.
func rawTitle(t *testing.T, db *store.DB, id, title string, rows [][3]any) {
	t.Helper()
	ctx := context.Background()
	if err := db.InTx(ctx, func(tx *store.Tx) error {
		if _, err := tx.ExecContext(ctx, "UPDATE lineage_assets SET title = ? WHERE id = ?", title, id); err != nil {
			return err
		}
		if rows == nil {
			_, err := tx.ExecContext(ctx, "UPDATE lineage_version SET version = version + 1, facts = facts + 1 WHERE id = 1")
			return err
		}
		var topo int64
		if err := tx.QueryRowContext(ctx, `UPDATE lineage_version SET version = version + 1, topology = topology + 1,
			facts = facts + 1, log_rows = log_rows + ? WHERE id = 1 RETURNING topology`, len(rows)).Scan(&topo); err != nil {
			return err
		}
		for i, r := range rows {
			if _, err := tx.ExecContext(ctx, "INSERT INTO lineage_index_log (version, n, op, from_seq, kind) VALUES (?, ?, ?, ?, ?)",
				topo, i, r[0], r[1], r[2]); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

func seqOf(t *testing.T, db *store.DB, id string) int64 {
	t.Helper()
	var s int64
	if err := db.QueryRowContext(context.Background(), "SELECT seq FROM lineage_assets WHERE id = ?", id).Scan(&s); err != nil {
		t.Fatal(err)
	}
	return s
}
func blastTitles(t *testing.T, g *Graph, asset string) map[string]string {
	t.Helper()
	r, err := g.BlastRadius(context.Background(), BlastParams{Asset: asset})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, a := range r.Assets {
		out[a.ID] = a.Title
	}
	return out
}

// TestOddFactsRowsAnswerAsFresh: Facts rows naming seq 0, negative seqs,
// seqs no index holds, unparsable text, an asset in from_seq rather than
// in the list, and one row of 100,000 seqs: no panic, and the held graph
// answers as a fresh one (from a review).
func TestOddFactsRowsAnswerAsFresh(t *testing.T) {
	storetest.EachTwice(t, func(t *testing.T, dbA, dbB *store.DB) {
		ctx := context.Background()
		held, _ := newGraph(t, dbA)
		writer, _ := newGraph(t, dbB)
		ids := []string{"kafka://prod/a", "kafka://prod/b", "kafka://prod/c", "kafka://prod/d"}
		if _, err := writer.RecordLineage(ctx, Note{Path: ids}); err != nil {
			t.Fatal(err)
		}
		b := seqOf(t, dbB, "kafka://prod/b")
		var huge []string
		for i := 0; i < 100_000; i++ {
			huge = append(huge, fmt.Sprint(1_000_000+i))
		}
		huge = append(huge, fmt.Sprint(b))
		cases := []struct {
			name string
			kind string
		}{
			{"zero", "0"},
			{"negative", "-1,-9223372036854775808"},
			{"absent", "999999999,9223372036854775807"},
			{"bad", "x"},
			{"space", fmt.Sprintf(" %d", b)},
			{"empty-part", fmt.Sprintf("%d,,", b)},
			{"plus", fmt.Sprintf("+%d", b)},
			{"huge", strings.Join(huge, ",")},
			{"overflow", "99999999999999999999"},
			{"from", ""},
		}
		for i, c := range cases {
			compareBlast(t, held, New(dbA, nil), ids) // warm
			// The odd row, and (but for huge, which names b itself) one
			// naming b, as a writer would.
			rows := [][3]any{{6, 0, c.kind}}
			if c.name == "from" {
				rows = [][3]any{{6, b, ""}}
			}
			if c.name != "huge" && c.name != "from" {
				rows = append(rows, [3]any{6, 0, fmt.Sprint(b)})
			}
			rawTitle(t, dbB, "kafka://prod/b", fmt.Sprintf("t%d", i), rows)
			before := held.IndexStats()
			fresh := blastTitles(t, New(dbA, nil), "kafka://prod/a")["kafka://prod/b"]
			got := blastTitles(t, held, "kafka://prod/a")["kafka://prod/b"]
			t.Logf("%s: %+v -> %+v", c.name, before, held.IndexStats())
			// A row naming b for sure must drop it; any other may keep the
			// table but then must not answer the old title.
			if got != fresh {
				t.Errorf("%s: held title %q, fresh %q", c.name, got, fresh)
			}
			compareBlast(t, held, New(dbA, nil), ids)
		}
	})
}

// TestUnparsableFactsRowBesideAnother: a version with a Facts row that
// does not parse is not counted, whatever its other Facts rows say: the
// holder drops its names (from a review: the version counted, and what
// the bad row meant was never dropped).
func TestUnparsableFactsRowBesideAnother(t *testing.T) {
	storetest.EachTwice(t, func(t *testing.T, dbA, dbB *store.DB) {
		ctx := context.Background()
		held, _ := newGraph(t, dbA)
		writer, _ := newGraph(t, dbB)
		if _, err := writer.RecordLineage(ctx, Note{Path: []string{"kafka://prod/a", "kafka://prod/b"}}); err != nil {
			t.Fatal(err)
		}
		_ = blastTitles(t, held, "kafka://prod/a")
		b := seqOf(t, dbB, "kafka://prod/b")
		rawTitle(t, dbB, "kafka://prod/b", "new", [][3]any{{6, 0, fmt.Sprintf("%d,x", b)}, {6, 0, ""}})
		if got, want := blastTitles(t, held, "kafka://prod/a")["kafka://prod/b"], "new"; got != want {
			t.Fatalf("held title %q, fresh %q (%+v)", got, want, held.IndexStats())
		}
	})
}
