package checks

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/dataworkers/dw/internal/lineage/ingest"
	"github.com/dataworkers/dw/internal/store"
	"github.com/dataworkers/dw/internal/warehouse"
)

// Expectations from dbt's tests live beside the team's, never in their
// place. They are stored in quality_expectations under the warehouse key
// "dbt:<warehouse>", so an import can never overwrite what a team set
// with set_quality_expectations, and a re-import replaces only what the
// last import of the same project recorded. When a table is checked the
// two are merged (mergeDBT) and the team wins wherever both speak of the
// same thing: a team's expectation was set against this warehouse's table
// on purpose (resolved against its catalog, perhaps knowingly relaxing a
// test during a backfill), while dbt's tests are the project's general
// floor. Everything dbt declares that the team did not is checked.

// dbtKey is the warehouse key of expectations recorded from dbt tests.
func dbtKey(warehouseName string) string { return "dbt:" + warehouseName }

// dbtDoc is the stored document: the expectations and the project whose
// manifest recorded them.
type dbtDoc struct {
	Expectations
	Project string `json:"dbt_project"`
}

// FromDBTTests turns dbt's generic tests into expectations, per tested
// table (by asset id): unique declares the key (a repeat fails the check),
// not_null allows a null rate of 0, accepted_values lists the values,
// relationships requires every value to exist in the referenced column.
// The expectations are in dbt's spelling, resolved against the catalog
// when the table is checked. recorded counts, per test name, the tests
// that became an expectation; notes name the ones that could not.
func FromDBTTests(tests []ingest.DBTTest) (byAsset map[string]*Expectations, recorded map[string]int, notes []string) {
	byAsset, recorded = map[string]*Expectations{}, map[string]int{}
	for _, t := range tests {
		e := byAsset[t.Asset]
		if e == nil {
			e = &Expectations{}
			byAsset[t.Asset] = e
		}
		switch t.Name {
		case "unique":
			switch {
			case len(e.Key) == 0:
				e.Key = []string{t.Column}
			case !slices.Contains(e.Key, t.Column):
				// One key per table: another unique column is a second
				// key, which a predicate cannot state either.
				notes = append(notes, fmt.Sprintf("%s: unique on %s is not checked; the key is %s (one key per table)", t.Asset, t.Column, e.Key[0]))
				continue
			}
		case "not_null":
			if e.MaxNullRate == nil {
				e.MaxNullRate = map[string]float64{}
			}
			e.MaxNullRate[t.Column] = 0
		case "accepted_values":
			i := slices.IndexFunc(e.AcceptedValues, func(a AcceptedValues) bool { return a.Column == t.Column })
			if i < 0 {
				e.AcceptedValues = append(e.AcceptedValues, AcceptedValues{Column: t.Column, Values: t.Values})
				break
			}
			// Two lists for one column: a value must be in both.
			e.AcceptedValues[i].Values = slices.DeleteFunc(e.AcceptedValues[i].Values, func(v string) bool { return !slices.Contains(t.Values, v) })
		case "relationships":
			to := tablePath(t.To)
			if to == "" || t.Field == "" {
				notes = append(notes, fmt.Sprintf("%s: relationships test on %s is not checked: the manifest names no referenced table and field", t.Asset, t.Column))
				continue
			}
			r := Relationship{Column: t.Column, To: to, Field: t.Field}
			if slices.Contains(e.Relationships, r) {
				continue
			}
			e.Relationships = append(e.Relationships, r)
		default:
			continue
		}
		recorded[t.Name]++
	}
	for asset, e := range byAsset {
		if len(e.Key) == 0 && len(e.MaxNullRate) == 0 && len(e.AcceptedValues) == 0 && len(e.Relationships) == 0 {
			delete(byAsset, asset)
		}
	}
	sort.Strings(notes)
	return byAsset, recorded, notes
}

// tablePath is the schema.table of a warehouse asset id
// (duckdb://dbt.main.customers -> main.customers). The database is left
// out: dbt names the database it built in, which a configured warehouse
// may call otherwise (a DuckDB file's catalog), and the table is resolved
// against the warehouse's catalog when it is checked.
func tablePath(asset string) string {
	_, path, ok := strings.Cut(asset, "://")
	if !ok || path == "" {
		return ""
	}
	parts := strings.Split(path, ".")
	if len(parts) > 2 {
		parts = parts[len(parts)-2:]
	}
	return strings.Join(parts, ".")
}

