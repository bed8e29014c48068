package tables

import (
	"crypto/sha256"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/dataworkers/dw/internal/demo"
)

// storyNow is a fixed "now" for tests: the incident day is 2026-05-19
// (a Tuesday), so every number below is reproducible.
var storyNow = time.Date(2026, 5, 19, 15, 30, 0, 0, time.UTC)

func hashUsage(rows []usageRow) string {
	h := sha256.New()
	for _, r := range rows {
		fmt.Fprintf(h, "%s|%s|%s|%d|%d|%t|%d\n", r.UsageID, r.Region, r.WindowStart.Format(time.RFC3339), r.RequestCount,
			r.EgressBytes, r.EgressNull, r.IngestedAt.UnixMicro())
	}
	return fmt.Sprintf("%x", h.Sum(nil))
}

func TestBillingRowsAreDeterministic(t *testing.T) {
	tl := demo.Timeline(storyNow)
	a := newBillingModel(billingSeed, tl).rows(tl.HistoryStart, tl.QualityCheck, rollupV1)
	b := newBillingModel(billingSeed, tl).rows(tl.HistoryStart, tl.QualityCheck, rollupV1)
	if hashUsage(a) != hashUsage(b) {
		t.Fatal("same seed, same timeline: different rows")
	}
	c := newBillingModel(billingSeed+1, tl).rows(tl.HistoryStart, tl.QualityCheck, rollupV1)
	if hashUsage(a) == hashUsage(c) {
		t.Fatal("a different seed gave the same rows: the seed is not used")
	}
	// A row does not depend on which other hours were generated.
	today := newBillingModel(billingSeed, tl).rows(tl.Day, tl.QualityCheck, rollupV1)
	var tail []usageRow
	for _, r := range a {
		if !r.WindowStart.Before(tl.Day) {
			tail = append(tail, r)
		}
	}
	if hashUsage(today) != hashUsage(tail) {
		t.Fatal("today's rows differ when generated alone")
	}
}

// hourStats is null share, rows and mean load lag per hour bucket.
type hourStats struct {
	rows, nulls int
	lagSum      time.Duration
}

func statsByHour(rows []usageRow) map[time.Time]*hourStats {
	out := map[time.Time]*hourStats{}
	for _, r := range rows {
		s := out[r.WindowStart]
		if s == nil {
			s = &hourStats{}
			out[r.WindowStart] = s
		}
		s.rows++
		if r.EgressNull {
			s.nulls++
		}
		s.lagSum += r.IngestedAt.Sub(r.WindowEnd)
	}
	return out
}

func TestBillingNullShareAtTheCheck(t *testing.T) {
	for d := 0; d < 7; d++ { // every weekday gives the story's numbers
		now := storyNow.AddDate(0, 0, d)
		tl := demo.Timeline(now)
		from := tl.Day
		if d == 0 {
			from = tl.HistoryStart
		}
		rows := newBillingModel(billingSeed, tl).rows(from, tl.QualityCheck, rollupV1)
		byHour := statsByHour(rows)
		var todayRows, todayNulls int
		for h, s := range byHour {
			if h.Before(tl.Day.Add(14*time.Hour)) && s.nulls > 0 {
				t.Fatalf("%s: %d null egress_bytes in the %s bucket, before the deploy", tl.Day.Weekday(), s.nulls, h)
			}
			if !h.Before(tl.Day) {
				todayRows += s.rows
				todayNulls += s.nulls
			}
		}
		share := float64(todayNulls) / float64(todayRows)
		if share < 0.17 || share > 0.19 {
			t.Errorf("%s: null share over today's hours = %.4f (%d of %d), want about 0.18", tl.Day.Weekday(), share, todayNulls, todayRows)
		}
		s14, s15 := byHour[tl.Day.Add(14*time.Hour)], byHour[tl.Day.Add(15*time.Hour)]
		f14, f15 := float64(s14.nulls)/float64(s14.rows), float64(s15.nulls)/float64(s15.rows)
		if !(f14 > 0 && f15 > f14) {
			t.Errorf("%s: null share by hour 14:00 %.3f, 15:00 %.3f: want it climbing", tl.Day.Weekday(), f14, f15)
		}
		if d == 0 {
			t.Logf("%s %s: today %d rows, %d null (%.2f%%); 14:00 %d/%d, 15:00 (open) %d/%d",
				tl.Day.Format("2006-01-02"), tl.Day.Weekday(), todayRows, todayNulls, 100*share, s14.nulls, s14.rows, s15.nulls, s15.rows)
		}
	}
}

