package changelog

import (
	"context"
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
		if got := plainStrings(in); !reflect.DeepEqual(got, want) {
			t.Errorf("plainStrings(%s) = %#v, want %#v", in, got, want)
		}
	}
}
