// Package warehouse is how the checks reach landed tables: a Warehouse runs
// read-only SQL with a deadline, lists tables and describes their columns
// from the information schema, and comes with the Dialect that quotes
// identifiers and spells SQL for its engine.
//
// User text never becomes SQL directly. A table or column name from a tool
// call is first checked to be a plausible identifier (ValidIdentifier), then
// resolved against the warehouse's own catalog (Resolve, Table.Column), and
// only the catalog's spelling, quoted by the dialect, reaches a statement.
//
// Drivers live in subpackages (duckdb, bigquery, snowflake) so a binary
// links only the engines it uses.
package warehouse

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/dataworkers/dw/internal/suggest"
	"github.com/dataworkers/dw/internal/textrule"
)

// Warehouse is one configured warehouse connection.
type Warehouse interface {
	// Name is the warehouse's name in dw.yaml.
	Name() string
	// Dialect spells SQL for this engine.
	Dialect() Dialect
	// Query runs one read-only statement. Implementations refuse anything
	// but SELECT/WITH, apply the default timeout when ctx has no deadline,
	// and tag the statement with the agent and tool in q for cost tracing.
	Query(ctx context.Context, q Query) (*Result, error)
	// ValidateQuery asks the engine itself, without running anything,
	// whether sqlText is exactly one read-only query (a SELECT), and, as
	// far as planning it shows, one that reads only the warehouse. It is
	// the gate for SQL a person or model wrote (team metrics), checked
	// when it is defined and again before it runs: a refusal matches
	// ErrRefused and says why in words that never quote data the
	// statement tried to reach.
	ValidateQuery(ctx context.Context, sqlText string) error
	// ListTables lists base tables and views visible to the connection.
	ListTables(ctx context.Context) ([]TableRef, error)
	// Describe returns a table's columns from the information schema.
	Describe(ctx context.Context, t TableRef) (*Table, error)
	// Close releases the connection.
	Close() error
}

// ErrRefused is matched (errors.Is) by every error for a statement a
// warehouse refused before running it: not one read-only query, or one
// that reaches outside the warehouse (files, URLs, extensions). The
// statement's author must change it; retrying cannot help.
var ErrRefused = errors.New("statement refused")

type refusedError struct{ msg string }

func (e *refusedError) Error() string        { return e.msg }
func (e *refusedError) Is(target error) bool { return target == ErrRefused }

// Refused is a refusal in the engine's words, matched by ErrRefused.
func Refused(format string, args ...any) error {
	return &refusedError{msg: fmt.Sprintf(format, args...)}
}

// Query is one statement and who asked for it.
type Query struct {
	SQL  string
	Args []any
	// Agent and Tool label the statement (BigQuery job labels, Snowflake
	// query tag) so a warehouse bill traces back to the tool that ran it.
	Agent string
	Tool  string
	// Timeout overrides the warehouse's default statement timeout.
	Timeout time.Duration
}

// Result is a small, fully read result set. Checks aggregate in the
// warehouse, so results are a handful of rows, never a table.
type Result struct {
	Columns []string
	Rows    [][]any
	// BytesScanned is the engine's estimate of bytes read, when it gives one.
	BytesScanned int64
}

// TableRef names a table by its catalog spelling.
type TableRef struct {
	Database string `json:"database,omitempty"`
	Schema   string `json:"schema"`
	Name     string `json:"name"`
}

// String is the dotted name, unquoted, for messages.
func (t TableRef) String() string {
	parts := make([]string, 0, 3)
	if t.Database != "" {
		parts = append(parts, t.Database)
	}
	if t.Schema != "" {
		parts = append(parts, t.Schema)
	}
	return strings.Join(append(parts, t.Name), ".")
}

// Column is one column of a table, from the information schema.
type Column struct {
	Name     string `json:"name"`
	Type     string `json:"type"`
	Nullable bool   `json:"nullable"`
	Position int    `json:"position"`
}

// Table is a table with its columns.
type Table struct {
	Ref     TableRef `json:"ref"`
	Columns []Column `json:"columns"`
}

// Column finds a column by name using the dialect's case rules; the error
// names the closest existing columns.
func (t *Table) Column(d Dialect, name string) (Column, error) {
	if err := ValidIdentifier(name); err != nil {
		return Column{}, fmt.Errorf("column %q: %w", name, err)
	}
	for _, c := range t.Columns {
		if d.SameIdent(c.Name, name) {
			return c, nil
		}
	}
	names := make([]string, len(t.Columns))
	for i, c := range t.Columns {
		names[i] = c.Name
	}
	return Column{}, fmt.Errorf("table %s has no column %q; closest: %s", t.Ref, name, strings.Join(suggest.Closest(name, names, 5), ", "))
}

// Dialect spells SQL for one engine.
type Dialect interface {
	// Name is the engine: duckdb, bigquery or snowflake.
	Name() string
	// QuoteIdent quotes one identifier taken from the catalog.
	QuoteIdent(ident string) string
	// Table is the fully qualified, quoted name of a table.
	Table(t TableRef) string
	// SameIdent reports whether two spellings name the same identifier
	// under the engine's case rules (an unquoted name the catalog stores
	// in upper case on Snowflake, any case on DuckDB and BigQuery).
	SameIdent(a, b string) bool
	// MaxStatementBytes is the largest statement the engine accepts; plans
	// larger than this are split.
	MaxStatementBytes() int
}

