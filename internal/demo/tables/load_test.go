package tables

import (
	"context"
	"encoding/json"
	"fmt"
	"math/big"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/dataworkers/dw/internal/demo"
	"github.com/dataworkers/dw/internal/warehouse"
	"github.com/dataworkers/dw/internal/warehouse/duckdb"
)

// reader opens the file the way agents do: read-only, per query.
func reader(t *testing.T, path string) *duckdb.Warehouse {
	t.Helper()
	w, err := duckdb.Open("demo", path, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func query(t *testing.T, w *duckdb.Warehouse, sql string) [][]any {
	t.Helper()
	res, err := w.Query(context.Background(), warehouse.Query{SQL: sql})
	if err != nil {
		t.Fatalf("%v\nin: %s", err, sql)
	}
	return res.Rows
}

func one(t *testing.T, w *duckdb.Warehouse, sql string) any {
	t.Helper()
	rows := query(t, w, sql)
	if len(rows) != 1 || len(rows[0]) != 1 {
		t.Fatalf("want one value from %s, got %v", sql, rows)
	}
	return rows[0][0]
}

func num(t *testing.T, v any) float64 {
	t.Helper()
	switch x := v.(type) {
	case int64:
		return float64(x)
	case int32:
		return float64(x)
	case float64:
		return x
	case *big.Int:
		f, _ := new(big.Float).SetInt(x).Float64()
		return f
	case nil:
		return 0
	}
	t.Fatalf("not a number: %T %v", v, v)
	return 0
}

// tableHashes fingerprints every table of the pack's schemas.
func tableHashes(t *testing.T, w *duckdb.Warehouse, schemas ...string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, r := range query(t, w, `SELECT table_schema, table_name FROM information_schema.tables
		WHERE table_schema IN ('`+strings.Join(schemas, "','")+`') ORDER BY 1, 2`) {
		name := r[0].(string) + "." + r[1].(string)
		out[name] = fmt.Sprint(query(t, w, `SELECT count(*), bit_xor(hash(t)), sum(hash(t) % 1000003) FROM `+name+` AS t`)[0])
	}
	return out
}

func TestLoadWarehouseUnknownPack(t *testing.T) {
	path := filepath.Join(t.TempDir(), "demo.duckdb")
	err := LoadWarehouse(context.Background(), path, "biling", storyNow)
	if err == nil || !strings.Contains(err.Error(), "closest: billing") || !strings.Contains(err.Error(), "valid: billing, loyalty") {
		t.Fatalf("want an unknown-pack error naming billing, got %v", err)
	}
}

func TestFixBeforeLoadSaysToLoad(t *testing.T) {
	path := filepath.Join(t.TempDir(), "demo.duckdb")
	if err := ApplyBillingFix(context.Background(), path, storyNow); err == nil || !strings.Contains(err.Error(), "load the billing pack first") {
		t.Fatalf("want a load-first error, got %v", err)
	}
	if err := ApplyLoyaltyFix(context.Background(), path, storyNow); err == nil || !strings.Contains(err.Error(), "load the loyalty pack first") {
		t.Fatalf("want a load-first error, got %v", err)
	}
}

func TestBillingWarehouse(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tl := demo.Timeline(storyNow)
	path := filepath.Join(t.TempDir(), "demo.duckdb")
	if err := LoadWarehouse(ctx, path, "billing", storyNow); err != nil {
		t.Fatal(err)
	}
	w := reader(t, path)
	schemas := []string{"usage", "billing", "crm"}
	hashes := tableHashes(t, w, schemas...)
	if len(hashes) != 4 {
		t.Fatalf("tables: %v", hashes)
	}

	day := sqlTime(tl.Day)
	share := num(t, one(t, w, `SELECT avg(CASE WHEN egress_bytes IS NULL THEN 1.0 ELSE 0 END) FROM usage.usage_hourly WHERE window_start >= `+day))
	if share < 0.17 || share > 0.19 {
		t.Errorf("null share of egress_bytes over today's hours = %.4f, want about 0.18", share)
	}
	if n := num(t, one(t, w, `SELECT count(*) FROM usage.usage_hourly WHERE egress_bytes IS NULL AND window_start < `+sqlTime(tl.Day.Add(14*time.Hour)))); n != 0 {
		t.Errorf("%v null egress_bytes before the 14:00 hour", n)
	}
	if n := num(t, one(t, w, `SELECT count(*) - count(DISTINCT usage_id) FROM usage.usage_hourly`)); n != 0 {
		t.Errorf("%v duplicate usage_id", n)
	}
	if n := num(t, one(t, w, `SELECT count(*) FROM usage.usage_hourly WHERE ingested_at > `+sqlTime(tl.QualityCheck))); n != 0 {
		t.Errorf("%v rows landed after the 15:05 check", n)
	}
	days := num(t, one(t, w, `SELECT count(DISTINCT CAST(window_start AS DATE)) FROM usage.usage_hourly`))
	if days != demo.HistoryDays+1 {
		t.Errorf("%v days of usage, want %d", days, demo.HistoryDays+1)
	}
	// dbt built fct_billable_egress at 15:00 with missing bytes as 0; its tests pass.
	if n := num(t, one(t, w, `SELECT count(*) FROM billing.fct_billable_egress WHERE billable_bytes IS NULL OR account_id IS NULL`)); n != 0 {
		t.Errorf("fct_billable_egress has %v null rows", n)
	}
	if got := one(t, w, `SELECT max(built_at) FROM billing.fct_billable_egress`); !got.(time.Time).Equal(tl.DBTBuild) {
		t.Errorf("built_at %v, want %s", got, tl.DBTBuild)
	}
	before := num(t, one(t, w, `SELECT sum(billable_bytes) FROM billing.fct_billable_egress WHERE day = `+sqlDate(tl.Day)))

	if err := ApplyBillingFix(ctx, path, storyNow); err != nil {
		t.Fatal(err)
	}
	w = reader(t, path)
	if n := num(t, one(t, w, `SELECT count(*) FROM usage.usage_hourly_v2 WHERE egress_bytes IS NULL`)); n != 0 {
		t.Errorf("usage_hourly_v2 has %v null egress_bytes", n)
	}
	if n := num(t, one(t, w, `SELECT count(*) - count(DISTINCT usage_id) FROM usage.usage_hourly_v2`)); n != 0 {
		t.Errorf("%v duplicate usage_id in v2", n)
	}
	if n := num(t, one(t, w, `SELECT count(*) FROM (SELECT * FROM usage.usage_hourly WHERE window_start < `+day+`
		EXCEPT SELECT * FROM usage.usage_hourly_v2)`)); n != 0 {
		t.Errorf("%v history rows missing from v2's backfill", n)
	}
	lastHour := one(t, w, `SELECT max(window_start) FROM usage.usage_hourly_v2`).(time.Time)
	if want := tl.Verify.Truncate(time.Hour); !lastHour.Equal(want) {
		t.Errorf("v2 reaches the %s bucket, want %s", lastHour, want)
	}
	// Volume and lag of v2's closed hours today against the same hours before.
	rows := query(t, w, `WITH h AS (
			SELECT window_start, count(*) AS n, avg(epoch(ingested_at) - epoch(window_end)) AS lag
			FROM usage.usage_hourly_v2 WHERE window_end <= `+sqlTime(tl.Verify)+` GROUP BY window_start)
		SELECT strftime(today.window_start, '%H:%M'), today.n, today.lag,
			min(past.n), max(past.n), min(past.lag), max(past.lag)
		FROM h AS today JOIN h AS past
			ON hour(past.window_start) = hour(today.window_start) AND past.window_start < `+day+`
		WHERE today.window_start >= `+day+`
		GROUP BY ALL ORDER BY 1`)
	if len(rows) != 16 {
		t.Fatalf("%d closed hours today in v2, want 16", len(rows))
	}
	for _, r := range rows {
		n, lag := num(t, r[1]), num(t, r[2])
		if n < 0.95*num(t, r[3]) || n > 1.05*num(t, r[4]) {
			t.Errorf("v2 volume at %s: %v rows, history %v..%v", r[0], n, r[3], r[4])
		}
		if lag < 0.95*num(t, r[5]) || lag > 1.05*num(t, r[6]) {
			t.Errorf("v2 load lag at %s: %.0fs, history %.0f..%.0f", r[0], lag, num(t, r[5]), num(t, r[6]))
		}
	}
	after := num(t, one(t, w, `SELECT sum(billable_bytes) FROM billing.fct_billable_egress WHERE day = `+sqlDate(tl.Day)))
	if after <= before {
		t.Errorf("today's billable bytes %v after the fix, %v before: the diff did not read v2", after, before)
	}
	if n := num(t, one(t, w, `SELECT count(*) FROM billing.fct_billable_egress f
		JOIN (SELECT account_id, CAST(window_start AS DATE) AS day, sum(egress_bytes) AS b FROM usage.usage_hourly_v2
			WHERE window_start >= `+day+` GROUP BY ALL) v USING (account_id, day)
		WHERE f.billable_bytes <> v.b`)); n != 0 {
		t.Errorf("%v accounts' billable bytes today differ from v2's sum", n)
	}
	fixed := tableHashes(t, w, schemas...)
	if fixed["billing.fct_billable_egress"] == hashes["billing.fct_billable_egress"] {
		t.Error("the fix left fct_billable_egress's fingerprint unchanged")
	}
	if err := ApplyBillingFix(ctx, path, storyNow); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(fixed) != fmt.Sprint(tableHashes(t, reader(t, path), schemas...)) {
		t.Error("applying the fix twice changed the tables")
	}
	// Loading again resets the story, to the same rows: loads are
	// deterministic.
	if err := LoadWarehouse(ctx, path, "billing", storyNow); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(hashes) != fmt.Sprint(tableHashes(t, reader(t, path), schemas...)) {
		t.Error("loading again with the same now does not give the same tables")
	}
}

// metricByHour runs the pack's metric SQL (from notes.json) on the file.
func metricByHour(t *testing.T, w *duckdb.Warehouse, name string) map[time.Time]float64 {
	t.Helper()
	files, err := demo.PackFiles("loyalty")
	if err != nil {
		t.Fatal(err)
	}
	var notes demo.Notes
	if err := json.Unmarshal(files["notes.json"], &notes); err != nil {
		t.Fatal(err)
	}
	for _, m := range notes.Metrics {
		if m.Name == name {
			out := map[time.Time]float64{}
			for _, r := range query(t, w, m.SQL) {
				out[r[0].(time.Time)] = num(t, r[1])
			}
			return out
		}
	}
	t.Fatalf("no metric %s in the loyalty notes", name)
	return nil
}

// baselineAt is the median of the same hour on the previous days.
func baselineAt(series map[time.Time]float64, at time.Time) (median float64, history []float64) {
	for d := 1; d <= demo.HistoryDays; d++ {
		if v, ok := series[at.AddDate(0, 0, -d)]; ok {
			history = append(history, v)
		}
	}
	s := append([]float64(nil), history...)
	sort.Float64s(s)
	return s[len(s)/2], history
}

func TestLoyaltyWarehouse(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tl := demo.Timeline(storyNow)
	path := filepath.Join(t.TempDir(), "demo.duckdb")
	if err := LoadWarehouse(ctx, path, "loyalty", storyNow); err != nil {
		t.Fatal(err)
	}
	w := reader(t, path)
	hashes := tableHashes(t, w, "loyalty")

	// run_quality_check's view: unique, no nulls, volume normal.
	r := query(t, w, `SELECT count(*), count(DISTINCT member_id), count(*) FILTER (WHERE member_id IS NULL OR balance IS NULL OR updated_at IS NULL)
		FROM loyalty.member_balances`)[0]
	if num(t, r[0]) != loyaltyMembers || num(t, r[1]) != loyaltyMembers || num(t, r[2]) != 0 {
		t.Errorf("member_balances rows %v, distinct members %v, null keys %v", r[0], r[1], r[2])
	}
	reset := num(t, one(t, w, `SELECT count(*) FROM loyalty.member_balances WHERE updated_at >= `+sqlTime(tl.Restore)))
	if reset < 58000 || reset > 64000 {
		t.Errorf("%v members written since the 14:02 restore, want about 61,000", reset)
	}
	if n := num(t, one(t, w, `SELECT count(*) FROM loyalty.member_balances WHERE last_store_id IS NOT NULL AND updated_at < `+sqlTime(tl.Restore))); n != 0 {
		t.Errorf("%v rows written before v4.2 carry last_store_id", n)
	}

	metric := metricByHour(t, w, "avg_balance_active_last_hour")
	h14 := tl.Day.Add(14 * time.Hour)
	base, _ := baselineAt(metric, h14)
	ratio := metric[h14] / base
	if ratio < 0.08 || ratio > 0.10 {
		t.Errorf("metric at the 14:00 hour = %.0f, %.3f of its baseline %.0f, want about 0.09", metric[h14], ratio, base)
	}
	for h := tl.HistoryStart; h.Before(h14); h = h.Add(time.Hour) {
		v, ok := metric[h]
		if !ok {
			t.Fatalf("no metric point at %s", h)
		}
		if h.After(tl.HistoryStart.AddDate(0, 0, 7)) {
			if b, hist := baselineAt(metric, h); abs(v/b-1) > 0.07 {
				t.Fatalf("metric at %s = %.0f, baseline %.0f (%v): a normal hour off baseline", h, v, b, hist)
			}
		}
	}
	// Seasonal: the daily profile shows in the history.
	var byHourOfDay [24]float64
	for h, v := range metric {
		if h.Before(tl.Day) {
			byHourOfDay[h.Hour()] += v / demo.HistoryDays
		}
	}
	lo, hi := byHourOfDay[0], byHourOfDay[0]
	for _, v := range byHourOfDay {
		lo, hi = min(lo, v), max(hi, v)
	}
	if hi/lo < 1.15 {
		t.Errorf("hour-of-day means range %.0f..%.0f: no daily seasonality", lo, hi)
	}
	t.Logf("members reset since 14:02: %.0f; metric 14:00 = %.0f vs baseline %.0f (%.1f%%)", reset, metric[h14], base, 100*ratio)

	if err := ApplyLoyaltyFix(ctx, path, storyNow); err != nil {
		t.Fatal(err)
	}
	w = reader(t, path)
	metric = metricByHour(t, w, "avg_balance_active_last_hour")
	for _, h := range []time.Time{h14, h14.Add(time.Hour)} {
		b, hist := baselineAt(metric, h)
		if !onBaseline(metric[h], hist) {
			t.Errorf("after the fix the metric at %s = %.0f, baseline %.0f, history %v", h.Format("15:04"), metric[h], b, hist)
		}
	}
	r = query(t, w, `SELECT count(*), count(DISTINCT member_id), count(*) FILTER (WHERE member_id IS NULL OR balance IS NULL OR updated_at IS NULL),
		count(*) FILTER (WHERE updated_at >= `+sqlTime(tl.Fix)+`)
		FROM loyalty.member_balances`)[0]
	if num(t, r[0]) != loyaltyMembers || num(t, r[1]) != loyaltyMembers || num(t, r[2]) != 0 {
		t.Errorf("after the fix: rows %v, distinct %v, null keys %v", r[0], r[1], r[2])
	}
	if num(t, r[3]) < reset {
		t.Errorf("only %v balances rewritten by the redeploy, %v were reset", r[3], reset)
	}
	downgrades := metricByHour(t, w, "tier_downgrades")
	today := downgrades[tl.Day]
	base, hist := baselineAt(downgrades, tl.Day)
	if !onBaseline(today, hist) {
		t.Errorf("tier downgrades after the fix: %.0f, baseline %.0f, history %v", today, base, hist)
	}
	t.Logf("after the fix: metric 14:00 %.0f, 15:00 %.0f; tier downgrades %.0f (baseline median %.0f, range %v)",
		metric[h14], metric[h14.Add(time.Hour)], today, base, hist)
	fixed := tableHashes(t, w, "loyalty")
	for _, table := range []string{"loyalty.member_balances", "loyalty.member_activity_hourly", "loyalty.fct_member_tier", "loyalty.tier_changes_daily"} {
		if fixed[table] == hashes[table] {
			t.Errorf("the fix left %s's fingerprint unchanged", table)
		}
	}
	if err := ApplyLoyaltyFix(ctx, path, storyNow); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(fixed) != fmt.Sprint(tableHashes(t, reader(t, path), "loyalty")) {
		t.Error("applying the fix twice changed the tables")
	}
	if err := LoadWarehouse(ctx, path, "loyalty", storyNow); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(hashes) != fmt.Sprint(tableHashes(t, reader(t, path), "loyalty")) {
		t.Error("loading again with the same now does not give the same tables")
	}
}
