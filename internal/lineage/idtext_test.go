package lineage

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/dataworkers/dw/internal/lineage/lineagetest"
	"github.com/dataworkers/dw/internal/store"
	"github.com/dataworkers/dw/internal/store/storetest"
)

// The asset id text rule, character by character: what it refuses, where,
// and that the invalid-UTF-8 case is told apart from an encoded U+FFFD.
func TestCheckIDText(t *testing.T) {
	cases := []struct {
		in      string
		ok      bool
		r       rune
		pos     int
		badUTF8 bool
	}{
		{"airflow://dag/sync_metered_usage_to_stripe", true, 0, 0, false},
		{"duckdb://warehouse.sales.orders", true, 0, 0, false},
		{`snowflake://analytics."usage".t`, true, 0, 0, false},
		{"kafka://prod/café-ünïcode", true, 0, 0, false},     // letters outside ASCII are text
		{"bigquery://p.d.表", true, 0, 0, false},              // so are CJK names
		{"openlineage://ns/a b", true, 0, 0, false},          // a space is visible
		{"s3://bucket/non\u00a0breaking", true, 0, 0, false}, // a no-break space too (Zs)
		{"", true, 0, 0, false},
		{"duckdb://a\x00b", false, 0x00, 11, false},
		{"x\x1b[2K", false, 0x1b, 2, false},
		{"line1\nbilling.fake", false, '\n', 6, false},
		{"a\rb", false, '\r', 2, false},
		{"tab\there", false, '\t', 4, false},
		{"del\x7f", false, 0x7f, 4, false},
		{"c1\u0085", false, 0x85, 3, false},   // NEL
		{"c1\u009b2K", false, 0x9b, 3, false}, // CSI
		{"airflow://dag/sync_metered_usage_to_stripe\u200b", false, 0x200b, 43, false},
		{"é\u200cx", false, 0x200c, 2, false},
		{"\u200dx", false, 0x200d, 1, false},
		{"a\u200eb", false, 0x200e, 2, false},
		{"a\u200fb", false, 0x200f, 2, false},
		{"a\u202ab", false, 0x202a, 2, false},
		{"a\u202eb", false, 0x202e, 2, false}, // right-to-left override
		{"a\u2060b", false, 0x2060, 2, false},
		{"a\u2064b", false, 0x2064, 2, false},
		{"a\u2066b", false, 0x2066, 2, false},
		{"a\u2069b", false, 0x2069, 2, false},
		{"\ufeffkafka://prod/a", false, 0xfeff, 1, false},
		{"soft\u00adhyphen", false, 0xad, 5, false},
		{"a\u2028b", false, 0x2028, 2, false},
		{"a\u2029b", false, 0x2029, 2, false},
		{"a\U000e0001b", false, 0xe0001, 2, false}, // language tag (Cf)
		{"bad\xffutf8", false, 0xfffd, 4, true},
		{"ü\xc3", false, 0xfffd, 2, true}, // truncated sequence
		{"replacement\ufffd", false, 0xfffd, 12, false},
	}
	for _, c := range cases {
		err := CheckIDText("targets[0]", c.in)
		if c.ok {
			if err != nil {
				t.Errorf("%q refused: %v", c.in, err)
			}
			continue
		}
		te, ok := errors.AsType[*IDTextError](err)
		if !ok {
			t.Errorf("%q: want *IDTextError, got %v", c.in, err)
			continue
		}
		if te.Field != "targets[0]" || te.Rune != c.r || te.Pos != c.pos || te.BadUTF8 != c.badUTF8 {
			t.Errorf("%q: got field %s rune U+%04X pos %d bad %v; want U+%04X pos %d bad %v", c.in, te.Field, te.Rune, te.Pos, te.BadUTF8, c.r, c.pos, c.badUTF8)
		}
	}
}

// Ids made from a spelling (CanonicalID, Names.Canonical, which proposal
// targets go through, Graph.CanonicalAsset) follow the rule.
func TestCanonicalRefusesIDText(t *testing.T) {
	names := namesOf(duckWH)
	for _, ref := range []string{"airflow://dag/sync_metered_usage_to_stripe\u200b", "duckdb://a\x00b", "kafka://prod/evil\x1b[2K", "sales.or\u202eders", `"sales"."or` + "\n" + `ders"`} {
		if _, err := CanonicalID(ref); !isIDText(err) {
			t.Errorf("CanonicalID(%q): %v", ref, err)
		}
		if _, err := names.Canonical(ref); !isIDText(err) {
			t.Errorf("Names.Canonical(%q): %v", ref, err)
		}
	}
	// Surrounding whitespace is trimmed first, as for every spelling.
	if id, err := CanonicalID(" airflow://dag/sync \n"); err != nil || id != "airflow://dag/sync" {
		t.Errorf("trimmed id: %q, %v", id, err)
	}
}

func isIDText(err error) bool {
	_, ok := errors.AsType[*IDTextError](err)
	return ok
}

// record_lineage's note and any other caller of the Writer: an id, alias or
// path entry the rule refuses is an error naming its field, and nothing is
// written.
func TestRecordLineageRefusesIDText(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		g, _ := newGraph(t, db)
		buildBillingStory(t, g)
		before := lineagetest.GraphDump(t, db)
		cases := []struct {
			note  Note
			field string
		}{
			{Note{Assets: []NoteAsset{{ID: "duckdb://a\x00b"}}}, "assets[0].id"},
			{Note{Assets: []NoteAsset{{ID: "airflow://dag/sync_metered_usage_to_stripe\u200b"}}}, "assets[0].id"},
			{Note{Assets: []NoteAsset{{ID: "sigma://w", Aliases: []string{"dbt://exposure.billing.x\u202e"}}}}, "assets[0].aliases[0]"},
			{Note{Path: []string{"kafka://prod/api-usage", "flink://evil\x1b[2K\x1b[1A\rrollup"}}, "path[1]"},
			{Note{Edges: []NoteEdge{{From: "kafka://prod/line1\nbilling.fake", To: "flink://x"}}}, "edges[0].from"},
			{Note{Edges: []NoteEdge{{From: "kafka://prod/a", To: "flink://\xffx"}}}, "edges[0].to"},
		}
		for i, c := range cases {
			_, err := g.RecordLineage(ctx, c.note)
			if !isIDText(err) || !strings.HasPrefix(err.Error(), c.field+": ") {
				t.Errorf("case %d: %v, want an id text error under %s", i, err, c.field)
			}
		}
		// The writer refuses the same text from any other source.
		_, err := g.Write(ctx, func(w *Writer) error {
			_, err := w.UpsertAsset(&AssetInput{ID: "kafka://prod/ok", Names: []string{"openlineage://ns/ok\u200b"}})
			return err
		})
		if te, ok := errors.AsType[*IDTextError](err); !ok || te.Field != "asset name" || te.Rune != 0x200b {
			t.Errorf("UpsertAsset with a bad name: %v", err)
		}
		_, err = g.Write(ctx, func(w *Writer) error {
			_, err := w.UpsertAssets([]*AssetInput{{ID: "kafka://prod/ok2"}, {ID: "kafka://prod/\x1b"}})
			return err
		})
		if te, ok := errors.AsType[*IDTextError](err); !ok || te.Field != "asset id" || te.Rune != 0x1b {
			t.Errorf("UpsertAssets with a bad id: %v", err)
		}
		if after := lineagetest.GraphDump(t, db); !slices.Equal(before, after) {
			t.Errorf("refused ids changed the graph")
		}
	})
}
