package changelog

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/dataworkers/dw/internal/clock"
	"github.com/dataworkers/dw/internal/store"
	"github.com/dataworkers/dw/internal/store/storetest"
)

// keysIn is EachKeyInWindow's rows, each kept as a change with only
// those fields (Fields empty, not nil, when the key says it has none).
func keysIn(t *testing.T, db *store.DB, from, to time.Time) []Change {
	t.Helper()
	var out []Change
	if err := EachKeyInWindow(context.Background(), db, from, to, func(k *Key) error {
		out = append(out, Change{ID: k.ID, At: k.At, Kind: k.Kind, Assets: slices.Clone(k.Assets), StateSkipped: k.StateSkipped})
		if k.NoFields {
			out[len(out)-1].Fields = []FieldChange{}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// EachKeyInWindow reads the same changes as LoadWindow, in the same order,
// with the same ids, times, kinds, assets (as stored, escaped or not) and
// state_skipped, and says which list no field changes.
func TestEachKeyInWindowMatchesLoadWindow(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		s := &Log{DB: db, Clock: clock.NewFake(tue(15, 0))}
		for i, p := range []RecordChangeParams{
			schemaV12(),
			{At: tue(13, 0), Kind: "deploy", System: "flink", Assets: []string{"flink://a", "kafka://prod/b"}, Summary: "two assets"},
			{At: tue(13, 0), Kind: "deploy", System: "flink", Assets: []string{"flink://c"}, Summary: "same time, a later id"},
			{At: tue(13, 30), Kind: "restore", System: "flink", Assets: []string{`kafka://prod/odd"name<x>`}, StateSkipped: true, Summary: "escaped id"},
			{At: tue(9, 0), Kind: "config", System: "kafka", Assets: []string{"kafka://prod/old"}, Summary: "outside the window"},
		} {
			if _, err := s.RecordChange(ctx, p); err != nil {
				t.Fatalf("record %d: %v", i, err)
			}
		}
		from, to := tue(12, 0), tue(15, 0)
		full, err := LoadWindow(ctx, db, from, to)
		if err != nil {
			t.Fatal(err)
		}
		keys := keysIn(t, db, from, to)
		if len(full) != 4 || len(keys) != len(full) {
			t.Fatalf("window holds %d changes in full, %d keys; want 4 each", len(full), len(keys))
		}
		for i, c := range full {
			want := Change{ID: c.ID, At: c.At, Kind: c.Kind, Assets: c.Assets, StateSkipped: c.StateSkipped}
			if len(c.Fields) == 0 {
				want.Fields = []FieldChange{}
			}
			if !reflect.DeepEqual(keys[i], want) {
				t.Errorf("change %d keys %+v, want %+v", i, keys[i], want)
			}
		}
	})
}

func TestPlainStrings(t *testing.T) {
	for in, want := range map[string][]string{
		`[]`:                  {},
		`["a"]`:               {"a"},
		`["a,b", "c"]`:        {"a,b", "c"},
		`["a\"b"]`:            nil, // escapes are decoded in full
		`["a",]`:              nil,
		`[1]`:                 nil,
		`["a" "b"]`:           nil,
		`x`:                   nil,
		`["kafka://p/t", ""]`: {"kafka://p/t", ""},
	} {
		if got, ok := plainStrings(nil, in); ok != (want != nil) || !reflect.DeepEqual(got, want) {
			t.Errorf("plainStrings(%s) = %#v, want %#v", in, got, want)
		}
	}
}

// queryPlan is SQLite's plan for query, a line per step.
func queryPlan(t *testing.T, db *store.DB, query string, args ...any) []string {
	t.Helper()
	rows, err := db.QueryContext(context.Background(), "EXPLAIN QUERY PLAN "+query, args...)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var details []string
	for rows.Next() {
		var id, parent, notUsed int
		var detail string
		if err := rows.Scan(&id, &parent, &notUsed, &detail); err != nil {
			t.Fatal(err)
		}
		details = append(details, detail)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return details
}

// On SQLite the window's keys are one range scan of the covering index
// (migration 0015), with no lookup of each row in the table.
func TestEachKeyInWindowReadsOnlyTheCoveringIndex(t *testing.T) {
	details := queryPlan(t, storetest.SQLite(t), keyWindowQuery, int64(1), int64(2))
	want := []string{"SEARCH incident_changes USING COVERING INDEX incident_changes_at_brief (at_ms>? AND at_ms<?)"}
	if !reflect.DeepEqual(details, want) {
		t.Errorf("plan %q, want %q", details, want)
	}
}

// A change may touch any number of assets. The covering index exists on
// SQLite only: on PostgreSQL a B-tree entry this long (over 2.7 kB of
// incompressible asset ids) would make recording the change fail.
func TestRecordChangeTouchingManyAssetsOnBoth(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		s := &Log{DB: db, Clock: clock.NewFake(tue(15, 0))}
		var assets []string
		for i := range 80 {
			assets = append(assets, fmt.Sprintf("kafka://prod/t%x", sha256.Sum256([]byte{byte(i)})))
		}
		if _, err := s.RecordChange(ctx, RecordChangeParams{At: tue(13, 0), Kind: "deploy", System: "flink", Assets: assets, Summary: "wide deploy"}); err != nil {
			t.Fatalf("record a change touching %d assets: %v", len(assets), err)
		}
		keys := keysIn(t, db, tue(12, 0), tue(15, 0))
		if len(keys) != 1 || !reflect.DeepEqual(keys[0].Assets, assets) {
			t.Fatalf("window read %d changes; want the one with its %d assets", len(keys), len(assets))
		}
	})
}

// Whatever plainStrings decodes, encoding/json decodes the same way.
func FuzzPlainStrings(f *testing.F) {
	for _, s := range []string{`[]`, `["a"]`, `["a,b", "c"]`, `["kafka://p/t", ""]`, "[\v]", `[ "a" , "b" ]`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, ok := plainStrings(nil, s)
		if !ok {
			return
		}
		var want []string
		if err := json.Unmarshal([]byte(s), &want); err != nil {
			t.Fatalf("plainStrings(%q) decoded %#v, encoding/json refuses it: %v", s, got, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("plainStrings(%q) = %#v, encoding/json %#v", s, got, want)
		}
	})
}

// keysOn is EachKeyOnAssets's rows as keysIn keeps them, by id.
func keysOn(t *testing.T, db *store.DB, assets []string, from, to time.Time) []Change {
	t.Helper()
	var out []Change
	whole, err := EachKeyOnAssets(context.Background(), db, assets, from, to, math.MaxInt, func(k *Key) error {
		out = append(out, Change{ID: k.ID, At: k.At, Kind: k.Kind, Assets: slices.Clone(k.Assets), StateSkipped: k.StateSkipped})
		if k.NoFields {
			out[len(out)-1].Fields = []FieldChange{}
		}
		return nil
	})
	if err != nil || !whole {
		t.Fatalf("EachKeyOnAssets: whole %v, %v", whole, err)
	}
	slices.SortFunc(out, func(a, b Change) int { return cmp.Compare(a.ID, b.ID) })
	return out
}

// EachKeyOnAssets reads, once each, exactly the window's changes that
// touched a listed asset, with the keys EachKeyInWindow reads for them;
// CountWindow counts the window and names its last id. Seeded random logs:
// changes on one to five assets of a small pool (so changes share assets,
// and a change may list an asset twice), times on the window's edges and
// around them, escaped ids, any list of assets (with repeats, unknown ones
// and none).
func TestEachKeyOnAssetsMatchesTheWindow(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		rng := rand.New(rand.NewPCG(3, 4))
		s := &Log{DB: db, Clock: clock.NewFake(tue(23, 0))}
		pool := []string{"kafka://prod/a", "kafka://prod/b", `kafka://prod/odd"name<x>`, "flink://j", "bq://p.d.t", "schema://s-value"}
		from, to := tue(12, 0), tue(15, 0)
		times := []time.Time{from, from.Add(-time.Millisecond), from.Add(time.Millisecond), to, to.Add(-time.Millisecond), tue(13, 0), tue(9, 0), tue(20, 0)}
		for i := range 120 {
			var assets []string
			for range 1 + rng.IntN(5) {
				assets = append(assets, pool[rng.IntN(len(pool))])
			}
			kind := ChangeKinds[rng.IntN(len(ChangeKinds))]
			p := RecordChangeParams{At: times[rng.IntN(len(times))], Kind: string(kind), System: "s",
				Assets: assets, StateSkipped: kind == ChangeRestore && rng.IntN(2) == 0, Summary: fmt.Sprintf("change %d", i)}
			if rng.IntN(3) == 0 {
				p.Fields = []FieldChange{{Name: "f", How: FieldRemoved}}
			}
			if _, err := s.RecordChange(ctx, p); err != nil {
				t.Fatalf("record %d: %v", i, err)
			}
		}
		window := keysIn(t, db, from, to)
		n, last, err := CountWindow(ctx, db, from, to)
		if err != nil || n != len(window) || n == 0 || last != 120 {
			t.Fatalf("CountWindow = %d, last id %d (%v); the window holds %d changes of 120", n, last, err, len(window))
		}
		if n, last, err := CountWindow(ctx, db, tue(1, 0), tue(2, 0)); err != nil || n != 0 || last != 120 {
			t.Fatalf("an empty window counts %d, last id %d (%v)", n, last, err)
		}
		for trial := range 40 {
			var listed []string
			for range rng.IntN(5) {
				// Ids no change can have (CleanAsset refuses them) are left out.
				listed = append(listed, append(pool, "kafka://prod/none", "kafka://prod/\xff", "kafka://prod/a\x00")[rng.IntN(len(pool)+3)])
			}
			var want []Change
			for _, c := range window {
				if slices.ContainsFunc(c.Assets, func(a string) bool { return slices.Contains(listed, a) }) {
					want = append(want, c)
				}
			}
			slices.SortFunc(want, func(a, b Change) int { return cmp.Compare(a.ID, b.ID) })
			if got := keysOn(t, db, listed, from, to); !reflect.DeepEqual(got, want) {
				t.Fatalf("trial %d, assets %q: %d keys, want %d:\n%+v\nwant\n%+v", trial, listed, len(got), len(want), got, want)
			}
			// maxRows counts a row for each listed asset a change touched;
			// over it, no key is read.
			rows := 0
			for _, c := range want {
				for _, a := range pool {
					if slices.Contains(c.Assets, a) && slices.Contains(listed, a) {
						rows++
					}
				}
			}
			for _, most := range []int{rows, rows - 1} {
				if most < 0 {
					continue
				}
				called := 0
				whole, err := EachKeyOnAssets(ctx, db, listed, from, to, most, func(*Key) error { called++; return nil })
				if err != nil || whole != (most == rows) || whole && called != len(want) || !whole && called != 0 {
					t.Fatalf("trial %d, assets %q, %d rows of %d changes, maxRows %d: whole %v, %d calls, %v", trial, listed, rows, len(want), most, whole, called, err)
				}
			}
		}
	})
}

