package checks

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/dataworkers/dw/internal/warehouse"
)

// colKind is what the checks need to know about a column's type.
type colKind int

const (
	kindOther colKind = iota
	kindNumber
	kindText
	kindBool
	kindDate
	// kindNaiveTime is a timestamp without zone (DuckDB TIMESTAMP,
	// BigQuery DATETIME, Snowflake TIMESTAMP_NTZ), read as UTC.
	kindNaiveTime
	// kindInstant is a point in time (DuckDB TIMESTAMPTZ, BigQuery
	// TIMESTAMP, Snowflake TIMESTAMP_LTZ/TZ).
	kindInstant
)

func (k colKind) isTime() bool { return k == kindDate || k == kindNaiveTime || k == kindInstant }

// classify reads an information-schema type name. The three engines'
// names barely overlap except for TIMESTAMP, which is an instant on
// BigQuery and a naive timestamp elsewhere.
func classify(dialect, typ string) colKind {
	t := strings.ToUpper(strings.TrimSpace(typ))
	if i := strings.IndexAny(t, "(<"); i >= 0 {
		t = strings.TrimSpace(t[:i])
	}
	switch t {
	case "DATE":
		return kindDate
	case "TIMESTAMP WITH TIME ZONE", "TIMESTAMPTZ", "TIMESTAMP_TZ", "TIMESTAMP_LTZ":
		return kindInstant
	case "TIMESTAMP":
		if dialect == "bigquery" {
			return kindInstant
		}
		return kindNaiveTime
	case "DATETIME", "TIMESTAMP_NTZ", "TIMESTAMP WITHOUT TIME ZONE", "TIMESTAMP_S", "TIMESTAMP_MS", "TIMESTAMP_NS":
		return kindNaiveTime
	case "BOOLEAN", "BOOL":
		return kindBool
	case "VARCHAR", "TEXT", "STRING", "CHAR", "CHARACTER", "CHARACTER VARYING", "BPCHAR", "NVARCHAR", "NCHAR":
		return kindText
	case "TINYINT", "SMALLINT", "INTEGER", "INT", "BIGINT", "HUGEINT", "UTINYINT", "USMALLINT", "UINTEGER",
		"UBIGINT", "UHUGEINT", "INT64", "INT2", "INT4", "INT8", "BYTEINT", "FLOAT", "FLOAT4", "FLOAT8", "FLOAT64",
		"DOUBLE", "DOUBLE PRECISION", "REAL", "DECIMAL", "NUMERIC", "BIGNUMERIC", "BIGDECIMAL", "NUMBER":
		return kindNumber
	}
	return kindOther
}

// spelling writes the SQL the checks need in one engine's dialect. The
// warehouse.Dialect quotes names; this adds the functions whose spelling
// differs between engines.
type spelling struct {
	warehouse.Dialect
}

func spellingFor(d warehouse.Dialect) (*spelling, error) {
	switch d.Name() {
	case "duckdb", "bigquery", "snowflake":
		return &spelling{d}, nil
	}
	return nil, fmt.Errorf("no check SQL for dialect %q; supported: duckdb, bigquery, snowflake", d.Name())
}

// bucket truncates a time column to the start of its bucket, in UTC.
func (s *spelling) bucket(col string, k colKind, g Grain) string {
	q := s.QuoteIdent(col)
	if k == kindDate {
		return q // a date is its own day bucket; Plan refuses hours on dates
	}
	switch s.Name() {
	case "bigquery":
		unit := strings.ToUpper(string(g))
		if k == kindNaiveTime {
			return fmt.Sprintf("DATETIME_TRUNC(%s, %s)", q, unit)
		}
		return fmt.Sprintf("TIMESTAMP_TRUNC(%s, %s)", q, unit)
	case "snowflake":
		if k == kindInstant {
			q = fmt.Sprintf("CONVERT_TIMEZONE('UTC', %s)", q)
		}
		return fmt.Sprintf("DATE_TRUNC('%s', %s)", strings.ToUpper(string(g)), q)
	}
	if k == kindInstant {
		q = fmt.Sprintf("timezone('UTC', %s)", q)
	}
	return fmt.Sprintf("date_trunc('%s', %s)", g, q)
}

