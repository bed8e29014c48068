package changelog

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/dataworkers/dw/internal/clock"
	"github.com/dataworkers/dw/internal/store"
	"github.com/dataworkers/dw/internal/store/storetest"
)

// A change over the asset or field cap is refused, naming the argument and
// the cap, and nothing is written; one at the caps is recorded whole and
// answered with its first assets, fields and details and their totals; a
// page of such changes ends early and the next page continues after it.
func TestWideChangesAreCappedAndBounded(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		s := &Log{DB: db, Clock: clock.NewFake(tue(15, 0))}
		wide := func(i, assets, fields int) RecordChangeParams {
			p := RecordChangeParams{At: tue(14, 5), Kind: "deploy", System: "dbt", Summary: fmt.Sprintf("wide deploy %d", i),
				Details: map[string]string{}}
			for j := range assets {
				p.Assets = append(p.Assets, fmt.Sprintf("dbt://model.billing.m%04d", j))
			}
			for j := range fields {
				p.Fields = append(p.Fields, FieldChange{Name: fmt.Sprintf("c%04d", j), How: FieldRemoved})
			}
			for j := range MaxChangeDetails {
				p.Details[fmt.Sprintf("k%03d", j)] = strings.Repeat("v", 100)
			}
			return p
		}
		for _, c := range []struct {
			p    RecordChangeParams
			want string
		}{
			{wide(0, MaxChangeAssets+1, 1), "assets names 501 assets; a change names at most 500"},
			{wide(0, 1, MaxChangeFields+1), "fields names 501 fields; a change names at most 500"},
		} {
			if _, err := s.RecordChange(ctx, c.p); err == nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%v, want %q", err, c.want)
			}
		}
		if list, err := s.ListChanges(ctx, ChangeFilter{}); err != nil || list.Total != 0 {
			t.Fatalf("refused changes were recorded: %v %v", list, err)
		}

		const n = 60
		for i := range n {
			res, err := s.RecordChange(ctx, wide(i, MaxChangeAssets, MaxChangeFields))
			if err != nil {
				t.Fatal(err)
			}
			res.Bound()
			c := res.Change
			if c.AssetsTotal != MaxChangeAssets || c.FieldsTotal != MaxChangeFields || c.DetailsTotal != MaxChangeDetails ||
				len(c.Assets) == 0 || len(c.Assets) > listedAssets || len(c.Fields) > listedFields || len(c.Details) > listedDetails {
				t.Fatalf("answered change: %d of %d assets, %d of %d fields, %d of %d details", len(c.Assets), c.AssetsTotal,
					len(c.Fields), c.FieldsTotal, len(c.Details), c.DetailsTotal)
			}
			// The log keeps it whole.
			if whole, _, err := ByID(ctx, db, c.ID); err != nil || len(whole.Assets) != MaxChangeAssets || len(whole.Fields) != MaxChangeFields {
				t.Fatalf("stored change: %d assets, %d fields, %v", len(whole.Assets), len(whole.Fields), err)
			}
		}
		f := ChangeFilter{}
		f.Limit = 500
		seen := map[int64]bool{}
		pages := 0
		for {
			list, err := s.ListChanges(ctx, f)
			if err != nil {
				t.Fatal(err)
			}
			pages++
			if pages == 1 && (len(list.Changes) >= n || list.NextCursor == "") {
				t.Errorf("the first page of %d wide changes lists %d, next_cursor %q", n, len(list.Changes), list.NextCursor)
			}
			for _, c := range list.Changes {
				if seen[c.ID] || c.AssetsTotal != MaxChangeAssets {
					t.Errorf("change %d listed twice or unbounded (%d assets)", c.ID, len(c.Assets))
				}
				seen[c.ID] = true
			}
			if list.NextCursor == "" {
				break
			}
			f.Cursor = list.NextCursor
		}
		if len(seen) != n {
			t.Errorf("%d pages listed %d of %d changes", pages, len(seen), n)
		}
	})
}

// FitFields keeps the fields that break readers first, within the cap,
// and says how many it left out.
func TestFitFieldsKeepsBreakingFieldsFirst(t *testing.T) {
	var fs []FieldChange
	for i := range MaxChangeFields {
		fs = append(fs, FieldChange{Name: fmt.Sprintf("added_%d", i), How: FieldAdded})
	}
	fs = append(fs, FieldChange{Name: "gone", How: FieldRemoved})
	got, details := FitFields(fs, nil)
	if len(got) != MaxChangeFields || got[0].Name != "gone" || !strings.HasPrefix(details["fields_omitted"], "1 more") {
		t.Errorf("kept %d, first %s, details %v", len(got), got[0].Name, details)
	}
	if got, d := FitFields(fs[:3], nil); len(got) != 3 || d != nil {
		t.Errorf("a short list was changed: %v %v", got, d)
	}
}
