package benchmcp

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/dataworkers/dw/internal/config"
	"github.com/dataworkers/dw/internal/warehouse/snowflake"
	"github.com/dataworkers/dw/internal/warehouse/snowflake/snowflaketest"
)

// BenchmarkE2EFirstSnowflakeCall is the first warehouse call after start
// on a Snowflake warehouse: a dw-quality just started, its first call
// list_tables, which starts the Snowflake warehouse child, logs in, lists
// the schema's tables, counts them in one statement and describes each,
// against Snowflake's REST protocol served on loopback (snowflaketest,
// reached through the section's endpoint); against the same work by the
// driver in this process with a new connection pool (a new login), the
// lighter path on paper. Memory: the agent and its child after that call.
func BenchmarkE2EFirstSnowflakeCall(b *testing.B) {
	ctx := context.Background()
	f := snowflaketest.New(b)
	text := snowflaketest.Text
	tables := []string{"MEMBER_BALANCES", "MEMBERS", "POINTS_LEDGER", "REDEMPTIONS"}
	listed := snowflaketest.Result{Columns: []map[string]any{snowflaketest.Column("TABLE_CATALOG", "text"),
		snowflaketest.Column("TABLE_SCHEMA", "text"), snowflaketest.Column("TABLE_NAME", "text")}}
	counts := snowflaketest.Result{Columns: []map[string]any{snowflaketest.Column("I", "fixed"), snowflaketest.Column("N", "fixed")}}
	for i, t := range tables {
		listed.Rows = append(listed.Rows, []*string{text("ACME"), text("LOYALTY"), text(t)})
		counts.Rows = append(counts.Rows, []*string{text(fmt.Sprint(i)), text(fmt.Sprint(1000 * (i + 1)))})
	}
	f.Results["INFORMATION_SCHEMA.TABLES"] = listed
	f.Results["COUNT(*) AS n"] = counts
	f.Results["INFORMATION_SCHEMA.COLUMNS"] = snowflaketest.Result{
		Columns: []map[string]any{snowflaketest.Column("COLUMN_NAME", "text"), snowflaketest.Column("DATA_TYPE", "text"),
			snowflaketest.Column("N", "boolean"), snowflaketest.Column("ORDINAL_POSITION", "fixed")},
		Rows: [][]*string{{text("MEMBER_ID"), text("NUMBER"), text("false"), text("1")}, {text("BALANCE"), text("NUMBER"), text("true"), text("2")},
			{text("EVENT_TIME"), text("TIMESTAMP_NTZ"), text("true"), text("3")}},
	}
	host, port := f.Addr()
	b.Setenv("DW_BENCH_SF_PASSWORD", "not-a-real-password")
	section := config.Warehouse{Name: "sf", Kind: "snowflake", Account: "acme-xy12345", User: "DW_READER", PasswordEnv: "DW_BENCH_SF_PASSWORD",
		Database: "ACME", Schema: "LOYALTY", Endpoint: fmt.Sprintf("http://%s:%d", host, port)}
	home := b.TempDir()
	conf := filepath.Join(home, "dw.yaml")
	yaml := fmt.Sprintf("home: %s\nwarehouses:\n  - {name: %s, kind: snowflake, account: %s, user: %s, password_env: %s, database: %s, schema: %s, endpoint: %q}\n",
		home, section.Name, section.Account, section.User, section.PasswordEnv, section.Database, section.Schema, section.Endpoint)
	if err := os.WriteFile(conf, []byte(yaml), 0o600); err != nil {
		b.Fatal(err)
	}
	env := []string{"DW_HOME=" + home, "DW_CONFIG=" + conf}
	row := Row{Key: "warehouse-first", What: fmt.Sprintf("first Snowflake call after start (list_tables: log in, list, count and describe %d tables, REST protocol on loopback)", len(tables))}
	remoteFirstCalls(b, &row, env, len(tables), func() int {
		w, err := snowflake.OpenSection(ctx, &section)
		if err != nil {
			b.Fatal(err)
		}
		defer w.Close()
		return listTablesWork(b, ctx, w)
	})
}