func TestBillingUsageIDUnique(t *testing.T) {
	tl := demo.Timeline(storyNow)
	m := newBillingModel(billingSeed, tl)
	for _, rows := range [][]usageRow{m.rows(tl.HistoryStart, tl.QualityCheck, rollupV1), m.rows(tl.Day, tl.Verify, rollupV2)} {
		seen := make(map[string]bool, len(rows))
		for _, r := range rows {
			if seen[r.UsageID] {
				t.Fatalf("usage_id %s appears twice", r.UsageID)
			}
			seen[r.UsageID] = true
		}
	}
}

// onBaseline reports whether v lies within the history's range widened by
// 5%: the check a seasonal baseline with three weeks of history makes.
func onBaseline(v float64, history []float64) bool {
	sort.Float64s(history)
	lo, hi := history[0], history[len(history)-1]
	return v >= lo-0.05*abs(lo) && v <= hi+0.05*abs(hi)
}

func abs(v float64) float64 {
	if v < 0 {
		return -v
	}
	return v
}

// checkVolumeAndLag compares today's closed hours with the same hour of the
// previous days.
func checkVolumeAndLag(t *testing.T, tl demo.Instants, rows []usageRow, asOf time.Time) {
	t.Helper()
	byHour := statsByHour(rows)
	for h := tl.Day; h.Before(asOf); h = h.Add(time.Hour) {
		today := byHour[h]
		if today == nil {
			t.Fatalf("no rows for the %s bucket", h.Format("15:04"))
		}
		var counts, lags []float64
		for d := 1; d <= demo.HistoryDays; d++ {
			s := byHour[h.AddDate(0, 0, -d)]
			if s == nil {
				continue
			}
			counts = append(counts, float64(s.rows))
			lags = append(lags, (s.lagSum / time.Duration(s.rows)).Seconds())
		}
		if len(counts) < 14 {
			t.Fatalf("only %d days of history for %s", len(counts), h.Format("15:04"))
		}
		if !onBaseline(float64(today.rows), counts) {
			t.Errorf("volume of the %s bucket: %d rows, history %v", h.Format("15:04"), today.rows, counts)
		}
		if !h.Add(time.Hour).After(asOf) { // closed hours only: the open one has no final lag yet
			lag := (today.lagSum / time.Duration(today.rows)).Seconds()
			if !onBaseline(lag, lags) {
				t.Errorf("load lag of the %s bucket: %.0fs, history %v", h.Format("15:04"), lag, lags)
			}
		}
	}
}

func TestBillingVolumeAndLagNormalAtTheCheck(t *testing.T) {
	tl := demo.Timeline(storyNow)
	rows := newBillingModel(billingSeed, tl).rows(tl.HistoryStart, tl.QualityCheck, rollupV1)
	checkVolumeAndLag(t, tl, rows, tl.QualityCheck)
	for _, r := range rows {
		if r.IngestedAt.After(tl.QualityCheck) {
			t.Fatalf("row %s landed at %s, after the check", r.UsageID, r.IngestedAt)
		}
	}
}

func TestBillingFixedRowsNeverNull(t *testing.T) {
	tl := demo.Timeline(storyNow)
	m := newBillingModel(billingSeed, tl)
	history := m.rows(tl.HistoryStart, tl.Day, rollupV1)
	v2 := m.rows(tl.Day, tl.Verify, rollupV2)
	for _, r := range v2 {
		if r.EgressNull || r.EgressBytes <= 0 {
			t.Fatalf("v2 row %s has egress %d (null %t)", r.UsageID, r.EgressBytes, r.EgressNull)
		}
	}
	checkVolumeAndLag(t, tl, append(history, v2...), tl.Verify)
	// Before the deploy the corrected statement sums the same bytes.
	v1 := map[string]usageRow{}
	for _, r := range m.rows(tl.Day, tl.QualityCheck, rollupV1) {
		v1[r.UsageID] = r
	}
	for _, r := range v2 {
		if r.WindowEnd.After(tl.GatewayDeploy) {
			continue
		}
		if o := v1[r.UsageID]; o.EgressBytes != r.EgressBytes {
			t.Fatalf("%s: v2 egress %d, v1 %d before the deploy", r.UsageID, r.EgressBytes, o.EgressBytes)
		}
	}
}