// timeLiteral spells an instant as a literal of the column's own type, so
// the comparison needs no cast of the column (which would defeat
// partition pruning).
func (s *spelling) timeLiteral(t time.Time, k colKind) string {
	t = t.UTC()
	day := t.Format("2006-01-02")
	stamp := t.Format("2006-01-02 15:04:05.999999")
	switch s.Name() {
	case "bigquery":
		switch k {
		case kindDate:
			return "DATE '" + day + "'"
		case kindNaiveTime:
			return "DATETIME '" + stamp + "'"
		}
		return "TIMESTAMP '" + stamp + "+00'"
	case "snowflake":
		switch k {
		case kindDate:
			return "'" + day + "'::DATE"
		case kindNaiveTime:
			return "'" + stamp + "'::TIMESTAMP_NTZ"
		}
		return "'" + stamp + " +00:00'::TIMESTAMP_TZ"
	}
	switch k {
	case kindDate:
		return "DATE '" + day + "'"
	case kindInstant:
		return "TIMESTAMPTZ '" + stamp + "+00'"
	}
	return "TIMESTAMP '" + stamp + "'"
}

// stringLiteral quotes text for the dialect. BigQuery and Snowflake treat
// a backslash in a literal as an escape, DuckDB does not, so each gets its
// own escaping; control characters are refused outright.
func (s *spelling) stringLiteral(v string) (string, error) {
	for _, r := range v {
		if r < 0x20 || r == 0x7f {
			return "", fmt.Errorf("value %q contains a control character; values must be plain text", v)
		}
	}
	switch s.Name() {
	case "bigquery":
		return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(v) + "'", nil
	case "snowflake":
		return "'" + strings.NewReplacer(`\`, `\\`, `'`, `''`).Replace(v) + "'", nil
	}
	return "'" + strings.ReplaceAll(v, "'", "''") + "'", nil
}

// numberLiteral spells a finite number.
func numberLiteral(v float64) (string, error) {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "", fmt.Errorf("%v is not a finite number", v)
	}
	if math.Abs(v) < 1e15 {
		return strconv.FormatFloat(v, 'f', -1, 64), nil
	}
	return strconv.FormatFloat(v, 'g', -1, 64), nil
}

// lagMillis is ingest minus event time in milliseconds.
func (s *spelling) lagMillis(event string, ek colKind, ingest string, ik colKind) string {
	e, i := s.QuoteIdent(event), s.QuoteIdent(ingest)
	switch s.Name() {
	case "bigquery":
		switch {
		case ek == kindInstant && ik == kindInstant:
			return fmt.Sprintf("TIMESTAMP_DIFF(%s, %s, MILLISECOND)", i, e)
		case ek == kindNaiveTime && ik == kindNaiveTime:
			return fmt.Sprintf("DATETIME_DIFF(%s, %s, MILLISECOND)", i, e)
		}
		if ek != kindInstant {
			e = "CAST(" + e + " AS TIMESTAMP)"
		}
		if ik != kindInstant {
			i = "CAST(" + i + " AS TIMESTAMP)"
		}
		return fmt.Sprintf("TIMESTAMP_DIFF(%s, %s, MILLISECOND)", i, e)
	case "snowflake":
		return fmt.Sprintf("DATEDIFF(MILLISECOND, %s, %s)", e, i)
	}
	return fmt.Sprintf("epoch_ms(%s) - epoch_ms(%s)", i, e)
}

// p95 is the 95th percentile of expr: exact on DuckDB, approximate where
// an exact one costs a sort of the whole table.
func (s *spelling) p95(expr string) string {
	switch s.Name() {
	case "bigquery":
		return fmt.Sprintf("APPROX_QUANTILES(%s, 100)[OFFSET(95)]", expr)
	case "snowflake":
		return fmt.Sprintf("APPROX_PERCENTILE(%s, 0.95)", expr)
	}
	return fmt.Sprintf("quantile_cont(%s, 0.95)", expr)
}

// approxQuantile is the q-th quantile of expr, approximate on every
// engine: the value profile computes two per numeric column in the one
// scan, and an exact quantile sorts the whole column for each.
func (s *spelling) approxQuantile(expr string, q float64) string {
	switch s.Name() {
	case "bigquery":
		return fmt.Sprintf("APPROX_QUANTILES(%s, 100)[OFFSET(%d)]", expr, int(q*100+0.5))
	case "snowflake":
		return fmt.Sprintf("APPROX_PERCENTILE(%s, %s)", expr, strconv.FormatFloat(q, 'f', -1, 64))
	}
	return fmt.Sprintf("approx_quantile(%s, %s)", expr, strconv.FormatFloat(q, 'f', -1, 64))
}

// medianAndP95 are the value profile's two quantiles of expr. On DuckDB
// both index one list-form approx_quantile: the planner computes an
// aggregate written twice once, so the column is sketched once rather
// than twice (measured on 10M rows: 8 s for the pair against 12 s for two
// separate quantiles), and each value is still a plain number.
func (s *spelling) medianAndP95(expr string) (median, p95 string) {
	if s.Name() == "duckdb" {
		pair := "approx_quantile(" + expr + ", [0.5, 0.95])"
		return pair + "[1]", pair + "[2]"
	}
	return s.approxQuantile(expr, 0.5), s.approxQuantile(expr, 0.95)
}

