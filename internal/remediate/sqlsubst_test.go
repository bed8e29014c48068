package remediate

import (
	"errors"
	"testing"

	"github.com/dataworkers/dw/internal/warehouse"
)

// Only the references to the replaced table in FROM and JOIN positions
// change, to the replacement's name quoted by the dialect (aliased to the
// old name when there was no alias); every other byte of the team's SQL
// stays as written.
func TestSubstituteTable(t *testing.T) {
	to := warehouse.TableRef{Database: "wh", Schema: "shop", Name: "orders_v2"}
	from := []string{"wh", "shop", "orders"}
	duck := warehouse.DuckDB{}
	for _, c := range []struct{ in, want string }{
		{`SELECT count(*) AS n FROM shop.orders`, `SELECT count(*) AS n FROM "wh"."shop"."orders_v2" AS orders`},
		{`SELECT orders.amount FROM wh.shop.orders WHERE orders.amount > 0`, `SELECT orders.amount FROM "wh"."shop"."orders_v2" AS orders WHERE orders.amount > 0`},
		{`select sum(o.amount) from "shop"."orders" o join shop.refunds r on r.id = o.order_id`,
			`select sum(o.amount) from "wh"."shop"."orders_v2" o join shop.refunds r on r.id = o.order_id`},
		{`SELECT 1 FROM shop.refunds r JOIN shop.orders AS o ON o.id = r.id`, `SELECT 1 FROM shop.refunds r JOIN "wh"."shop"."orders_v2" AS o ON o.id = r.id`},
		{"SELECT EXTRACT(hour FROM created_at) AS h, count(*) AS n -- from shop.orders\nFROM shop.refunds, shop.orders GROUP BY 1",
			"SELECT EXTRACT(hour FROM created_at) AS h, count(*) AS n -- from shop.orders\nFROM shop.refunds, \"wh\".\"shop\".\"orders_v2\" AS orders GROUP BY 1"},
		{`WITH t AS (SELECT * FROM shop.orders) SELECT count(*) AS n FROM t`, `WITH t AS (SELECT * FROM "wh"."shop"."orders_v2" AS orders) SELECT count(*) AS n FROM t`},
		{`SELECT count(*) AS n FROM (SELECT * FROM orders) x`, `SELECT count(*) AS n FROM (SELECT * FROM "wh"."shop"."orders_v2" AS orders) x`},
		// An alias quoted right after the name (found by FuzzSubstituteTable):
		// spliced without a space it would become part of the quoted name.
		{`SELECT count(*) AS n FROM orders"o"`, `SELECT count(*) AS n FROM "wh"."shop"."orders_v2" "o"`},
	} {
		got, err := substituteTable(c.in, duck, from, to)
		if err != nil || got != c.want {
			t.Errorf("%s\n got %q, %v\nwant %q", c.in, got, err, c.want)
		}
	}
	// BigQuery quotes a whole path in one pair of backticks.
	bq, err := substituteTable("SELECT count(*) AS n FROM `wh.shop.orders` WHERE x > 0", warehouse.BigQuery{}, from, to)
	if want := "SELECT count(*) AS n FROM `wh.shop.orders_v2` AS `orders` WHERE x > 0"; err != nil || bq != want {
		t.Errorf("bigquery: got %q, %v; want %q", bq, err, want)
	}
	// In BigQuery a triple-quoted string is one token (quotes inside and
	// all), " quotes a string and # opens a comment: none is a reference.
	bq, err = substituteTable("SELECT '''a\n'it''' AS s, \"b\" AS t # FROM shop.orders\nFROM shop.orders", warehouse.BigQuery{}, from, to)
	if want := "SELECT '''a\n'it''' AS s, \"b\" AS t # FROM shop.orders\nFROM `wh.shop.orders_v2` AS orders"; err != nil || bq != want {
		t.Errorf("bigquery: got %q, %v; want %q", bq, err, want)
	}
}

// Whatever cannot be read for certain is refused, never guessed.
func TestSubstituteTableRefuses(t *testing.T) {
	to := warehouse.TableRef{Schema: "shop", Name: "orders_v2"}
	from := []string{"shop", "orders"}
	for _, in := range []string{
		`SELECT count(*) FROM information_schema.tables WHERE table_name = 'orders'`,
		`SELECT sum(shop.orders.amount) FROM shop.orders`,
		`WITH orders AS (SELECT * FROM shop.orders) SELECT count(*) FROM orders`,
		`SELECT count(*) FROM shop.orders AT (OFFSET => -60)`,
		`SELECT count(*) FROM shop.refunds`,
		`SELECT $$orders$$ AS x FROM shop.orders`,
		`SELECT 'it\'s' AS x FROM shop.orders`,
		`SELECT count(*) FROM shop.orders /* unterminated`,
		// PostgreSQL and DuckDB end this comment at the last */, others at the first.
		`SELECT count(*) FROM shop.refunds /* a /* nested */ JOIN shop.orders o ON true */`,
	} {
		got, err := substituteTable(in, warehouse.DuckDB{}, from, to)
		var us *unsubstitutable
		if !errors.As(err, &us) {
			t.Errorf("%s: got %q, %v; want a refusal", in, got, err)
		}
	}
}
