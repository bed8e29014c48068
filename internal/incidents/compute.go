package incidents

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/dataworkers/dw/internal/changelog"

	"github.com/dataworkers/dw/internal/warehouse"
)

// Window is a span of time, start inclusive, end exclusive.
type Window struct {
	Start time.Time `json:"start" jsonschema:"start of the window (inclusive, RFC 3339)"`
	End   time.Time `json:"end" jsonschema:"end of the window (exclusive, RFC 3339)"`
}

// maxWindow bounds one computation so a typo in a date cannot make the
// warehouse scan years of data.
const maxWindow = 31 * 24 * time.Hour

func (w Window) validate(now time.Time) error {
	switch {
	case w.Start.IsZero() || w.End.IsZero():
		return invalid("window needs both start and end (RFC 3339)")
	case !w.End.After(w.Start):
		return invalid("window ends (%s) before or when it starts (%s): end must be after start",
			w.End.UTC().Format(time.RFC3339), w.Start.UTC().Format(time.RFC3339))
	case w.End.Sub(w.Start) > maxWindow:
		return invalid("window spans %s; at most 31 days per computation", formatDuration(w.End.Sub(w.Start)))
	case !now.IsZero() && w.End.After(now.Add(changelog.FutureSkew)):
		return invalid("window end %s is in the future (now %s): compute only buckets that have happened",
			w.End.UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339))
	}
	return nil
}

// MetricPoint is one value of a team metric.
type MetricPoint struct {
	At    time.Time `json:"at" jsonschema:"bucket start (or observation time) of the value, RFC 3339; not in the future"`
	Value float64   `json:"value" jsonschema:"the metric's value: any finite number"`
}

// validateMetricSQL is the cheap first pass over a metric's SQL: a single
// SELECT or WITH, at most a trailing semicolon. It only ever refuses more
// than the engine would; what is accepted is decided by checkMetricSQL.
func validateMetricSQL(sqlText string) error {
	s := strings.TrimSpace(sqlText)
	if s == "" {
		return invalid("sql is empty: give a single SELECT returning the metric's value (and optionally its hour bucket)")
	}
	if len(s) > 100_000 {
		return invalid("sql is %d bytes; at most 100000", len(s))
	}
	body := strings.TrimSpace(strings.TrimSuffix(s, ";"))
	if strings.Contains(body, ";") {
		return invalid("metric SQL must be a single SELECT; found more than one statement (sql must be one statement: a semicolon is allowed only at the very end)")
	}
	head := strings.ToUpper(firstToken(body))
	if head != "SELECT" && head != "WITH" {
		// The first token is as long as the text when it holds no space,
		// and %q spells a control character in four: quoted whole, 65,000
		// of them made an answer of 260,000 characters.
		if r := []rune(head); len(r) > 40 {
			head = string(r[:40]) + "…"
		}
		return invalid("metric SQL must be a single SELECT; found %q (sql must start with SELECT or WITH: metrics are read-only queries)", head)
	}
	if err := warehouse.ReadOnlyStatement(body); err != nil {
		return invalid("sql refused: %v", err)
	}
	return nil
}

// checkMetricSQL has the warehouse's own engine judge the SQL without
// running it (warehouse.Warehouse.ValidateQuery): exactly one read-only
// query that reads nothing outside the warehouse. It runs when the metric
// is defined and again before every computation, so a stored definition
// edited behind the tool's back is refused too.
func checkMetricSQL(ctx context.Context, wh warehouse.Warehouse, sqlText string) error {
	if err := validateMetricSQL(sqlText); err != nil {
		return err
	}
	body := strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(sqlText), ";"))
	if err := wh.ValidateQuery(ctx, body); err != nil {
		if errors.Is(err, warehouse.ErrRefused) {
			return invalid("metric SQL refused by warehouse %s: %v", wh.Name(), err)
		}
		return fmt.Errorf("check the metric SQL on warehouse %s: %w", wh.Name(), err)
	}
	return nil
}

func firstToken(s string) string {
	for i, r := range s {
		if r == ' ' || r == '\t' || r == '\n' || r == '\r' || r == '(' {
			return s[:i]
		}
	}
	return s
}

// maxComputedRows bounds the buckets one computation may return.
const maxComputedRows = 10_000