// On SQLite the changes on a list of assets are a seek per asset into
// incident_change_assets_at for their times and ids, then a seek per
// change, in the pairs' order, into the covering index the window's read
// scans; the count reads only the time index, and the log's size is its
// last rowid.
func TestEachKeyOnAssetsSeeksTheAssetIndex(t *testing.T) {
	db := storetest.SQLite(t)
	for _, c := range []struct {
		query string
		args  []any
		want  []string
	}{
		{assetPairsSQLite, []any{`["a","b"]`, int64(1), int64(2), int64(10)}, []string{
			"SCAN j VIRTUAL TABLE INDEX 1:",
			"SEARCH ca USING COVERING INDEX incident_change_assets_at (asset=? AND at_ms>? AND at_ms<?)",
		}},
		{keyPairsSQLite, []any{`[[1,2],[3,4]]`}, []string{
			"SCAN p VIRTUAL TABLE INDEX 1:",
			"SEARCH c USING COVERING INDEX incident_changes_at_brief (at_ms=? AND id=?)",
		}},
		{countWindowQuery, []any{int64(1), int64(2)}, []string{"SEARCH incident_changes USING COVERING INDEX incident_changes_at (at_ms>? AND at_ms<?)",
			"SCALAR SUBQUERY 1", "SEARCH incident_changes"}}, // the highest rowid: one descent
	} {
		if details := queryPlan(t, db, c.query, c.args...); !reflect.DeepEqual(details, c.want) {
			t.Errorf("plan %q, want %q", details, c.want)
		}
	}
}