// DBTRecord is what an import recorded from a manifest's tests.
type DBTRecord struct {
	// Recorded counts the tests that became expectations.
	Recorded int            `json:"recorded" jsonschema:"dbt tests recorded as quality expectations (source dbt)"`
	ByTest   map[string]int `json:"by_test" jsonschema:"expectations recorded per dbt test: unique, not_null, accepted_values, relationships"`
	Tables   int            `json:"tables" jsonschema:"tables with expectations from dbt tests"`
	// Warehouses are the configured warehouses they apply to.
	Warehouses []string `json:"warehouses" jsonschema:"configured warehouses the expectations apply to (those of the manifest's adapter)"`
	Notes      []string `json:"notes,omitempty" jsonschema:"tests not recorded and why"`
}

// RecordDBTTests records the expectations a manifest's tests declare, for
// every configured warehouse of the test's platform (warehouses maps a
// platform such as duckdb to those names). It replaces what an earlier
// import of the same project recorded, in one transaction, and never
// touches what a team set (see the package note above).
func RecordDBTTests(ctx context.Context, db *store.DB, project string, warehouses map[string][]string, tests []ingest.DBTTest, at time.Time) (*DBTRecord, error) {
	var rec *DBTRecord
	err := db.InTx(ctx, func(tx *store.Tx) error {
		var err error
		rec, err = recordDBTTests(ctx, tx, project, warehouses, tests, at)
		return err
	})
	if err != nil {
		return nil, err
	}
	return rec, nil
}

// recordDBTTests is RecordDBTTests inside tx: ImportDBT runs it in the
// transaction that swaps the manifest's graph in.
func recordDBTTests(ctx context.Context, tx *store.Tx, project string, warehouses map[string][]string, tests []ingest.DBTTest, at time.Time) (*DBTRecord, error) {
	byAsset, recorded, notes := FromDBTTests(tests)
	rec := &DBTRecord{ByTest: recorded, Notes: notes, Warehouses: []string{}}
	type row struct{ key, ref, doc string }
	var rows []row
	targets := map[string]bool{}
	unplaced := map[string]int{}
	assets := make([]string, 0, len(byAsset))
	for a := range byAsset {
		assets = append(assets, a)
	}
	sort.Strings(assets)
	for _, asset := range assets {
		platform, path, _ := strings.Cut(asset, "://")
		names := warehouses[platform]
		if len(names) == 0 {
			unplaced[platform]++
			continue
		}
		doc, err := json.Marshal(dbtDoc{Expectations: *byAsset[asset], Project: project})
		if err != nil {
			return nil, err
		}
		for _, w := range names {
			targets[w] = true
			rows = append(rows, row{dbtKey(w), strings.ToLower(path), string(doc)})
		}
		rec.Tables++
	}
	for p, n := range unplaced {
		rec.Notes = append(rec.Notes, fmt.Sprintf("expectations of %d %s table(s) not recorded: no configured warehouse is %s", n, p, p))
	}
	if rec.Tables > 0 {
		for _, n := range recorded {
			rec.Recorded += n
		}
	} else {
		rec.ByTest = map[string]int{}
	}
	for w := range targets {
		rec.Warehouses = append(rec.Warehouses, w)
	}
	sort.Strings(rec.Warehouses)
	sort.Strings(rec.Notes)
	// What this project recorded before goes: a test removed from the
	// manifest is no longer an expectation.
	for w := range targets {
		old, err := tx.QueryContext(ctx, `SELECT table_ref, spec FROM quality_expectations WHERE warehouse = ?`, dbtKey(w))
		if err != nil {
			return nil, fmt.Errorf("read dbt expectations: %w", err)
		}
		var stale []string
		for old.Next() {
			var ref, spec string
			if err := old.Scan(&ref, &spec); err != nil {
				old.Close()
				return nil, err
			}
			var d dbtDoc
			if json.Unmarshal([]byte(spec), &d) == nil && d.Project == project {
				stale = append(stale, ref)
			}
		}
		if err := old.Close(); err != nil {
			return nil, err
		}
		for _, ref := range stale {
			if _, err := tx.ExecContext(ctx, `DELETE FROM quality_expectations WHERE warehouse = ? AND table_ref = ?`, dbtKey(w), ref); err != nil {
				return nil, fmt.Errorf("replace dbt expectations: %w", err)
			}
		}
	}
	for _, r := range rows {
		if _, err := tx.ExecContext(ctx, `INSERT INTO quality_expectations (warehouse, table_ref, spec, updated_ms) VALUES (?, ?, ?, ?)
			ON CONFLICT (warehouse, table_ref) DO UPDATE SET spec = excluded.spec, updated_ms = excluded.updated_ms`,
			r.key, r.ref, r.doc, store.Millis(at)); err != nil {
			return nil, fmt.Errorf("record dbt expectations for %s: %w", r.ref, err)
		}
	}
	return rec, nil
}

