package demo

import (
	"testing"
	"time"
)

// storyNow is a fixed "now" for tests: the incident day is 2026-05-19
// (a Tuesday), so every number below is reproducible.
var storyNow = time.Date(2026, 5, 19, 15, 30, 0, 0, time.UTC)

func TestTimelinePicksTheLatestIncidentDay(t *testing.T) {
	cases := []struct {
		now  time.Time
		want string
	}{
		{time.Date(2026, 5, 20, 15, 5, 0, 0, time.UTC), "2026-05-20"},
		{time.Date(2026, 5, 20, 15, 4, 59, 0, time.UTC), "2026-05-19"},
		{time.Date(2026, 5, 20, 23, 59, 0, 0, time.UTC), "2026-05-20"},
		{time.Date(2026, 5, 20, 0, 10, 0, 0, time.UTC), "2026-05-19"},
		// 17:30 in UTC+2 is 15:30 UTC: the incident day is the UTC date.
		{time.Date(2026, 5, 20, 17, 30, 0, 0, time.FixedZone("CEST", 2*3600)), "2026-05-20"},
	}
	for _, c := range cases {
		tl := Timeline(c.now)
		if got := tl.Day.Format("2006-01-02"); got != c.want {
			t.Errorf("Timeline(%s).Day = %s, want %s", c.now, got, c.want)
		}
		if tl.QualityCheck.After(tl.Now) {
			t.Errorf("Timeline(%s): the 15:05 check %s is after now", c.now, tl.QualityCheck)
		}
		if tl.Now.Sub(tl.QualityCheck) >= 24*time.Hour {
			t.Errorf("Timeline(%s): the check %s is a day or more ago", c.now, tl.QualityCheck)
		}
	}
}

func TestTimelineOrder(t *testing.T) {
	tl := Timeline(time.Date(2026, 5, 20, 16, 0, 0, 0, time.UTC))
	order := []struct {
		name string
		at   time.Time
	}{
		{"history start", tl.HistoryStart},
		{"previous day dbt deploy", tl.PrevDayDBTDeploy},
		{"day", tl.Day},
		{"dashboard change", tl.DashboardChange},
		{"release v4.2", tl.ReleaseV42},
		{"restore", tl.Restore},
		{"schema v12", tl.SchemaV12},
		{"gateway deploy", tl.GatewayDeploy},
		{"dbt build", tl.DBTBuild},
		{"quality check", tl.QualityCheck},
		{"gateway deploy end", tl.GatewayDeployEnd},
		{"fix", tl.Fix},
		{"verify", tl.Verify},
		{"nightly tiers", tl.NightlyTiers},
		{"braze sync", tl.BrazeSync},
		{"stripe dag", tl.StripeDAG},
	}
	for i := 1; i < len(order); i++ {
		if !order[i-1].at.Before(order[i].at) {
			t.Errorf("%s (%s) is not before %s (%s)", order[i-1].name, order[i-1].at, order[i].name, order[i].at)
		}
	}
	if got := tl.SchemaV12.Format("15:04"); got != "14:05" {
		t.Errorf("schema v12 at %s, want 14:05", got)
	}
	if got := tl.Day.Sub(tl.HistoryStart); got != 21*24*time.Hour {
		t.Errorf("history is %s, want 21 days", got)
	}
	pack := Timeline(PackDay.Add(16 * time.Hour))
	if !pack.Day.Equal(PackDay) {
		t.Fatalf("a time on PackDay after 15:05 gives day %s", pack.Day)
	}
	if got := tl.Shift(pack.SchemaV12); !got.Equal(tl.SchemaV12) {
		t.Errorf("Shift(pack's 14:05) = %s, want %s", got, tl.SchemaV12)
	}
}
