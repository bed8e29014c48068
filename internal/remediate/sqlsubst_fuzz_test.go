package remediate

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/dataworkers/dw/internal/sqlscan"
	"github.com/dataworkers/dw/internal/warehouse"
)

// FuzzSubstituteTable: rewriting a team's metric SQL to read the
// replacement either refuses, or yields SQL that reads for certain and
// whose tokens are the input's, except that each reference to the replaced
// table in a FROM or JOIN position (the whole dotted name, naming the
// table's last parts) became the replacement's quoted name, followed by
// AS and the old name when the reference had no alias. Nothing else moves:
// no word, literal, operator or other table.
func FuzzSubstituteTable(f *testing.F) {
	for _, s := range []string{
		`SELECT count(*) AS n FROM shop.orders`,
		`SELECT orders.amount FROM wh.shop.orders WHERE orders.amount > 0`,
		`select sum(o.amount) from "shop"."orders" o join shop.refunds r on r.id = o.order_id`,
		`SELECT 1 FROM shop.refunds r JOIN shop.orders AS o ON o.id = r.id`,
		"SELECT EXTRACT(hour FROM created_at) AS h -- from shop.orders\nFROM shop.refunds, shop.orders GROUP BY 1",
		`WITH t AS (SELECT * FROM shop.orders) SELECT count(*) AS n FROM t`,
		`SELECT count(*) AS n FROM (SELECT * FROM orders) x`,
		"SELECT count(*) AS n FROM `wh.shop.orders` WHERE x > 0",
		"SELECT '''a\n'it''' AS s, \"b\" AS t # FROM shop.orders\nFROM shop.orders",
		`SELECT sum(shop.orders.amount) FROM shop.orders`,
		`WITH orders AS (SELECT * FROM shop.orders) SELECT count(*) FROM orders`,
		`SELECT count(*) FROM shop.orders AT (OFFSET => -60)`,
		`SELECT $$orders$$ AS x FROM shop.orders`,
		`SELECT count(*) FROM shop.orders /* unterminated`,
		`SELECT * FROM orders, orders o2, "ORDERS" JOIN Shop.Orders USING (id)`,
		`SELECT * FROM read_parquet('x') JOIN orders ON true`,
		`SELECT * FROM shop . /* c */ orders`,
	} {
		for d := range byte(3) {
			f.Add(s, d)
		}
	}
	f.Fuzz(func(t *testing.T, sql string, pick byte) {
		defer time.AfterFunc(5*time.Second, func() { panic(fmt.Sprintf("substitution took over 5s: %q", sql)) }).Stop()
		d := []warehouse.Dialect{warehouse.DuckDB{}, warehouse.BigQuery{}, warehouse.Snowflake{}}[pick%3]
		from := []string{"wh", "shop", "orders"}
		with := warehouse.TableRef{Database: "wh", Schema: "shop", Name: "orders_v2"}
		out, err := substituteTable(sql, d, from, with)
		if err != nil {
			if _, ok := err.(*unsubstitutable); !ok || err.Error() == "" {
				t.Fatalf("%q: error %T %v, want a reason it cannot be substituted", sql, err, err)
			}
			return
		}
		in, err := tokenize(sql, d)
		if err != nil {
			t.Fatalf("%q substituted though it does not tokenize: %v", sql, err)
		}
		got, err := tokenize(out, d)
		if err != nil {
			t.Fatalf("%q became %q, which does not tokenize: %v", sql, out, err)
		}
		repl, err := tokenize(d.Table(with), d)
		if err != nil {
			t.Fatal(err)
		}
		if why := onlyReferencesDiffer(d, in, got, repl, from); why != "" {
			t.Fatalf("%s:\n in  %q\n out %q\n%s", d.Name(), sql, out, why)
		}
	})
}

// onlyReferencesDiffer checks out against in token by token and says how
// they differ otherwise than by substituted references ("" when not).
func onlyReferencesDiffer(d warehouse.Dialect, in, out, repl []sqlscan.Token, from []string) string {
	same := func(a, b sqlscan.Token) bool { return a.Kind == b.Kind && a.Value == b.Value }
	substituted := 0
	i, j := 0, 0
	for i < len(in) || j < len(out) {
		if n, names := dottedName(d, in, i); n > 0 && suffixOf(d, names, from) && hasPrefix(out[j:], repl, same) {
			if i == 0 || !(in[i-1].IsKeyword("FROM") || in[i-1].IsKeyword("JOIN") || in[i-1].IsPunct(',')) {
				return fmt.Sprintf("token %d: a reference substituted after %q, not in a FROM or JOIN position", i, in[max(i-1, 0)].Text)
			}
			i, j = i+n, j+len(repl)
			substituted++
			// The alias added when the reference had none: the old name.
			if j+1 < len(out) && out[j].IsKeyword("AS") && !(i < len(in) && in[i].IsKeyword("AS")) {
				if a := out[j+1]; !(a.Kind == sqlscan.Word || a.Kind == sqlscan.Quoted) || !d.SameIdent(a.Value, names[len(names)-1]) {
					return fmt.Sprintf("token %d: alias %q added, want the old name %q", j+1, a.Text, names[len(names)-1])
				}
				j += 2
			}
			continue
		}
		if i >= len(in) || j >= len(out) || !same(in[i], out[j]) {
			return fmt.Sprintf("tokens differ at in %d / out %d: %s vs %s", i, j, tokText(in, i), tokText(out, j))
		}
		i, j = i+1, j+1
	}
	if substituted == 0 {
		return "nothing was substituted, yet no refusal"
	}
	return ""
}

// dottedName reads the longest name a.b.c at toks[i]: how many tokens it
// takes and its name parts (a BigQuery backtick pair may hold a path).
func dottedName(d warehouse.Dialect, toks []sqlscan.Token, i int) (int, []string) {
	var names []string
	n := 0
	for {
		if i+n >= len(toks) || toks[i+n].Kind != sqlscan.Word && toks[i+n].Kind != sqlscan.Quoted {
			return 0, nil
		}
		t := toks[i+n]
		if t.Kind == sqlscan.Quoted && d.Name() == "bigquery" {
			names = append(names, strings.Split(t.Value, ".")...)
		} else {
			names = append(names, t.Value)
		}
		n++
		if i+n+1 < len(toks) && toks[i+n].IsPunct('.') && (toks[i+n+1].Kind == sqlscan.Word || toks[i+n+1].Kind == sqlscan.Quoted) {
			n++
			continue
		}
		return n, names
	}
}

func suffixOf(d warehouse.Dialect, names, full []string) bool {
	if len(names) > len(full) {
		return false
	}
	for k, n := range names {
		if !d.SameIdent(n, full[len(full)-len(names)+k]) {
			return false
		}
	}
	return true
}

func hasPrefix(s, p []sqlscan.Token, same func(a, b sqlscan.Token) bool) bool {
	if len(s) < len(p) {
		return false
	}
	for k := range p {
		if !same(s[k], p[k]) {
			return false
		}
	}
	return true
}

func tokText(toks []sqlscan.Token, i int) string {
	if i >= len(toks) {
		return "the end"
	}
	return fmt.Sprintf("%q", toks[i].Text)
}
