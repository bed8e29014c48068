package demo

import "time"

// PackDay is the incident day the pack files under testdata/scenarios are
// written for. Every timestamp in those files falls on or near this day;
// ReadPack moves them by whole days onto the Instants' Day, so the files
// stay valid JSON (real RFC 3339 times) and the demo still runs any day.
var PackDay = time.Date(2026, 3, 10, 0, 0, 0, 0, time.UTC)

// Offsets of the story's instants from the incident day's 00:00 UTC. They
// are the single source for the generated tables and the pack files.
const (
	offPrevDayDBTDeploy = -7*time.Hour - 30*time.Minute // previous day 16:30
	offDashboardChange  = 11 * time.Hour
	offSchemaV12        = 14*time.Hour + 5*time.Minute
	offGatewayDeploy    = 14*time.Hour + 10*time.Minute
	offDBTBuild         = 15 * time.Hour
	offQualityCheck     = 15*time.Hour + 5*time.Minute
	offStripeDAG        = 23 * time.Hour

	offReleaseV42   = 14 * time.Hour
	offRestore      = 14*time.Hour + 2*time.Minute
	offNightlyTiers = 21*time.Hour + 30*time.Minute
	offBrazeSync    = 22 * time.Hour

	offFix    = 15*time.Hour + 40*time.Minute
	offVerify = 16*time.Hour + 5*time.Minute
)

// HistoryDays is how many whole days of hourly history precede the
// incident day: three weeks, so a seasonal baseline has every hour of the
// week at least three times.
const HistoryDays = 21

// The gateway's rolling deploy of schema version 12: the pack files
// describe it and the billing tables follow it pod by pod, so both read
// it from here.
const (
	// GatewayPods serve the API; an account is pinned to one pod.
	GatewayPods = 24
	// GatewayPodStep is the rolling deploy's pace: one pod every 2m46s, so
	// the last of the 24 pods takes the new version at 15:13.
	GatewayPodStep = 166 * time.Second
)

// Instants are the story's key moments, all in UTC. Both packs share one
// incident day; the billing and loyalty stories happen on it side by side.
type Instants struct {
	// Now is the time the timeline was derived from.
	Now time.Time `json:"now"`
	// Day is the incident day's 00:00 UTC: today if Now is at or after
	// 15:05 UTC, else yesterday, so the 15:05 check is always in the past
	// (at most a day ago) and the demo can be started any day.
	Day time.Time `json:"day"`
	// HistoryStart is the first hour of generated history (Day - 21 days).
	HistoryStart time.Time `json:"history_start"`

	// PrevDayDBTDeploy is an unrelated dbt deploy the day before (16:30).
	PrevDayDBTDeploy time.Time `json:"prev_day_dbt_deploy"`
	// DashboardChange is an unrelated edit of the Revenue today workbook (11:00).
	DashboardChange time.Time `json:"dashboard_change"`
	// SchemaV12 is when api-usage-value version 12 is registered (14:05).
	SchemaV12 time.Time `json:"schema_v12"`
	// GatewayDeploy starts the gateway's rolling deploy producing v12 (14:10).
	GatewayDeploy time.Time `json:"gateway_deploy"`
	// GatewayDeployEnd is when the last gateway pod runs the new version.
	GatewayDeployEnd time.Time `json:"gateway_deploy_end"`
	// DBTBuild is the dbt build of fct_billable_egress (15:00).
	DBTBuild time.Time `json:"dbt_build"`
	// QualityCheck is the 15:05 check in both stories; the loaded tables
	// hold what had landed by then.
	QualityCheck time.Time `json:"quality_check"`
	// StripeDAG is the next run of sync_metered_usage_to_stripe (23:00).
	StripeDAG time.Time `json:"stripe_dag"`

	// ReleaseV42 is the points-balance v4.2 release, stopped with a
	// savepoint at the same moment (14:00).
	ReleaseV42 time.Time `json:"release_v42"`
	// Savepoint is when the 14:00 savepoint was taken.
	Savepoint time.Time `json:"savepoint"`
	// Restore is the restore from that savepoint with state skipped (14:02).
	Restore time.Time `json:"restore"`
	// NightlyTiers is the next nightly_tiers run (21:30).
	NightlyTiers time.Time `json:"nightly_tiers"`
	// BrazeSync is the next Hightouch sync to Braze (22:00).
	BrazeSync time.Time `json:"braze_sync"`

	// Fix is when the owners' approved steps run (15:40).
	Fix time.Time `json:"fix"`
	// Verify is the re-check after the fix (16:05); the fix functions write
	// what had landed by then.
	Verify time.Time `json:"verify"`
}

// Timeline places the story on the most recent incident day for now.
func Timeline(now time.Time) Instants {
	now = now.UTC()
	day := time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, time.UTC)
	if now.Before(day.Add(offQualityCheck)) {
		day = day.AddDate(0, 0, -1)
	}
	at := func(d time.Duration) time.Time { return day.Add(d) }
	return Instants{
		Now:              now,
		Day:              day,
		HistoryStart:     day.AddDate(0, 0, -HistoryDays),
		PrevDayDBTDeploy: at(offPrevDayDBTDeploy),
		DashboardChange:  at(offDashboardChange),
		SchemaV12:        at(offSchemaV12),
		GatewayDeploy:    at(offGatewayDeploy),
		GatewayDeployEnd: at(offGatewayDeploy).Add(time.Duration(GatewayPods-1) * GatewayPodStep),
		DBTBuild:         at(offDBTBuild),
		QualityCheck:     at(offQualityCheck),
		StripeDAG:        at(offStripeDAG),
		ReleaseV42:       at(offReleaseV42),
		Savepoint:        at(offReleaseV42),
		Restore:          at(offRestore),
		NightlyTiers:     at(offNightlyTiers),
		BrazeSync:        at(offBrazeSync),
		Fix:              at(offFix),
		Verify:           at(offVerify),
	}
}

// Shift moves a time written for PackDay onto this timeline's Day,
// keeping its distance from the day's midnight.
func (in Instants) Shift(t time.Time) time.Time {
	return t.Add(in.Day.Sub(PackDay))
}