// loadDBT reads the expectations dbt's tests recorded for a table of a
// warehouse. dbt names tables database.schema.table in its own spelling,
// so they are matched on schema and table, ignoring case; where several
// databases match, the one named like the table's wins.
func loadDBT(ctx context.Context, q store.Querier, warehouseName string, table warehouse.TableRef) (*Expectations, error) {
	want := strings.ToLower(table.Name)
	if table.Schema != "" {
		want = strings.ToLower(table.Schema) + "." + want
	}
	like := "%." + strings.NewReplacer("!", "!!", "%", "!%", "_", "!_").Replace(want)
	rows, err := q.QueryContext(ctx, `SELECT table_ref, spec FROM quality_expectations
		WHERE warehouse = ? AND (table_ref = ? OR table_ref LIKE ? ESCAPE '!') ORDER BY table_ref`, dbtKey(warehouseName), want, like)
	if err != nil {
		return nil, fmt.Errorf("load dbt expectations for %s: %w", table, err)
	}
	defer rows.Close()
	var best *Expectations
	bestExact := false
	for rows.Next() {
		var ref, spec string
		if err := rows.Scan(&ref, &spec); err != nil {
			return nil, err
		}
		if ref != want && !strings.HasSuffix(ref, "."+want) {
			continue
		}
		var d dbtDoc
		if err := json.Unmarshal([]byte(spec), &d); err != nil {
			return nil, fmt.Errorf("dbt expectations stored for %s are unreadable: %w", ref, err)
		}
		exact := strings.EqualFold(ref, table.String())
		if best == nil || (exact && !bestExact) {
			e := d.Expectations
			best, bestExact = &e, exact
		}
	}
	if err := rows.Err(); err != nil && err != sql.ErrNoRows {
		return nil, err
	}
	return best, nil
}

// mergeDBT lays dbt's expectations under the team's (nil for none): the
// team's key, null rate, accepted values or relationship for a column
// wins; what only dbt declares is added and marked as dbt's.
func mergeDBT(team, dbt *Expectations) *Expectations {
	out := Expectations{}
	if team != nil {
		out = *team
		out.MaxNullRate = nil
		for c, r := range team.MaxNullRate {
			if out.MaxNullRate == nil {
				out.MaxNullRate = map[string]float64{}
			}
			out.MaxNullRate[c] = r
		}
		out.AcceptedValues = slices.Clone(team.AcceptedValues)
		out.Relationships = slices.Clone(team.Relationships)
	}
	out.fromDBT = map[string]bool{}
	if len(out.Key) == 0 && len(dbt.Key) > 0 {
		out.Key = slices.Clone(dbt.Key)
		out.fromDBT["key"] = true
	}
	for c, r := range dbt.MaxNullRate {
		if hasFold(keysOfRates(out.MaxNullRate), c) {
			continue
		}
		if out.MaxNullRate == nil {
			out.MaxNullRate = map[string]float64{}
		}
		out.MaxNullRate[c] = r
		out.fromDBT["null:"+c] = true
	}
	for _, a := range dbt.AcceptedValues {
		if slices.ContainsFunc(out.AcceptedValues, func(t AcceptedValues) bool { return strings.EqualFold(t.Column, a.Column) }) {
			continue
		}
		out.AcceptedValues = append(out.AcceptedValues, a)
		out.fromDBT["values:"+a.Column] = true
	}
	for _, r := range dbt.Relationships {
		if slices.ContainsFunc(out.Relationships, func(t Relationship) bool {
			return strings.EqualFold(t.Column, r.Column) && strings.EqualFold(t.Field, r.Field) && strings.EqualFold(tablePath("x://"+t.To), r.To)
		}) {
			continue
		}
		out.Relationships = append(out.Relationships, r)
		out.fromDBT["rel:"+r.Column+">"+r.To+"."+r.Field] = true
	}
	return &out
}

func keysOfRates(m map[string]float64) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

func hasFold(xs []string, s string) bool {
	return slices.ContainsFunc(xs, func(x string) bool { return strings.EqualFold(x, s) })
}
