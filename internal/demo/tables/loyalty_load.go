package tables

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"time"

	"github.com/dataworkers/dw/internal/demo"
)

const (
	memberBalancesDDL = `(
	member_id        VARCHAR   NOT NULL,
	balance          BIGINT    NOT NULL,
	last_store_id    VARCHAR,
	last_activity_at TIMESTAMP NOT NULL,
	updated_at       TIMESTAMP NOT NULL,
	ingested_at      TIMESTAMP NOT NULL
)`
	memberTierDDL = `(
	member_id     VARCHAR   NOT NULL,
	tier          VARCHAR   NOT NULL,
	previous_tier VARCHAR   NOT NULL,
	balance       BIGINT    NOT NULL,
	evaluated_at  TIMESTAMP NOT NULL
)`
	// tierRankSQL orders tiers for comparing a member's tier with the
	// previous evaluation.
	tierRankSQL = `CASE %s WHEN 'bronze' THEN 0 WHEN 'silver' THEN 1 WHEN 'gold' THEN 2 WHEN 'platinum' THEN 3 END`
)

func loadLoyalty(ctx context.Context, db *sql.DB, tl demo.Instants) error {
	m := newLoyaltyModel(loyaltySeed, tl)
	if err := execAll(ctx, db,
		`CREATE SCHEMA IF NOT EXISTS loyalty`,
		`CREATE OR REPLACE TABLE loyalty.member_balances `+memberBalancesDDL,
		`CREATE OR REPLACE TABLE loyalty.member_activity_hourly (
			hour_start     TIMESTAMP NOT NULL,
			active_members BIGINT    NOT NULL,
			balance_sum    BIGINT    NOT NULL,
			computed_at    TIMESTAMP NOT NULL
		)`,
		`CREATE OR REPLACE TABLE loyalty.fct_member_tier `+memberTierDDL,
		`CREATE OR REPLACE TABLE loyalty.tier_changes_daily (
			run_date          DATE      NOT NULL,
			evaluated_at      TIMESTAMP NOT NULL,
			members_evaluated BIGINT    NOT NULL,
			upgrades          BIGINT    NOT NULL,
			downgrades        BIGINT    NOT NULL,
			platinum          BIGINT    NOT NULL,
			gold              BIGINT    NOT NULL,
			silver            BIGINT    NOT NULL,
			bronze            BIGINT    NOT NULL
		)`,
	); err != nil {
		return err
	}
	if err := appendBalances(ctx, db, m.balances(tl.QualityCheck, jobV42Skipped)); err != nil {
		return err
	}
	h14 := tl.Day.Add(14 * time.Hour)
	activity := append(m.activityHistory(tl.HistoryStart, h14),
		m.activityFromPurchases(h14, jobV42Skipped, h14.Add(time.Hour+activityComputeDelay))...)
	if err := appendActivity(ctx, db, activity); err != nil {
		return err
	}
	if err := appendTiers(ctx, db, m.tiers()); err != nil {
		return err
	}
	hist := m.tierHistory
	return appendRows(ctx, db, "loyalty", "tier_changes_daily", len(hist), func(i int) []driver.Value {
		d := hist[i]
		return []driver.Value{d.Day, d.EvaluatedAt, d.Members, d.Upgrades, d.Downgrades, d.Platinum, d.Gold, d.Silver, d.Bronze}
	})
}

func appendBalances(ctx context.Context, db *sql.DB, rows []balanceRow) error {
	return appendRows(ctx, db, "loyalty", "member_balances", len(rows), func(i int) []driver.Value {
		r := rows[i]
		return []driver.Value{r.MemberID, r.Balance, nullable(r.LastStoreID), r.LastActivityAt, r.UpdatedAt, r.IngestedAt}
	})
}

func appendActivity(ctx context.Context, db *sql.DB, rows []activityRow) error {
	return appendRows(ctx, db, "loyalty", "member_activity_hourly", len(rows), func(i int) []driver.Value {
		r := rows[i]
		return []driver.Value{r.HourStart, r.ActiveMembers, r.BalanceSum, r.ComputedAt}
	})
}

func appendTiers(ctx context.Context, db *sql.DB, rows []tierRow) error {
	return appendRows(ctx, db, "loyalty", "fct_member_tier", len(rows), func(i int) []driver.Value {
		r := rows[i]
		return []driver.Value{r.MemberID, r.Tier, r.PreviousTier, r.Balance, r.EvaluatedAt}
	})
}

// fixLoyalty writes what the approved redeploy produces by the 16:05
// verification: v4.1 from the 14:00 savepoint with its state reprocesses
// every purchase since 14:00, so balances are whole again (and, as v4.1
// does not know last_store_id, the rewritten rows carry none). The hourly
// activity model re-runs the hours since 14:00, and a verification run of
// nightly_tiers evaluates tiers from the restored balances against last
// night's, recording its tier changes.
func fixLoyalty(ctx context.Context, db *sql.DB, tl demo.Instants) error {
	m := newLoyaltyModel(loyaltySeed, tl)
	balances := m.balances(tl.Verify, jobV41Restored)
	h14 := tl.Day.Add(14 * time.Hour)
	rerun := tl.Verify.Add(-time.Minute)
	if err := execAll(ctx, db,
		`CREATE OR REPLACE TABLE loyalty.member_balances `+memberBalancesDDL,
		`DELETE FROM loyalty.member_activity_hourly WHERE hour_start >= `+sqlTime(h14),
		`CREATE OR REPLACE TABLE loyalty.fct_member_tier `+memberTierDDL,
		`DELETE FROM loyalty.tier_changes_daily WHERE run_date >= `+sqlDate(tl.Day),
	); err != nil {
		return err
	}
	if err := appendBalances(ctx, db, balances); err != nil {
		return err
	}
	var activity []activityRow
	for h := h14; !h.Add(time.Hour).After(rerun); h = h.Add(time.Hour) {
		activity = append(activity, m.activityFromPurchases(h, jobV41Restored, rerun)...)
	}
	if err := appendActivity(ctx, db, activity); err != nil {
		return err
	}
	tiers := make([]tierRow, len(balances))
	for i, b := range balances {
		tiers[i] = tierRow{
			MemberID:     b.MemberID,
			Tier:         tierNames[tierOf(b.Balance)],
			PreviousTier: tierNames[m.members[i].tierD1],
			Balance:      b.Balance,
			EvaluatedAt:  tl.Verify,
		}
	}
	if err := appendTiers(ctx, db, tiers); err != nil {
		return err
	}
	rank, prev := fmt.Sprintf(tierRankSQL, "tier"), fmt.Sprintf(tierRankSQL, "previous_tier")
	return execAll(ctx, db, `INSERT INTO loyalty.tier_changes_daily
		SELECT `+sqlDate(tl.Day)+`, `+sqlTime(tl.Verify)+`, count(*),
			count(*) FILTER (WHERE `+rank+` > `+prev+`),
			count(*) FILTER (WHERE `+rank+` < `+prev+`),
			count(*) FILTER (WHERE tier = 'platinum'),
			count(*) FILTER (WHERE tier = 'gold'),
			count(*) FILTER (WHERE tier = 'silver'),
			count(*) FILTER (WHERE tier = 'bronze')
		FROM loyalty.fct_member_tier`)
}