// approxDistinct counts distinct values with each engine's sketch
// (HyperLogLog): memory stays bounded whatever the column holds.
func (s *spelling) approxDistinct(q string) string {
	if s.Name() == "duckdb" {
		return "approx_count_distinct(" + q + ")"
	}
	return "APPROX_COUNT_DISTINCT(" + q + ")"
}

// topValue and topCount are a column's most common value and how many
// rows hold it. BigQuery and Snowflake keep a bounded space-saving sketch
// (APPROX_TOP_COUNT, APPROX_TOP_K); DuckDB has none that returns counts,
// so it counts exactly (histogram), which stays small because only
// low-cardinality columns are asked for it (gateTextProfiles). Both read
// the one histogram: DuckDB computes an aggregate a statement spells twice
// once, so the value costs nothing beside its count, where mode() counted
// the column again (a third of a category check's time on 10M rows). The
// value is the first of the tied counts in the histogram's key order (byte
// order for text: DuckDB returns the keys sorted, which
// TestTopValueOnATieIsTheFirstInOrder pins), so the same rows always give
// the same value; mode() gave any of them.
func (s *spelling) topValue(q string) string {
	switch s.Name() {
	case "bigquery":
		return "APPROX_TOP_COUNT(" + q + ", 1)[SAFE_OFFSET(0)].value"
	case "snowflake":
		return "APPROX_TOP_K(" + q + ", 1, 1000)[0][0]::VARCHAR"
	}
	h := "histogram(" + q + ")"
	return "map_keys(" + h + ")[list_position(map_values(" + h + "), list_max(map_values(" + h + ")))]"
}

func (s *spelling) topCount(q string) string {
	switch s.Name() {
	case "bigquery":
		return "APPROX_TOP_COUNT(" + q + ", 1)[SAFE_OFFSET(0)].count"
	case "snowflake":
		return "APPROX_TOP_K(" + q + ", 1, 1000)[0][1]::NUMBER"
	}
	return "list_max(map_values(histogram(" + q + ")))"
}

// antiJoin is the FROM and WHERE of a relationships check: the rows of t
// whose column holds a value that field of parent does not, within the
// window when there is one. Every name is resolved against the catalog
// and quoted by the dialect; the aliases keep a table that references
// itself (manager_id -> employee_id) apart.
func (s *spelling) antiJoin(t *warehouse.Table, col string, parent *warehouse.Table, field string, w Window) string {
	c := "c." + s.QuoteIdent(col)
	where := c + " IS NOT NULL"
	if w.Column != "" {
		if tc, err := t.Column(s, w.Column); err == nil {
			k := classify(s.Name(), tc.Type)
			q := "c." + s.QuoteIdent(tc.Name)
			where += " AND " + q + " >= " + s.timeLiteral(w.Start, k) + " AND " + q + " < " + s.timeLiteral(w.End, k)
		}
	}
	return "\nFROM " + s.Table(t.Ref) + " AS c\nWHERE " + where +
		"\n  AND NOT EXISTS (SELECT 1 FROM " + s.Table(parent.Ref) + " AS p WHERE p." + s.QuoteIdent(field) + " = " + c + ")"
}

// allNotNull is a condition true when every column has a value.
func (s *spelling) allNotNull(cols []string) string {
	parts := make([]string, len(cols))
	for i, c := range cols {
		parts[i] = s.QuoteIdent(c) + " IS NOT NULL"
	}
	return strings.Join(parts, " AND ")
}

// keyRows counts rows whose whole key is present.
func (s *spelling) keyRows(cols []string) string {
	if len(cols) == 1 {
		return "COUNT(" + s.QuoteIdent(cols[0]) + ")"
	}
	return "COUNT(CASE WHEN " + s.allNotNull(cols) + " THEN 1 END)"
}

// distinctKeys counts distinct present keys.
func (s *spelling) distinctKeys(cols []string) string {
	if len(cols) == 1 {
		return "COUNT(DISTINCT " + s.QuoteIdent(cols[0]) + ")"
	}
	quoted := make([]string, len(cols))
	for i, c := range cols {
		quoted[i] = s.QuoteIdent(c)
	}
	list := strings.Join(quoted, ", ")
	switch s.Name() {
	case "snowflake":
		// Snowflake counts distinct tuples and skips any with a null.
		return "COUNT(DISTINCT " + list + ")"
	case "bigquery":
		return fmt.Sprintf("COUNT(DISTINCT CASE WHEN %s THEN TO_JSON_STRING(STRUCT(%s)) END)", s.allNotNull(cols), list)
	}
	return fmt.Sprintf("COUNT(DISTINCT CASE WHEN %s THEN ROW(%s) END)", s.allNotNull(cols), list)
}