// Compiled on first use: a counted repetition like {0,254} compiles to
// one instruction per count, hundreds of KB built at every agent start.
var identRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_$\-]{0,254}$`) })

// ValidIdentifier refuses text that cannot be a table, schema or column
// name before anything is looked up: no quotes, dots, spaces or
// statement text. Hyphens are allowed because BigQuery project ids have them.
func ValidIdentifier(s string) error {
	if !identRE().MatchString(s) {
		return fmt.Errorf("%s is not a valid identifier: use letters, digits, _ , $ or -, starting with a letter or _, at most 255 characters", quoteShort(s))
	}
	return nil
}

// quoteShort quotes a name for an error, cut to its first 80 bytes: a
// hostile megabyte-long name must not come back in the answer.
func quoteShort(s string) string { return textrule.Quote(s) }

// ParseTableName splits "table", "schema.table" or "db.schema.table" and
// validates each part. It does not check that the table exists: Resolve does.
func ParseTableName(s string) (TableRef, error) {
	parts := strings.Split(strings.TrimSpace(s), ".")
	for _, p := range parts {
		if err := ValidIdentifier(p); err != nil {
			return TableRef{}, fmt.Errorf("table name %s: %w", quoteShort(s), err)
		}
	}
	switch len(parts) {
	case 1:
		return TableRef{Name: parts[0]}, nil
	case 2:
		return TableRef{Schema: parts[0], Name: parts[1]}, nil
	case 3:
		return TableRef{Database: parts[0], Schema: parts[1], Name: parts[2]}, nil
	}
	return TableRef{}, fmt.Errorf("table name %s has %d parts; use table, schema.table or database.schema.table", quoteShort(s), len(parts))
}

// Resolve finds the table a user named in the warehouse's catalog and
// returns its catalog spelling with columns. An unknown table is an error
// naming the closest existing tables; a name matching several schemas asks
// for the schema.
func Resolve(ctx context.Context, w Warehouse, name string) (*Table, error) {
	want, err := ParseTableName(name)
	if err != nil {
		return nil, err
	}
	tables, err := w.ListTables(ctx)
	if err != nil {
		return nil, err
	}
	d := w.Dialect()
	var matches []TableRef
	for _, t := range tables {
		if !d.SameIdent(t.Name, want.Name) {
			continue
		}
		if want.Schema != "" && !d.SameIdent(t.Schema, want.Schema) {
			continue
		}
		if want.Database != "" && !d.SameIdent(t.Database, want.Database) {
			continue
		}
		matches = append(matches, t)
	}
	switch len(matches) {
	case 1:
		return w.Describe(ctx, matches[0])
	case 0:
		names := make([]string, len(tables))
		for i, t := range tables {
			names[i] = qualified(t)
		}
		return nil, fmt.Errorf("no table %q in warehouse %s; closest: %s", name, w.Name(), strings.Join(suggest.Closest(name, names, 5), ", "))
	}
	names := make([]string, len(matches))
	for i, t := range matches {
		names[i] = qualified(t)
	}
	return nil, fmt.Errorf("table name %q is ambiguous in warehouse %s; name one of: %s", name, w.Name(), strings.Join(names, ", "))
}

func qualified(t TableRef) string {
	if t.Schema == "" {
		return t.Name
	}
	return t.Schema + "." + t.Name
}

// ReadOnlyStatement refuses statements that are not a single SELECT or WITH
// query, by their text (a refusal matched by ErrRefused). It is a cheap
// first pass, not the boundary: it refuses more than it must (a semicolon
// in a string) and judges nothing inside a SELECT. The boundary is the
// engine's own reading (ValidateQuery, and DuckDB's locked connection).
func ReadOnlyStatement(sqlText string) error {
	s := strings.TrimSpace(sqlText)
	s = strings.TrimSuffix(s, ";")
	if strings.Contains(s, ";") {
		return Refused("refusing a statement with more than one part: only a single SELECT is sent")
	}
	head := strings.ToUpper(firstWord(s))
	if head != "SELECT" && head != "WITH" && head != "(" {
		return Refused("refusing a %s statement: agents send only SELECT queries", head)
	}
	return nil
}

func firstWord(s string) string {
	s = strings.TrimLeft(s, " \t\r\n(")
	for i, r := range s {
		if r == ' ' || r == '\t' || r == '\n' || r == '\r' || r == '(' {
			return s[:i]
		}
	}
	return s
}

// ScanRows reads every row of a database/sql result into a Result, for
// the drivers that speak database/sql (DuckDB, Snowflake).
func ScanRows(rows *sql.Rows) (*Result, error) {
	cols, err := rows.Columns()
	if err != nil {
		return nil, err
	}
	res := &Result{Columns: cols}
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return nil, err
		}
		res.Rows = append(res.Rows, vals)
	}
	return res, rows.Err()
}
