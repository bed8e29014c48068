package store_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/dataworkers/dw/internal/store"
	"github.com/dataworkers/dw/internal/store/storetest"
)

// Strings reads one text column in the rows' order, with the query's
// arguments bound on either engine, and nil for no rows.
func TestStrings(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		at := time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)
		for _, k := range []string{"b.two", "a.one", "b.one", "c.one"} {
			if err := store.PutSetting(ctx, db, k, "v", at); err != nil {
				t.Fatal(err)
			}
		}
		got, err := store.Strings(ctx, db, `SELECT key FROM kv WHERE key LIKE ? ORDER BY key DESC`, "b.%")
		if err != nil || !slices.Equal(got, []string{"b.two", "b.one"}) {
			t.Fatalf("got %v, %v", got, err)
		}
		if got, err := store.Strings(ctx, db, `SELECT key FROM kv WHERE key = ?`, "none"); err != nil || got != nil {
			t.Fatalf("no rows: %#v, %v", got, err)
		}
		if _, err := store.Strings(ctx, db, `SELECT no_such_column FROM kv`); err == nil {
			t.Fatal("a bad query gave no error")
		}
	})
}
