package changelog

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
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

// On SQLite the window's keys are one range scan of the covering index
// (migration 0015), with no lookup of each row in the table.
func TestEachKeyInWindowReadsOnlyTheCoveringIndex(t *testing.T) {
	db := storetest.SQLite(t)
	rows, err := db.QueryContext(context.Background(), "EXPLAIN QUERY PLAN "+keyWindowQuery, int64(1), int64(2))
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
