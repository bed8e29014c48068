package remediate

import (
	"testing"

	"github.com/dataworkers/dw/internal/lineage"
)

// Verification compares asset ids by the identity rule incidents and
// domains use: a metric defined on a table spelled without its database,
// in another case or by the dbt model that builds it describes the table an
// incident names in full; another database's table of the same name, other
// tables, platforms or non-table assets are never the same.
func TestSameAssetRespectsTheDatabase(t *testing.T) {
	f := newFixture(t) // one DuckDB warehouse, wh.duckdb: its database is wh
	g := lineage.New(f.db, f.clk)
	if _, err := g.RecordLineage(f.ctx, lineage.Note{Assets: []lineage.NoteAsset{{ID: "dbt://model.shop.trips", Aliases: []string{"duckdb://wh.shop.trips"}}},
		Path: []string{"dbt://model.shop.trips", "sigma://workbook/trips"}}); err != nil {
		t.Fatal(err)
	}
	n := newNamer(f.env)
	for _, c := range []struct {
		a, b string
		same bool
	}{
		{"duckdb://shop.trips", "duckdb://wh.shop.trips", true},
		{"duckdb://shop.trips", "DUCKDB://Shop.Trips", true},
		{"duckdb://shop.trips", "dbt://model.shop.trips", true},
		{"dbt://model.shop.trips", "duckdb://wh.shop.trips", true},
		{"duckdb://shop.orders", "duckdb://wh.shop.orders", true},
		{"duckdb://dev.shop.trips", "duckdb://prod.shop.trips", false},
		{"duckdb://wh.shop.trips", "duckdb://dev.shop.trips", false},
		{"dbt://model.shop.trips", "duckdb://dev.shop.trips", false},
		{"duckdb://shop.trips", "duckdb://shop.trips_v2", false},
		{"duckdb://shop.trips", "snowflake://shop.trips", false},
		{"kafka://prod/trips", "kafka://staging/trips", false},
	} {
		got, err := n.same(f.ctx, c.a, c.b)
		if err != nil || got != c.same {
			t.Errorf("same(%s, %s) = %v %v, want %v", c.a, c.b, got, err, c.same)
		}
	}
}
