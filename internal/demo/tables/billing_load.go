package tables

import (
	"context"
	"database/sql"
	"database/sql/driver"

	"github.com/dataworkers/dw/internal/demo"
)

const usageHourlyDDL = `(
	usage_id      VARCHAR   NOT NULL,
	account_id    VARCHAR   NOT NULL,
	region        VARCHAR   NOT NULL,
	window_start  TIMESTAMP NOT NULL,
	window_end    TIMESTAMP NOT NULL,
	request_count BIGINT    NOT NULL,
	egress_bytes  BIGINT,
	ingested_at   TIMESTAMP NOT NULL
)`

const billableDDL = `(
	account_id       VARCHAR   NOT NULL,
	day              DATE      NOT NULL,
	plan             VARCHAR   NOT NULL,
	billing_currency VARCHAR   NOT NULL,
	request_count    BIGINT    NOT NULL,
	billable_bytes   BIGINT    NOT NULL,
	built_at         TIMESTAMP NOT NULL
)`

func loadBilling(ctx context.Context, db *sql.DB, tl demo.Instants) error {
	m := newBillingModel(billingSeed, tl)
	if err := execAll(ctx, db,
		`CREATE SCHEMA IF NOT EXISTS crm`,
		`CREATE SCHEMA IF NOT EXISTS usage`,
		`CREATE SCHEMA IF NOT EXISTS billing`,
		`DROP TABLE IF EXISTS usage.usage_hourly_v2`,
		`CREATE OR REPLACE TABLE crm.accounts (
			account_id       VARCHAR   NOT NULL,
			account_name     VARCHAR   NOT NULL,
			plan             VARCHAR   NOT NULL,
			region           VARCHAR   NOT NULL,
			billing_currency VARCHAR   NOT NULL,
			created_at       TIMESTAMP NOT NULL,
			updated_at       TIMESTAMP NOT NULL
		)`,
		`CREATE OR REPLACE TABLE usage.usage_hourly `+usageHourlyDDL,
	); err != nil {
		return err
	}
	accts := m.accounts
	if err := appendRows(ctx, db, "crm", "accounts", len(accts), func(i int) []driver.Value {
		a := accts[i]
		return []driver.Value{a.ID, a.Name, a.Plan, a.Region, a.Currency, a.CreatedAt, a.CreatedAt}
	}); err != nil {
		return err
	}
	rows := m.rows(tl.HistoryStart, tl.QualityCheck, rollupV1)
	if err := appendUsage(ctx, db, "usage_hourly", rows); err != nil {
		return err
	}
	// dbt's 15:00 build read the source as it stood then.
	built := m.billable(m.rows(tl.HistoryStart, tl.DBTBuild, rollupV1))
	if err := execAll(ctx, db,
		`CREATE OR REPLACE TABLE billing.dim_accounts AS
		SELECT account_id, account_name, plan, region, billing_currency, created_at
		FROM crm.accounts ORDER BY account_id`,
		`CREATE OR REPLACE TABLE billing.fct_billable_egress `+billableDDL,
	); err != nil {
		return err
	}
	return appendRows(ctx, db, "billing", "fct_billable_egress", len(built), func(i int) []driver.Value {
		b := built[i]
		return []driver.Value{b.AccountID, b.Day, b.Plan, b.Currency, b.RequestCount, b.BillableBytes, tl.DBTBuild}
	})
}

func appendUsage(ctx context.Context, db *sql.DB, table string, rows []usageRow) error {
	return appendRows(ctx, db, "usage", table, len(rows), func(i int) []driver.Value {
		r := rows[i]
		var egress driver.Value
		if !r.EgressNull {
			egress = r.EgressBytes
		}
		return []driver.Value{r.UsageID, r.AccountID, r.Region, r.WindowStart, r.WindowEnd, r.RequestCount, egress, r.IngestedAt}
	})
}

// fixBilling runs the approved steps on the demo data. usage_hourly_v2 is
// the corrected statement's output from today's 00:00 offsets; its earlier
// days are backfilled from usage_hourly (complete and correct then) so
// checks on the new table have a baseline. The dbt diff points the
// source's today's hours at the new table.
func fixBilling(ctx context.Context, db *sql.DB, tl demo.Instants) error {
	m := newBillingModel(billingSeed, tl)
	if err := execAll(ctx, db,
		`CREATE OR REPLACE TABLE usage.usage_hourly_v2 `+usageHourlyDDL,
		`INSERT INTO usage.usage_hourly_v2 SELECT * FROM usage.usage_hourly
		WHERE window_start < `+sqlTime(tl.Day)+` ORDER BY window_start, account_id`,
	); err != nil {
		return err
	}
	if err := appendUsage(ctx, db, "usage_hourly_v2", m.rows(tl.Day, tl.Verify, rollupV2)); err != nil {
		return err
	}
	return execAll(ctx, db, `CREATE OR REPLACE TABLE billing.fct_billable_egress `+billableDDL,
		`INSERT INTO billing.fct_billable_egress
		WITH usage AS (
			SELECT account_id, window_start, request_count, egress_bytes
			FROM usage.usage_hourly WHERE window_start < `+sqlTime(tl.Day)+`
			UNION ALL
			SELECT account_id, window_start, request_count, egress_bytes
			FROM usage.usage_hourly_v2 WHERE window_start >= `+sqlTime(tl.Day)+`
		)
		SELECT u.account_id,
			CAST(u.window_start AS DATE) AS day,
			a.plan,
			a.billing_currency,
			CAST(SUM(u.request_count) AS BIGINT) AS request_count,
			CAST(SUM(COALESCE(u.egress_bytes, 0)) AS BIGINT) AS billable_bytes,
			`+sqlTime(tl.Verify)+` AS built_at
		FROM usage AS u JOIN billing.dim_accounts AS a USING (account_id)
		GROUP BY ALL
		ORDER BY day, account_id`)
}
