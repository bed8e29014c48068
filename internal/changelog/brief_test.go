package changelog

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"reflect"
	"testing"

	"github.com/dataworkers/dw/internal/clock"
	"github.com/dataworkers/dw/internal/store"
	"github.com/dataworkers/dw/internal/store/storetest"
)

// LoadWindowBrief reads the same changes as LoadWindow, in the same order,
// with the same ranking facts (assets as stored, escaped or not), and
// leaves the words out.
func TestLoadWindowBriefMatchesLoadWindow(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		s := &Log{DB: db, Clock: clock.NewFake(tue(15, 0))}
		for i, p := range []RecordChangeParams{
			schemaV12(),
			{At: tue(13, 0), Kind: "deploy", System: "flink", Assets: []string{"flink://a", "kafka://prod/b"}, Summary: "two assets"},
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
		brief, err := LoadWindowBrief(ctx, db, from, to)
		if err != nil {
			t.Fatal(err)
		}
		if len(full) != 3 || len(brief) != len(full) {
			t.Fatalf("window holds %d changes in full, %d brief; want 3 each", len(full), len(brief))
		}
		for i, c := range full {
			want := Change{ID: c.ID, At: c.At, Kind: c.Kind, Assets: c.Assets, Fields: c.Fields, StateSkipped: c.StateSkipped}
			if !reflect.DeepEqual(brief[i], want) {
				t.Errorf("change %d brief %+v, want %+v", i, brief[i], want)
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

// On SQLite the brief window read is one range scan of the covering index
// (migration 0015), with no lookup of each row in the table.
func TestLoadWindowBriefReadsOnlyTheCoveringIndex(t *testing.T) {
	db := storetest.SQLite(t)
	rows, err := db.QueryContext(context.Background(), "EXPLAIN QUERY PLAN "+briefWindowQuery, int64(1), int64(2))
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
		brief, err := LoadWindowBrief(ctx, db, tue(12, 0), tue(15, 0))
		if err != nil {
			t.Fatal(err)
		}
		if len(brief) != 1 || !reflect.DeepEqual(brief[0].Assets, assets) {
			t.Fatalf("window read %d changes; want the one with its %d assets", len(brief), len(assets))
		}
	})
}

func TestPlainFields(t *testing.T) {
	for in, want := range map[string][]FieldChange{
		`[]`:   {},
		`[ ]`:  {},
		`[{}]`: {{}},
		`[{"asset":"kafka://p/t","name":"amount","how":"removed"}]`: {{Asset: "kafka://p/t", Name: "amount", How: FieldRemoved}},
		`[{"name":"a","how":"renamed","new_name":"b","detail":"x -> y"}, {"name":"c","how":"added"}]`: {
			{Name: "a", How: FieldRenamed, NewName: "b", Detail: "x -> y"}, {Name: "c", How: FieldAdded}},
		`[{"name":"a","name":"b"}]`:      {{Name: "b"}}, // the last of a repeated key, as encoding/json
		`[{"Name":"a"}]`:                 nil,           // keys in another case are left to encoding/json
		`[{"name":"a","extra":"x"}]`:     nil,
		`[{"name":"a\"b"}]`:              nil,
		`[{"name":null}]`:                nil,
		`[{"name":"a"},]`:                nil,
		`[{"name":"a"} {"name":"b"}]`:    nil,
		`[{"name":"a",}]`:                nil,
		"[{\"name\":\"a\tb\"}]":          nil,
		"[{\"name\":\"\xff\"}]":          nil,
		`null`:                           nil,
		`[{"name":"a"}`:                  nil,
		`[{"name":"a","how":"removed"}]`: {{Name: "a", How: FieldRemoved}},
	} {
		if got, ok := plainFields(nil, in); ok != (want != nil) || !reflect.DeepEqual(got, want) {
			t.Errorf("plainFields(%s) = %#v, want %#v", in, got, want)
		}
	}
}

// Whatever plainFields decodes, encoding/json decodes the same way: it
// only takes the common case off encoding/json's hands.
func FuzzPlainFields(f *testing.F) {
	for _, s := range []string{`[]`, `[{"asset":"kafka://p/t","name":"amount","how":"removed"}]`,
		`[{"name":"a","how":"renamed","new_name":"b"}, {"name":"c","how":"added","detail":"d"}]`, `[{}]`, `[{"name":"a","name":"b"}]`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, ok := plainFields(nil, s)
		if !ok {
			return
		}
		// Appended to what a buffer held, the same fields follow it.
		buf := []FieldChange{{Name: "earlier"}}
		if again, ok := plainFields(buf[:1], s); !ok || !reflect.DeepEqual(again[1:], got) || again[0].Name != "earlier" {
			t.Fatalf("plainFields(%q) after a field: %#v, alone %#v", s, again, got)
		}
		var want []FieldChange
		if err := json.Unmarshal([]byte(s), &want); err != nil {
			t.Fatalf("plainFields(%q) decoded %#v, encoding/json refuses it: %v", s, got, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("plainFields(%q) = %#v, encoding/json %#v", s, got, want)
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

// skip sees each change before its fields are decoded, and a change it
// skips never reaches fn; the others reach fn whole, in order.
func TestEachInWindowBriefSkip(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		s := &Log{DB: db, Clock: clock.NewFake(tue(15, 0))}
		for i, p := range []RecordChangeParams{
			schemaV12(),
			{At: tue(13, 0), Kind: "deploy", System: "flink", Assets: []string{"flink://a"}, Summary: "skipped"},
			{At: tue(13, 30), Kind: "restore", System: "flink", Assets: []string{"kafka://prod/b"}, StateSkipped: true, Summary: "kept"},
		} {
			if _, err := s.RecordChange(ctx, p); err != nil {
				t.Fatalf("record %d: %v", i, err)
			}
		}
		from, to := tue(12, 0), tue(15, 0)
		all, err := LoadWindowBrief(ctx, db, from, to)
		if err != nil {
			t.Fatal(err)
		}
		var asked []int64
		var got []Change
		err = EachInWindowBrief(ctx, db, from, to, func(c *Change) bool {
			if c.Fields != nil {
				t.Errorf("change %d: skip was given decoded fields %v", c.ID, c.Fields)
			}
			asked = append(asked, c.ID)
			return len(c.Assets) == 1 && c.Assets[0] == "flink://a"
		}, func(c *Change) error {
			got = append(got, *c.Clone())
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(all) != 3 || len(asked) != 3 {
			t.Fatalf("skip was asked about %d of %d changes", len(asked), len(all))
		}
		var want []Change
		for _, c := range all {
			if c.Assets[0] != "flink://a" {
				want = append(want, c)
			}
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("fn got %+v, want %+v", got, want)
		}
	})
}
