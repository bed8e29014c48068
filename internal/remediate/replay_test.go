package remediate

import (
	"fmt"
	"math/rand/v2"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dataworkers/dw/internal/checks"
	"github.com/dataworkers/dw/internal/incidents"
)

// orders writes shop.orders: ten days of hourly orders (seeded counts),
// each with a unique order_id, and at the bad hour only `landed` of them;
// the rest of the bad hour's rows are returned for the fix to write.
func orders(t *testing.T, f *fixture, table string, landed int) (missing []string) {
	t.Helper()
	rng := rand.New(rand.NewPCG(17, 4))
	var rows []string
	id := 0
	for h := day.Add(-10 * 24 * time.Hour); h.Before(day.Add(16 * time.Hour)); h = h.Add(time.Hour) {
		n := 180 + rng.IntN(40)
		for i := 0; i < n; i++ {
			id++
			at := h.Add(time.Duration(i*3) * time.Second)
			row := fmt.Sprintf("(%d, %d.5, TIMESTAMP '%s', TIMESTAMP '%s')", id, 10+rng.IntN(90), at.Format("2006-01-02 15:04:05"),
				at.Add(30*time.Second).Format("2006-01-02 15:04:05"))
			if h.Equal(bad) && i >= landed {
				missing = append(missing, row)
				continue
			}
			rows = append(rows, row)
		}
	}
	stmts := []string{"CREATE SCHEMA IF NOT EXISTS shop",
		"CREATE TABLE " + table + " (order_id BIGINT, amount DOUBLE, created_at TIMESTAMP, ingested_at TIMESTAMP)"}
	for len(rows) > 0 {
		k := min(len(rows), 5000)
		stmts = append(stmts, "INSERT INTO "+table+" VALUES "+strings.Join(rows[:k], ","))
		rows = rows[k:]
	}
	f.exec(stmts...)
	return missing
}

var repeats = regexp.MustCompile(`repeats in ([\d,]+) of`)

// An at-least-once replay fixes the bad hour's missing orders but writes
// copies of 12 orders of the hour before, stamped into the replayed hour.
// Per-hour buckets each see every key once, so only the declared key
// re-checked across the hours catches it: the incident must not be
// verified, and every failing check names the 12 repeated keys. The same
// fix without the copies verifies.
func TestReplayThatWroteDuplicateKeysIsNotVerified(t *testing.T) {
	for _, dups := range []int{12, 0} {
		t.Run(fmt.Sprintf("%d duplicates", dups), func(t *testing.T) {
			f := newFixture(t)
			missing := orders(t, f, "shop.orders", 80)
			f.expect("shop.orders", checks.Expectations{Key: []string{"order_id"}, EventTime: "created_at", IngestTime: "ingested_at"})
			id, props := f.incident([]incidents.Symptom{{Kind: incidents.SymptomVolume, Asset: "duckdb://shop.orders", Metric: checks.MetricRowCount,
				Observed: 80, Expected: 200, ExpectedLow: 170, ExpectedHigh: 230, At: bad, Source: "run_quality_check",
				Detail: "80 rows at 14:00, usually about 200"}}, hold("duckdb://shop.orders"))
			f.approve(props[0])

			// The replay: the missing rows, and copies of orders of 13:00
			// re-stamped at 14:59 (their keys repeat across two hours).
			fix := []string{"INSERT INTO shop.orders VALUES " + strings.Join(missing, ",")}
			if dups > 0 {
				fix = append(fix, fmt.Sprintf(`INSERT INTO shop.orders SELECT order_id, amount, TIMESTAMP '%s', TIMESTAMP '%s' FROM shop.orders
					WHERE created_at >= TIMESTAMP '%s' AND created_at < TIMESTAMP '%s' ORDER BY order_id LIMIT %d`,
					bad.Add(59*time.Minute).Format("2006-01-02 15:04:05"), bad.Add(59*time.Minute+30*time.Second).Format("2006-01-02 15:04:05"),
					bad.Add(-time.Hour).Format("2006-01-02 15:04:05"), bad.Format("2006-01-02 15:04:05"), dups))
			}
			f.exec(fix...)
			f.clk.Set(day.Add(16*time.Hour + 5*time.Minute))
			res := f.verify(id)

			if dups == 0 {
				if res.Verification.Outcome != incidents.OutcomeVerified || res.Incident.Status != incidents.StatusVerified {
					t.Fatalf("a clean replay is %s: %s", res.Verification.Outcome, res.Verification.Reason)
				}
				return
			}
			if res.Verification.Verified || res.Verification.Outcome != incidents.OutcomeEscalated || res.Incident.Status != incidents.StatusEscalated {
				t.Fatalf("a replay that wrote %d duplicate keys is %s (%s)", dups, res.Verification.Outcome, res.Verification.Reason)
			}
			// Every failure is the declared key, re-checked across the
			// hours (per-hour buckets each see every key once), and each
			// names the repeats.
			if len(res.Verification.Failures) == 0 {
				t.Fatal("escalated with no failure listed")
			}
			for _, c := range res.Verification.Failures {
				if !c.Required || c.Asset != "duckdb://shop.orders" || !strings.HasPrefix(c.Name, "uniqueness(order_id)") {
					t.Errorf("failure %+v: want only the declared key", c)
					continue
				}
				m := repeats.FindStringSubmatch(c.Observed)
				if m == nil {
					t.Errorf("the key failure %q does not say how many keys repeat", c.Observed)
					continue
				}
				if n, _ := strconv.Atoi(strings.ReplaceAll(m[1], ",", "")); n != dups {
					t.Errorf("the key failure counts %d repeats, want %d: %q", n, dups, c.Observed)
				}
			}
			// Nothing was excused: the receipt records the failure.
			if res.Receipt.Seq == 0 || len(res.EscalatedTo) != 1 || res.EscalatedTo[0] != "pat" {
				t.Errorf("receipt entry %d, escalated to %v; want an entry and pat", res.Receipt.Seq, res.EscalatedTo)
			}
		})
	}
}
