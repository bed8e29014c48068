package changelog

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/dataworkers/dw/internal/clock"
	"github.com/dataworkers/dw/internal/page"
	"github.com/dataworkers/dw/internal/store"
	"github.com/dataworkers/dw/internal/store/storetest"
)

func schemaV12() RecordChangeParams {
	return RecordChangeParams{
		Key: "schema-registry:api-usage-value:12", At: tue(14, 5), Kind: "schema_version", System: "schema-registry",
		Assets: []string{"schema://api-usage-value"},
		Fields: []FieldChange{{Name: "response_bytes", How: FieldRemoved}, {Name: "response_kib", How: FieldAdded}},
		Actor:  "gateway-team", Source: "dw-schema", Summary: "version 12 of schema://api-usage-value",
		Details: map[string]string{"version": "12", "compatibility": "BACKWARD"},
	}
}

func TestRecordChangeIdempotentByKey(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		s := &Log{DB: db, Clock: clock.NewFake(tue(15, 0))}
		first, err := s.RecordChange(ctx, schemaV12())
		if err != nil {
			t.Fatal(err)
		}
		if !first.Created || first.Change.ID == 0 {
			t.Fatalf("first recording: created=%v id=%d", first.Created, first.Change.ID)
		}
		// The registry poller sees the same version again, with a later
		// summary: nothing changes.
		again := schemaV12()
		again.Summary = "seen again"
		second, err := s.RecordChange(ctx, again)
		if err != nil {
			t.Fatal(err)
		}
		if second.Created || second.Change.ID != first.Change.ID || second.Change.Summary != first.Change.Summary {
			t.Fatalf("second recording = %+v; want the first record unchanged", second)
		}
		// Without a key, two recordings are two changes.
		noKey := schemaV12()
		noKey.Key = ""
		recordOK(t, s, noKey)
		recordOK(t, s, noKey)
		list, err := s.ListChanges(ctx, ChangeFilter{Asset: "schema://api-usage-value"})
		if err != nil {
			t.Fatal(err)
		}
		if len(list.Changes) != 3 {
			t.Fatalf("got %d changes, want 3", len(list.Changes))
		}
		got := list.Changes[len(list.Changes)-1]
		if got.Fields[0].Asset != "schema://api-usage-value" || got.Fields[0].How != FieldRemoved || got.Details["version"] != "12" {
			t.Fatalf("stored change lost detail: %+v", got)
		}
	})
}

func TestRecordChangeRefusesBadInput(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		s := &Log{DB: db, Clock: clock.NewFake(tue(15, 0))}
		cases := []struct {
			name string
			edit func(p *RecordChangeParams)
			want string
		}{
			{"unknown kind", func(p *RecordChangeParams) { p.Kind = "schema_versoin" }, "closest: schema_version"},
			{"future", func(p *RecordChangeParams) { p.At = tue(16, 0) }, "in the future"},
			{"no time", func(p *RecordChangeParams) { p.At = time.Time{} }, "at is required"},
			{"no assets", func(p *RecordChangeParams) { p.Assets = nil }, "assets is empty"},
			{"no summary", func(p *RecordChangeParams) { p.Summary = " " }, "summary is empty"},
			{"state skipped on deploy", func(p *RecordChangeParams) { p.Kind = "deploy"; p.StateSkipped = true }, "only to kind restore"},
			{"field on other asset", func(p *RecordChangeParams) { p.Fields[0].Asset = "kafka://prod/other" }, "not among the change's assets"},
			{"unknown field op", func(p *RecordChangeParams) { p.Fields[0].How = "dropped" }, "valid: removed, added, type_changed, renamed"},
			{"rename without new name", func(p *RecordChangeParams) { p.Fields[0].How = FieldRenamed }, "needs new_name"},
			{"asset with space", func(p *RecordChangeParams) { p.Assets = []string{"schema://api usage"} }, "whitespace"},
		}
		for _, c := range cases {
			p := schemaV12()
			p.Fields = append([]FieldChange{}, p.Fields...)
			c.edit(&p)
			_, err := s.RecordChange(ctx, p)
			if err == nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%s: err = %v; want an input error containing %q", c.name, err, c.want)
			}
		}
		list, err := s.ListChanges(ctx, ChangeFilter{})
		if err != nil {
			t.Fatal(err)
		}
		if len(list.Changes) != 0 {
			t.Fatalf("refused changes were stored: %+v", list.Changes)
		}
	})
}

