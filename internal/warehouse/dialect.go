package warehouse

import "strings"

// DuckDB spells SQL for DuckDB: double-quoted identifiers, case-insensitive
// name matching.
type DuckDB struct{}

// Name is "duckdb".
func (DuckDB) Name() string { return "duckdb" }

// QuoteIdent double-quotes an identifier, doubling embedded quotes.
func (DuckDB) QuoteIdent(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }

// Table quotes each part of a table's name.
func (d DuckDB) Table(t TableRef) string { return joinQuoted(d, t) }

// SameIdent compares case-insensitively, as DuckDB resolves names.
func (DuckDB) SameIdent(a, b string) bool { return strings.EqualFold(a, b) }

// MaxStatementBytes is generous: DuckDB has no practical statement limit.
func (DuckDB) MaxStatementBytes() int { return 64 << 20 }

func joinQuoted(d Dialect, t TableRef) string {
	var parts []string
	if t.Database != "" {
		parts = append(parts, d.QuoteIdent(t.Database))
	}
	if t.Schema != "" {
		parts = append(parts, d.QuoteIdent(t.Schema))
	}
	parts = append(parts, d.QuoteIdent(t.Name))
	return strings.Join(parts, ".")
}

// BigQuery spells GoogleSQL: backticked identifiers and one backticked
// path for a table (`project.dataset.table`).
type BigQuery struct{}

// Name is "bigquery".
func (BigQuery) Name() string { return "bigquery" }

// QuoteIdent backticks an identifier. Catalog names cannot hold a backtick
// or a backslash, but both are escaped so a quoted name can never end early.
func (BigQuery) QuoteIdent(s string) string { return "`" + bigQueryEscaper.Replace(s) + "`" }

// Table quotes the whole dotted path at once, as BigQuery documents it.
func (BigQuery) Table(t TableRef) string {
	parts := make([]string, 0, 3)
	for _, p := range []string{t.Database, t.Schema, t.Name} {
		if p != "" {
			parts = append(parts, bigQueryEscaper.Replace(p))
		}
	}
	return "`" + strings.Join(parts, ".") + "`"
}

// SameIdent compares case-insensitively: column names are case-insensitive
// in BigQuery, and a table name differing only in case is a mistake worth
// matching rather than refusing.
func (BigQuery) SameIdent(a, b string) bool { return strings.EqualFold(a, b) }

// MaxStatementBytes is BigQuery's maximum standard SQL query length,
// 1,024K characters; counting bytes keeps us under it.
func (BigQuery) MaxStatementBytes() int { return 1024 * 1024 }

var bigQueryEscaper = strings.NewReplacer("\\", "\\\\", "`", "\\`")

// Snowflake spells Snowflake SQL: double-quoted identifiers using the
// catalog's spelling, which for unquoted names is upper case.
type Snowflake struct{}

// Name is "snowflake".
func (Snowflake) Name() string { return "snowflake" }

// QuoteIdent double-quotes an identifier, doubling embedded quotes. The
// caller passes the catalog spelling, so a quoted upper-case name still
// matches a table created unquoted.
func (Snowflake) QuoteIdent(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }

// Table quotes each part of a table's name.
func (d Snowflake) Table(t TableRef) string { return joinQuoted(d, t) }

// SameIdent compares case-insensitively: Snowflake stores unquoted names in
// upper case, and people type them in lower case.
func (Snowflake) SameIdent(a, b string) bool { return strings.EqualFold(a, b) }

// MaxStatementBytes is Snowflake's 1 MB statement limit.
func (Snowflake) MaxStatementBytes() int { return 1 << 20 }
