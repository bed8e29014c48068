package checks

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/dataworkers/dw/internal/clock"
	"github.com/dataworkers/dw/internal/store"
	"github.com/dataworkers/dw/internal/store/storetest"
	"github.com/dataworkers/dw/internal/warehouse"
)

// TestRowBoundsAreWholeCounts: min_rows and max_rows are counts of rows.
// A fraction, a negative number, or one past 2^53 (where 2^53+1 already
// reads as 2^53) is refused naming the field, and nothing is stored; 0 and
// 2^53 itself are kept.
func TestRowBoundsAreWholeCounts(t *testing.T) {
	wh := openFixture(t)
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		env := Env{DB: db, Warehouse: wh, Clock: clock.NewFake(day.Add(5 * time.Hour))}
		set := func(lo, hi *float64) error {
			_, err := SetExpectations(ctx, env, ExpectationsRequest{Table: "shop.events", Expectations: Expectations{MinRows: lo, MaxRows: hi}})
			return err
		}
		for _, c := range []struct {
			name   string
			lo, hi *float64
			field  string
		}{
			{"1e308", nil, f64(1e308), "max_rows"},
			{"2^63", f64(math.Exp2(63)), nil, "min_rows"},
			{"2^53+2", nil, f64(math.Exp2(53) + 2), "max_rows"},
			{"a fraction", f64(1.5), nil, "min_rows"},
			{"a negative count", f64(-1), nil, "min_rows"},
			{"infinity", nil, f64(math.Inf(1)), "max_rows"},
		} {
			err := set(c.lo, c.hi)
			if err == nil || !strings.HasPrefix(err.Error(), c.field+" ") || !strings.Contains(err.Error(), "whole number from 0 to 9007199254740992") {
				t.Errorf("%s: %v, want an error naming %s and the valid range", c.name, err, c.field)
			}
		}
		stored, _, err := LoadExpectations(ctx, db, "test", warehouse.TableRef{Schema: "shop", Name: "events"})
		if err != nil || stored != nil {
			t.Fatalf("refused bounds were stored: %+v, %v", stored, err)
		}
		if err := set(f64(0), f64(math.Exp2(53))); err != nil {
			t.Fatalf("0 and 2^53: %v", err)
		}
		stored, _, err = LoadExpectations(ctx, db, "test", warehouse.TableRef{Schema: "shop", Name: "events"})
		if err != nil || stored == nil || *stored.MinRows != 0 || *stored.MaxRows != math.Exp2(53) {
			t.Fatalf("stored %+v, %v", stored, err)
		}
	})
}

// TestRequestedRowCountBoundsAreWholeCounts: a row_count check asked of
// Plan directly is held to the same rule.
func TestRequestedRowCountBoundsAreWholeCounts(t *testing.T) {
	wh := openFixture(t)
	tbl := resolve(t, wh, "shop.events")
	_, err := Plan(tbl, wh.Dialect(), []Spec{{Kind: KindRowCount, Min: f64(0.5)}}, Window{})
	if err == nil || !strings.HasPrefix(err.Error(), "row_count check: min 0.5 is not a row count") {
		t.Fatalf("row_count min 0.5: %v", err)
	}
	if _, err := Plan(tbl, wh.Dialect(), []Spec{{Kind: KindRowCount, Min: f64(3), Max: f64(4)}}, Window{}); err != nil {
		t.Fatalf("row_count 3..4: %v", err)
	}
}