// ComputeMetric runs a SQL metric's stored definition on wh for window. The
// team's SQL is wrapped as a subquery, and only the definition's value and
// time columns (validated identifiers, quoted by the warehouse's dialect)
// and the window's bounds (as bound arguments) are added around it: nothing
// from a tool call is pasted into the statement. With a time column every
// returned bucket in the window is a point; without one the query must
// return a single row, recorded at the window's start.
func ComputeMetric(ctx context.Context, wh warehouse.Warehouse, def MetricDefinition, w Window) ([]MetricPoint, error) {
	if def.Source != SourceSQL {
		return nil, invalid("metric %s is pushed, not computed: record its values instead", def.Name)
	}
	if err := checkMetricSQL(ctx, wh, def.SQL); err != nil {
		return nil, fmt.Errorf("metric %s: %w", def.Name, err)
	}
	if err := w.validate(time.Time{}); err != nil {
		return nil, err
	}
	if err := warehouse.ValidIdentifier(def.ValueColumn); err != nil {
		return nil, invalid("metric %s value_column: %v", def.Name, err)
	}
	d := wh.Dialect()
	inner := strings.TrimSuffix(strings.TrimSpace(def.SQL), ";")
	q := warehouse.Query{Agent: "dw-incidents", Tool: "monitor_metrics"}
	if def.TimeColumn != "" {
		if err := warehouse.ValidIdentifier(def.TimeColumn); err != nil {
			return nil, invalid("metric %s time_column: %v", def.Name, err)
		}
		tc, vc := "m."+d.QuoteIdent(def.TimeColumn), "m."+d.QuoteIdent(def.ValueColumn)
		// The subquery sits on its own lines so a trailing -- comment in
		// the team's SQL cannot swallow the closing parenthesis.
		q.SQL = "SELECT " + tc + " AS bucket, " + vc + " AS value FROM (\n" + inner + "\n) AS m WHERE " +
			tc + " >= ? AND " + tc + " < ? ORDER BY 1 LIMIT " + strconv.Itoa(maxComputedRows+1)
		q.Args = []any{w.Start.UTC(), w.End.UTC()}
	} else {
		q.SQL = "SELECT m." + d.QuoteIdent(def.ValueColumn) + " AS value FROM (\n" + inner + "\n) AS m LIMIT 2"
	}
	res, err := wh.Query(ctx, q)
	if errors.Is(err, warehouse.ErrRefused) {
		return nil, invalid("metric %s: metric SQL refused by warehouse %s: %v", def.Name, wh.Name(), err)
	}
	if err != nil {
		return nil, fmt.Errorf("compute metric %s on warehouse %s: %w", def.Name, wh.Name(), err)
	}
	if def.TimeColumn == "" {
		switch len(res.Rows) {
		case 0:
			return nil, fmt.Errorf("metric %s returned no row; its SQL must return exactly one value when it has no time column", def.Name)
		case 1:
		default:
			return nil, fmt.Errorf("metric %s returned several rows; without a time column its SQL must return exactly one value (or define time_column)", def.Name)
		}
		v, ok, err := toFloat(res.Rows[0][0])
		if err != nil {
			return nil, fmt.Errorf("metric %s: %w", def.Name, err)
		}
		if !ok {
			return []MetricPoint{}, nil
		}
		return []MetricPoint{{At: w.Start.UTC(), Value: v}}, nil
	}
	if len(res.Rows) > maxComputedRows {
		return nil, fmt.Errorf("metric %s returned more than %d buckets in the window; shorten the window or group its SQL by hour", def.Name, maxComputedRows)
	}
	out := make([]MetricPoint, 0, len(res.Rows))
	for i, row := range res.Rows {
		if len(row) < 2 {
			return nil, fmt.Errorf("metric %s row %d: expected bucket and value", def.Name, i)
		}
		at, err := toTime(row[0])
		if err != nil {
			return nil, fmt.Errorf("metric %s row %d, column %s: %w", def.Name, i, def.TimeColumn, err)
		}
		v, ok, err := toFloat(row[1])
		if err != nil {
			return nil, fmt.Errorf("metric %s row %d, column %s: %w", def.Name, i, def.ValueColumn, err)
		}
		if ok {
			out = append(out, MetricPoint{At: at, Value: v})
		}
	}
	return out, nil
}

// toFloat reads a warehouse value as a number; ok is false for NULL, which
// records no point rather than a made-up zero.
func toFloat(v any) (float64, bool, error) {
	f, null, err := warehouse.Float(v)
	if null || err != nil {
		return 0, false, err
	}
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, false, fmt.Errorf("value %v is not a finite number", f)
	}
	return f, true, nil
}

func toTime(v any) (time.Time, error) {
	t, null, err := warehouse.Time(v)
	switch {
	case null:
		return time.Time{}, fmt.Errorf("bucket is NULL")
	case err != nil:
		return time.Time{}, fmt.Errorf("bucket: %w", err)
	}
	return t.UTC(), nil
}