func TestListChangesFilters(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		s := &Log{DB: db, Clock: clock.NewFake(tue(18, 0))}
		for i, kind := range []string{"deploy", "restore", "deploy", "config"} {
			recordOK(t, s, RecordChangeParams{At: tue(10+i, 0), Kind: kind, System: "flink",
				Assets: []string{"flink://points-balance", "kafka://prod/x" + string(rune('a'+i))}, Summary: kind})
		}
		check := func(f ChangeFilter, want ...string) {
			t.Helper()
			l, err := s.ListChanges(ctx, f)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, c := range l.Changes {
				got = append(got, c.At.Format("15")+c.Summary)
			}
			if strings.Join(got, ",") != strings.Join(want, ",") {
				t.Fatalf("filter %+v: got %v, want %v", f, got, want)
			}
		}
		check(ChangeFilter{}, "13config", "12deploy", "11restore", "10deploy")
		check(ChangeFilter{Kind: "deploy"}, "12deploy", "10deploy")
		check(ChangeFilter{Asset: "kafka://prod/xb"}, "11restore")
		check(ChangeFilter{Since: tue(11, 0), Until: tue(13, 0)}, "12deploy", "11restore")
		l, err := s.ListChanges(ctx, ChangeFilter{Params: page.Params{Limit: 2}})
		if err != nil || len(l.Changes) != 2 || l.NextCursor == "" || l.Total != 4 {
			t.Fatalf("limit 2: %+v, %v", l, err)
		}
		l2, err := s.ListChanges(ctx, ChangeFilter{Params: page.Params{Limit: 2, Cursor: l.NextCursor}})
		if err != nil || len(l2.Changes) != 2 || l2.NextCursor != "" || l2.Changes[0].ID == l.Changes[1].ID {
			t.Fatalf("second page: %+v, %v", l2, err)
		}
		if _, err := s.ListChanges(ctx, ChangeFilter{Kind: "deploy", Params: page.Params{Cursor: l.NextCursor}}); !errors.Is(err, page.ErrBadCursor) {
			t.Fatalf("cursor of another filter: err = %v", err)
		}
		if _, err := s.ListChanges(ctx, ChangeFilter{Since: tue(13, 0), Until: tue(11, 0)}); err == nil || !strings.Contains(err.Error(), "must be after") {
			t.Fatalf("until before since: err = %v", err)
		}
		if _, err := s.ListChanges(ctx, ChangeFilter{Kind: "restart"}); err == nil || !strings.Contains(err.Error(), "closest: restore") {
			t.Fatalf("unknown kind: err = %v", err)
		}
	})
}

// Diagnosis reads only its lookback window: the query is answered from the
// time index, never by scanning the whole log.
func TestChangeWindowUsesTheTimeIndex(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		err := db.InTx(ctx, func(tx *store.Tx) error {
			explain := "EXPLAIN QUERY PLAN "
			if db.Dialect() == store.Postgres {
				// An empty table is cheapest to scan; ask what the index
				// plan is, as the planner will choose it on a long log.
				if _, err := tx.ExecContext(ctx, "SET LOCAL enable_seqscan = off"); err != nil {
					return err
				}
				explain = "EXPLAIN "
			}
			rows, err := tx.QueryContext(ctx, explain+changeSelect+" WHERE at_ms >= ? AND at_ms < ? ORDER BY at_ms, id", int64(1), int64(2))
			if err != nil {
				return err
			}
			defer rows.Close()
			var plan strings.Builder
			cols, _ := rows.Columns()
			for rows.Next() {
				vals := make([]any, len(cols))
				ptrs := make([]any, len(cols))
				for i := range vals {
					ptrs[i] = &vals[i]
				}
				if err := rows.Scan(ptrs...); err != nil {
					return err
				}
				for _, v := range vals {
					fmt.Fprintf(&plan, "%v ", v)
				}
				plan.WriteString("\n")
			}
			if !strings.Contains(plan.String(), "incident_changes_at") {
				t.Errorf("window query does not use the time index:\n%s", plan.String())
			}
			return rows.Err()
		})
		if err != nil {
			t.Fatal(err)
		}
	})
}

func recordOK(t testing.TB, l *Log, p RecordChangeParams) Change {
	t.Helper()
	r, err := l.RecordChange(context.Background(), p)
	if err != nil {
		t.Fatalf("record change %q: %v", p.Summary, err)
	}
	return r.Change
}

// tue is the stories' Tuesday.
func tue(h, m int) time.Time { return time.Date(2026, 10, 13, h, m, 0, 0, time.UTC) }