// A store whose changes were recorded before migration 0018 gets their
// times in the asset index when it is next opened, and so does a change a
// writer from before it records afterwards, on both engines.
func TestAssetIndexTimesFilledOnMigration(t *testing.T) {
	storetest.EachOpener(t, func(t *testing.T, open func() (*store.DB, error)) {
		ctx := context.Background()
		old, err := open()
		if err != nil {
			t.Fatal(err)
		}
		// Back to the schema before 0018, written as the code before it wrote.
		undo := []string{"DROP TRIGGER incident_change_assets_at_fill"}
		if old.Dialect() == store.Postgres {
			undo = []string{"DROP TRIGGER incident_change_assets_at_fill ON incident_change_assets", "DROP FUNCTION incident_change_assets_at_fill()"}
		}
		for _, q := range append(undo,
			"DROP INDEX incident_change_assets_at",
			"ALTER TABLE incident_change_assets DROP COLUMN at_ms",
			"DELETE FROM schema_migrations WHERE version = 18",
		) {
			if _, err := old.ExecContext(ctx, q); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		}
		var ids []int64
		for i, at := range []time.Time{tue(13, 0), tue(14, 0), tue(9, 0)} {
			var id int64
			if err := old.QueryRowContext(ctx, `INSERT INTO incident_changes (external_key, at_ms, kind, system, assets, fields, state_skipped, actor, source, summary, details, recorded_ms)
				VALUES (NULL, ?, 'deploy', 's', '["kafka://prod/a"]', '[]', 0, '', '', ?, '{}', 0) RETURNING id`, store.Millis(at), fmt.Sprint(i)).Scan(&id); err != nil {
				t.Fatal(err)
			}
			if _, err := old.ExecContext(ctx, "INSERT INTO incident_change_assets (asset, change_id) VALUES ('kafka://prod/a', ?)", id); err != nil {
				t.Fatal(err)
			}
			ids = append(ids, id)
		}
		old.Close()
		db, err := open()
		if err != nil {
			t.Fatalf("migrate: %v", err)
		}
		defer db.Close()
		got := keysOn(t, db, []string{"kafka://prod/a"}, tue(12, 0), tue(15, 0))
		if len(got) != 2 || got[0].ID != ids[0] || got[1].ID != ids[1] {
			t.Fatalf("after the migration the asset's window holds %+v, want changes %d and %d", got, ids[0], ids[1])
		}
		// A writer from before the migration, still running, records
		// another change as it did: its asset row gets its time.
		var id int64
		if err := db.QueryRowContext(ctx, `INSERT INTO incident_changes (external_key, at_ms, kind, system, assets, fields, state_skipped, actor, source, summary, details, recorded_ms)
			VALUES (NULL, ?, 'deploy', 's', '["kafka://prod/a"]', '[]', 0, '', '', 'late', '{}', 0) RETURNING id`, store.Millis(tue(14, 30))).Scan(&id); err != nil {
			t.Fatal(err)
		}
		if _, err := db.ExecContext(ctx, "INSERT INTO incident_change_assets (asset, change_id) VALUES ('kafka://prod/a', ?)", id); err != nil {
			t.Fatal(err)
		}
		got = keysOn(t, db, []string{"kafka://prod/a"}, tue(12, 0), tue(15, 0))
		if len(got) != 3 || got[2].ID != id {
			t.Fatalf("a change recorded as before the migration is not in its asset's window: %+v", got)
		}
	})
}
