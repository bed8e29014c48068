package checks

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/dataworkers/dw/internal/textrule"
	"github.com/dataworkers/dw/internal/warehouse"
)

// ScanPlan is every requested check of one table compiled into as few
// statements as the dialect's size limit allows (one, in practice).
type ScanPlan struct {
	// Asset is the table's asset id; metric points are stored under it.
	Asset   string
	Table   *warehouse.Table
	Dialect warehouse.Dialect
	// Window is the validated window, Column in catalog spelling.
	Window Window
	// Checks are the specs in catalog spelling, in request order.
	Checks []PlannedCheck
	// Statements are the SQL to run; each returns the bucket (when
	// bucketed) and then its share of the aggregates.
	Statements []Statement

	aggs []aggregate // distinct aggregate expressions
	// rewritten says the window's column records each row's latest
	// change, so the table holds current state: see recordsLatestChange.
	rewritten bool
	// rollup says the scan needs ROLLUP's window-wide row, because some
	// aggregate's window value cannot be combined from its buckets.
	rollup bool
	// perBucket plans one chunk of a backfill (see backfill.go): only the
	// buckets' values are read, so no ROLLUP and no anti-join; the
	// window-wide values a check needs come from their own statement.
	perBucket bool
}

// aggregate is one expression of the SELECT list and how bucket values
// combine into the window's value.
type aggregate struct {
	sql     string
	combine combine
	// join is, for combineJoin, the FROM and WHERE of the aggregate's own
	// statement (an anti-join against another table).
	join string
}

type combine int

const (
	combineSum  combine = iota // counts and sums add up
	combineMax                 // the newest of the newest
	combineNone                // distinct counts and percentiles do not combine
	// combineJoin is computed once for the window by a statement of its
	// own: a relationships check reads a second table, which the one
	// aggregate scan of this table cannot.
	combineJoin
)

// PlannedCheck is one validated check and where its inputs are computed.
type PlannedCheck struct {
	Spec  Spec
	Label string
	// inputs maps a role (rows, nonnull, distinct, …) to an aggregate.
	inputs map[string]int
	maxAge time.Duration
}

// Statement is one SELECT of a plan.
type Statement struct {
	SQL string
	// aggs lists the plan aggregates this statement returns, in order.
	aggs []int
	// whole says the statement returns one row for the window, never
	// buckets (an anti-join).
	whole bool
}

// Aggregates is how many distinct aggregate expressions the plan computes
// (checks sharing an expression share its column).
func (p *ScanPlan) Aggregates() int { return len(p.aggs) }

// SQL is every statement of the plan, separated by blank lines.
func (p *ScanPlan) SQL() string {
	parts := make([]string, len(p.Statements))
	for i, s := range p.Statements {
		parts[i] = s.SQL
	}
	return strings.Join(parts, ";\n\n")
}

func (p *ScanPlan) bucketed() bool { return p.Window.Grain != Whole }

// Plan validates specs against the table's catalog and compiles them into
// statements for dialect d. Every name is resolved to its catalog spelling
// (unknown names are errors listing the closest), and nothing is built
// from text that failed validation.
func Plan(table *warehouse.Table, d warehouse.Dialect, specs []Spec, w Window) (*ScanPlan, error) {
	return plan(table, d, specs, w, false)
}

func plan(table *warehouse.Table, d warehouse.Dialect, specs []Spec, w Window, perBucket bool) (*ScanPlan, error) {
	sp, err := spellingFor(d)
	if err != nil {
		return nil, err
	}
	if len(specs) == 0 {
		return nil, errors.New("no checks requested: pass at least one check, or none at all to profile the table")
	}
	p := &ScanPlan{Asset: AssetID(d, table.Ref), Table: table, Dialect: d, perBucket: perBucket}
	if p.Window, err = validateWindow(table, d, w); err != nil {
		return nil, err
	}
	p.rewritten = !p.Window.IsZero() && recordsLatestChange(p.Window.Column)
	index := map[string]int{}
	add := func(expr string, c combine) int {
		if i, ok := index[expr]; ok {
			return i
		}
		index[expr] = len(p.aggs)
		p.aggs = append(p.aggs, aggregate{sql: expr, combine: c})
		if c == combineNone && p.bucketed() && !p.perBucket {
			p.rollup = true
		}
		return len(p.aggs) - 1
	}
	addJoin := func(expr, join string) int {
		key := join + "\x00" + expr
		if i, ok := index[key]; ok {
			return i
		}
		index[key] = len(p.aggs)
		p.aggs = append(p.aggs, aggregate{sql: expr, combine: combineJoin, join: join})
		return len(p.aggs) - 1
	}
	seen := map[string]bool{}
	for _, s := range specs {
		pc, err := planCheck(table, sp, s, add, addJoin, p.Window)
		if err != nil {
			return nil, fmt.Errorf("%s check: %w", s.Kind, err)
		}
		if seen[pc.Label] {
			continue // the same check asked twice is computed and reported once
		}
		seen[pc.Label] = true
		p.Checks = append(p.Checks, pc)
	}
	if p.Statements, err = p.statements(sp); err != nil {
		return nil, err
	}
	return p, nil
}

func validateWindow(table *warehouse.Table, d warehouse.Dialect, w Window) (Window, error) {
	if w.IsZero() {
		return w, nil
	}
	switch w.Grain {
	case Whole, Hour, Day:
	default:
		return w, fmt.Errorf("unknown bucket %q: use hour, day, or none", w.Grain)
	}
	if w.Column == "" {
		return w, errors.New("a window or buckets need a time column: name the event or ingest time column")
	}
	col, err := table.Column(d, w.Column)
	if err != nil {
		return w, err
	}
	w.Column = col.Name
	k := classify(d.Name(), col.Type)
	if !k.isTime() {
		return w, fmt.Errorf("cannot bucket or window on %s: it is %s, not a date or timestamp; time columns: %s",
			col.Name, col.Type, strings.Join(timeColumns(table, d), ", "))
	}
	if w.Start.IsZero() || w.End.IsZero() {
		return w, errors.New("a window needs both a start and an end")
	}
	if !w.End.After(w.Start) {
		return w, fmt.Errorf("the window ends (%s) before it starts (%s): give an end after the start",
			w.End.UTC().Format(time.RFC3339), w.Start.UTC().Format(time.RFC3339))
	}
	if w.Grain == Hour && k == kindDate {
		return w, fmt.Errorf("cannot bucket %s by hour: it is a DATE; bucket it by day", col.Name)
	}
	w.Start, w.End = w.Start.UTC(), w.End.UTC()
	if g := w.Grain.Duration(); g > 0 {
		// Buckets are whole: the window widens to bucket boundaries, so
		// "the last 24 hours by hour" is always 25 buckets, the last one
		// still filling, and its window-wide values form one series.
		w.Start = w.Start.Truncate(g)
		if end := w.End.Truncate(g); end.Before(w.End) {
			w.End = end.Add(g)
		}
		if n := int(w.End.Sub(w.Start) / g); n > maxBuckets {
			return w, fmt.Errorf("the window holds %d %s buckets; at most %d: shorten the window or use day buckets", n, w.Grain, maxBuckets)
		}
	}
	return w, nil
}

func timeColumns(t *warehouse.Table, d warehouse.Dialect) []string {
	var out []string
	for _, c := range t.Columns {
		if classify(d.Name(), c.Type).isTime() {
			out = append(out, c.Name)
		}
	}
	if len(out) == 0 {
		return []string{"(none)"}
	}
	return out
}

// planCheck validates one spec, rewrites its names to catalog spelling and
// registers the aggregates it needs.
func planCheck(t *warehouse.Table, sp *spelling, s Spec, add func(string, combine) int, addJoin func(expr, join string) int, w Window) (PlannedCheck, error) {
	column := func(name, role string) (warehouse.Column, colKind, error) {
		if strings.TrimSpace(name) == "" {
			return warehouse.Column{}, 0, fmt.Errorf("%s is required", role)
		}
		c, err := t.Column(sp, name)
		if err != nil {
			return c, 0, err
		}
		return c, classify(sp.Name(), c.Type), nil
	}
	pc := PlannedCheck{inputs: map[string]int{}}
	source := s.source // kept through the rewrites to catalog spelling below
	rows := add("COUNT(*)", combineSum)
	pc.inputs["rows"] = rows
	switch s.Kind {
	case KindRowCount:
		s = Spec{Kind: s.Kind, Min: s.Min, Max: s.Max, StayEmpty: s.StayEmpty, Inferred: s.Inferred}
		if err := checkBounds(s.Min, s.Max, "rows", true); err != nil {
			return pc, err
		}
		if err := checkRowBound("min", s.Min); err != nil {
			return pc, err
		}
		if err := checkRowBound("max", s.Max); err != nil {
			return pc, err
		}
		if err := checkStayEmpty(s.StayEmpty, s.Min); err != nil {
			return pc, err
		}
	case KindNullRate:
		c, _, err := column(s.Column, "column")
		if err != nil {
			return pc, err
		}
		s = Spec{Kind: s.Kind, Column: c.Name, MaxRate: s.MaxRate, Inferred: s.Inferred}
		if s.MaxRate != nil && (*s.MaxRate < 0 || *s.MaxRate > 1) {
			return pc, fmt.Errorf("max_rate %v is not a rate: give a number from 0 to 1 (0.05 is 5%%)", *s.MaxRate)
		}
		pc.inputs["nonnull"] = add("COUNT("+sp.QuoteIdent(c.Name)+")", combineSum)
	case KindUniqueness:
		names := s.Columns
		if len(names) == 0 && s.Column != "" {
			names = []string{s.Column}
		}
		if len(names) == 0 {
			return pc, errors.New("columns (the key) are required")
		}
		var key []string
		for _, n := range names {
			c, k, err := column(n, "key column")
			if err != nil {
				return pc, err
			}
			if k == kindOther {
				return pc, fmt.Errorf("key column %s is %s; keys must be numbers, text, booleans, dates or timestamps", c.Name, c.Type)
			}
			key = append(key, c.Name)
		}
		s = Spec{Kind: s.Kind, Columns: key, Inferred: s.Inferred}
		pc.inputs["keyrows"] = add(sp.keyRows(key), combineSum)
		pc.inputs["distinct"] = add(sp.distinctKeys(key), combineNone)
	case KindFreshness:
		c, k, err := column(s.Column, "column")
		if err != nil {
			return pc, err
		}
		if !k.isTime() {
			return pc, fmt.Errorf("freshness needs a date or timestamp column; %s is %s; time columns: %s", c.Name, c.Type, strings.Join(timeColumns(t, sp), ", "))
		}
		if pc.maxAge, err = parseAge(s.MaxAge); err != nil {
			return pc, err
		}
		s = Spec{Kind: s.Kind, Column: c.Name, MaxAge: s.MaxAge, Inferred: s.Inferred}
		pc.inputs["newest"] = add("MAX("+sp.QuoteIdent(c.Name)+")", combineMax)
	case KindLoadLag:
		e, ek, err := column(s.EventTime, "event_time")
		if err != nil {
			return pc, err
		}
		i, ik, err := column(s.IngestTime, "ingest_time")
		if err != nil {
			return pc, err
		}
		for _, c := range []warehouse.Column{e, i} {
			if k := classify(sp.Name(), c.Type); !k.isTime() {
				return pc, fmt.Errorf("load lag needs date or timestamp columns; %s is %s", c.Name, c.Type)
			}
		}
		if e.Name == i.Name {
			return pc, errors.New("event_time and ingest_time are the same column")
		}
		if pc.maxAge, err = parseAge(s.MaxAge); err != nil {
			return pc, err
		}
		s = Spec{Kind: s.Kind, EventTime: e.Name, IngestTime: i.Name, MaxAge: s.MaxAge, Inferred: s.Inferred}
		lag := sp.lagMillis(e.Name, ek, i.Name, ik)
		// A sum and a count rather than AVG, so the window's average
		// combines from its buckets.
		pc.inputs["lag_sum"] = add("SUM("+lag+")", combineSum)
		pc.inputs["lag_rows"] = add("COUNT("+lag+")", combineSum)
		pc.inputs["lag_p95"] = add(sp.p95(lag), combineNone)
	case KindAcceptedValues:
		c, k, err := column(s.Column, "column")
		if err != nil {
			return pc, err
		}
		if len(s.Values) == 0 {
			return pc, errors.New("values are required: list the accepted values")
		}
		if len(s.Values) > 1000 {
			return pc, fmt.Errorf("%d accepted values; at most 1000", len(s.Values))
		}
		lits := make([]string, len(s.Values))
		for n, v := range s.Values {
			switch k {
			case kindText:
				lits[n], err = sp.stringLiteral(v)
			case kindNumber:
				var f float64
				if f, err = strconv.ParseFloat(strings.TrimSpace(v), 64); err != nil {
					return pc, fmt.Errorf("%s is numeric (%s) but accepted value %q is not a number", c.Name, c.Type, v)
				}
				lits[n], err = numberLiteral(f)
			default:
				return pc, fmt.Errorf("accepted values apply to text or numeric columns; %s is %s", c.Name, c.Type)
			}
			if err != nil {
				return pc, err
			}
		}
		s = Spec{Kind: s.Kind, Column: c.Name, Values: s.Values, Inferred: s.Inferred}
		q := sp.QuoteIdent(c.Name)
		pc.inputs["nonnull"] = add("COUNT("+q+")", combineSum)
		pc.inputs["bad"] = add("COUNT(CASE WHEN "+q+" NOT IN ("+strings.Join(lits, ", ")+") THEN 1 END)", combineSum)
	case KindRange:
		c, k, err := column(s.Column, "column")
		if err != nil {
			return pc, err
		}
		if k != kindNumber {
			return pc, fmt.Errorf("range applies to numeric columns; %s is %s", c.Name, c.Type)
		}
		if s.Min == nil && s.Max == nil {
			return pc, errors.New("give min, max or both")
		}
		if err := checkBounds(s.Min, s.Max, "values", false); err != nil {
			return pc, err
		}
		s = Spec{Kind: s.Kind, Column: c.Name, Min: s.Min, Max: s.Max, Inferred: s.Inferred}
		q := sp.QuoteIdent(c.Name)
		var conds []string
		for _, b := range []struct {
			v  *float64
			op string
		}{{s.Min, " < "}, {s.Max, " > "}} {
			if b.v != nil {
				lit, err := numberLiteral(*b.v)
				if err != nil {
					return pc, err
				}
				conds = append(conds, q+b.op+lit)
			}
		}
		pc.inputs["nonnull"] = add("COUNT("+q+")", combineSum)
		pc.inputs["bad"] = add("COUNT(CASE WHEN "+strings.Join(conds, " OR ")+" THEN 1 END)", combineSum)
	case KindPredicate:
		name := strings.TrimSpace(s.Name)
		if !predicateNameRE().MatchString(name) {
			return pc, fmt.Errorf("predicate name %q: use 1 to 64 letters, digits, _ or -", s.Name)
		}
		e, _, err := parsePredicate(s.SQL, t, sp)
		if err != nil {
			return pc, err
		}
		rendered, err := e.render(sp)
		if err != nil {
			return pc, err
		}
		if s.MaxFailing != nil && *s.MaxFailing < 0 {
			return pc, fmt.Errorf("max_failing %d is negative", *s.MaxFailing)
		}
		s = Spec{Kind: s.Kind, Name: name, SQL: s.SQL, MaxFailing: s.MaxFailing, Inferred: s.Inferred}
		pc.inputs["bad"] = add("COUNT(CASE WHEN "+rendered+" THEN NULL ELSE 1 END)", combineSum)
	case KindDistribution:
		c, k, err := column(s.Column, "column")
		if err != nil {
			return pc, err
		}
		if k == kindText {
			s = Spec{Kind: s.Kind, Column: c.Name, Inferred: s.Inferred, distinctOnly: s.distinctOnly}
			q := sp.QuoteIdent(c.Name)
			pc.inputs["nonnull"] = add("COUNT("+q+")", combineSum)
			// Approximate distinct counts and top values keep the scan's
			// memory bounded on every engine should a column's
			// cardinality explode, and they share the one scan.
			pc.inputs["distinct"] = add(sp.approxDistinct(q), combineNone)
			if !s.distinctOnly {
				pc.inputs["top"] = add(sp.topValue(q), combineNone)
				pc.inputs["topcount"] = add(sp.topCount(q), combineNone)
			}
			break
		}
		if k != kindNumber {
			return pc, fmt.Errorf("distribution applies to numeric and text columns; %s is %s", c.Name, c.Type)
		}
		s = Spec{Kind: s.Kind, Column: c.Name, Inferred: s.Inferred}
		q := sp.QuoteIdent(c.Name)
		pc.inputs["nonnull"] = add("COUNT("+q+")", combineSum)
		pc.inputs["zeros"] = add("COUNT(CASE WHEN "+q+" = 0 THEN 1 END)", combineSum)
		// AVG rather than a sum: a SUM of a wide integer column can
		// overflow, and the quantiles need the window row anyway.
		pc.inputs["mean"] = add("AVG("+q+")", combineNone)
		median, p95 := sp.medianAndP95(q)
		pc.inputs["median"] = add(median, combineNone)
		pc.inputs["p95"] = add(p95, combineNone)
	case KindRelationship:
		c, k, err := column(s.Column, "column")
		if err != nil {
			return pc, err
		}
		if s.parent == nil {
			return pc, fmt.Errorf("relationships on %s: the referenced table %q was not resolved in the warehouse", c.Name, s.To)
		}
		f, err := s.parent.Column(sp, s.Field)
		if err != nil {
			return pc, fmt.Errorf("relationships on %s: field of %s: %w", c.Name, s.parent.Ref, err)
		}
		fk := classify(sp.Name(), f.Type)
		if k == kindOther || fk != k {
			return pc, fmt.Errorf("relationships on %s (%s): %s.%s is %s; the two columns must be of one kind (numbers, text, dates)", c.Name, c.Type, s.parent.Ref, f.Name, f.Type)
		}
		s = Spec{Kind: s.Kind, Column: c.Name, To: s.parent.Ref.String(), Field: f.Name, Inferred: s.Inferred, source: s.source, parent: s.parent}
		pc.inputs["nonnull"] = add("COUNT("+sp.QuoteIdent(c.Name)+")", combineSum)
		join := sp.antiJoin(t, c.Name, s.parent, f.Name, w)
		pc.inputs["orphans"] = addJoin("COUNT(*)", join)
		pc.inputs["orphan_example"] = addJoin("MIN(c."+sp.QuoteIdent(c.Name)+")", join)
	default:
		names := make([]string, len(kinds))
		for i, k := range kinds {
			names[i] = string(k)
		}
		return pc, fmt.Errorf("unknown check kind %q; kinds: %s", s.Kind, strings.Join(names, ", "))
	}
	s.source = source
	pc.Spec, pc.Label = s, s.Label()
	return pc, nil
}

var predicateNameRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9_\-]{1,64}$`) })

// MaxRowBound is the largest row count a bound may name: every whole
// number up to 2^53 is exact in a JSON number (a float64), beyond it
// 2^53+1 already reads as 2^53.
const MaxRowBound = 1 << 53

// checkRowBound refuses a row-count bound that is no count of rows: a
// fraction, a negative number or one too large to be carried exactly.
func checkRowBound(field string, v *float64) error {
	if v == nil {
		return nil
	}
	if *v != math.Trunc(*v) || *v < 0 || *v > MaxRowBound {
		return fmt.Errorf("%s %v is not a row count: give a whole number from 0 to %d", field, *v, int64(MaxRowBound))
	}
	return nil
}

func checkBounds(lo, hi *float64, what string, nonNegative bool) error {
	if nonNegative {
		for _, v := range []*float64{lo, hi} {
			if v != nil && *v < 0 {
				return fmt.Errorf("%s bound %v is negative", what, *v)
			}
		}
	}
	if lo != nil && hi != nil && *lo > *hi {
		return fmt.Errorf("min %v is above max %v", *lo, *hi)
	}
	return nil
}

func parseAge(s string) (time.Duration, error) {
	if strings.TrimSpace(s) == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(strings.TrimSpace(s))
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("max_age %s is not a positive duration: write e.g. 90m, 2h or 36h", textrule.Quote(s))
	}
	return d, nil
}

// statements packs the aggregates into as few statements as fit the
// dialect's size limit.
func (p *ScanPlan) statements(sp *spelling) ([]Statement, error) {
	head, foot := "SELECT", "\nFROM "+sp.Table(p.Table.Ref)
	if w := p.Window; w.Column != "" {
		col, _ := p.Table.Column(sp, w.Column)
		k := classify(sp.Name(), col.Type)
		q := sp.QuoteIdent(col.Name)
		foot += "\nWHERE " + q + " >= " + sp.timeLiteral(w.Start, k) + " AND " + q + " < " + sp.timeLiteral(w.End, k)
		if p.bucketed() {
			b := sp.bucket(col.Name, k, w.Grain)
			head += "\n  " + b + " AS bucket"
			// ROLLUP adds one row for the whole window beside the buckets,
			// so window-wide values that cannot be combined from buckets
			// (distinct keys, percentiles) come from the same scan. Without
			// such values the window's row is combined from the buckets
			// instead, which is cheaper.
			if p.rollup {
				foot += "\nGROUP BY ROLLUP (" + b + ")"
			} else {
				foot += "\nGROUP BY " + b
			}
		}
	}
	limit := sp.MaxStatementBytes()
	fixed := len(head) + len(foot)
	piece := func(i int, first bool) string {
		sep := ",\n  "
		if first && !p.bucketed() {
			sep = "\n  "
		}
		return sep + p.aggs[i].sql + " AS m" + strconv.Itoa(i)
	}
	var out []Statement
	for _, group := range p.scanGroups(sp) {
		var cur strings.Builder
		var curAggs []int
		for _, i := range group {
			pc := piece(i, len(curAggs) == 0)
			if fixed+len(pc) > limit {
				return nil, fmt.Errorf("one aggregate of %s is %d bytes, over %s's statement limit of %d bytes", p.Table.Ref, len(pc), sp.Name(), limit)
			}
			if len(curAggs) > 0 && fixed+cur.Len()+len(pc) > limit {
				out = append(out, Statement{SQL: head + cur.String() + foot, aggs: curAggs})
				cur.Reset()
				curAggs = nil
				pc = piece(i, true)
			}
			cur.WriteString(pc)
			curAggs = append(curAggs, i)
		}
		out = append(out, Statement{SQL: head + cur.String() + foot, aggs: curAggs})
	}
	// Each anti-join is one statement returning one row for the window.
	joins := map[string]int{}
	for i, a := range p.aggs {
		if a.combine != combineJoin || p.perBucket {
			continue
		}
		n, ok := joins[a.join]
		if !ok {
			n = len(out)
			joins[a.join] = n
			out = append(out, Statement{SQL: "SELECT", whole: true})
		}
		sep := ","
		if len(out[n].aggs) == 0 {
			sep = ""
		}
		out[n].SQL += sep + "\n  " + a.sql + " AS m" + strconv.Itoa(i)
		out[n].aggs = append(out[n].aggs, i)
	}
	for _, n := range joins {
		out[n].SQL += out[n].sqlTail(p.aggs)
	}
	return out, nil
}

// sqlTail is the FROM and WHERE of an anti-join statement.
func (s Statement) sqlTail(aggs []aggregate) string { return aggs[s.aggs[0]].join }

// scanGroups are the plan's aggregates (all but anti-joins) in the groups
// that each get statements of their own, in order. It is one group, one
// scan, except for an unbucketed plan on DuckDB: there each check gets a
// statement of its own (an aggregate checks share goes with the first).
// DuckDB scans a local columnar file for free and computes one ungrouped
// statement holding every aggregate (the exact distinct count, quantiles,
// most common values) about a fifth slower than the same aggregates a
// check at a time; grouping the counts and sums into one statement and
// the rest a check at a time was in between (README, "Quality checks
// through MCP"). BigQuery and Snowflake bill or spend per scan, so their
// plan stays one scan; and a bucketed plan stays one statement, which a
// split would make group the rows again for each part.
func (p *ScanPlan) scanGroups(sp *spelling) [][]int {
	var all []int
	for i, a := range p.aggs {
		if a.combine != combineJoin {
			all = append(all, i) // an anti-join is in a statement of its own
		}
	}
	if p.bucketed() || sp.Name() != "duckdb" {
		return [][]int{all}
	}
	owner := make([]int, len(p.aggs)) // the first check reading each aggregate
	for i := range owner {
		owner[i] = len(p.Checks)
	}
	for ci, pc := range p.Checks {
		for _, a := range pc.inputs {
			owner[a] = min(owner[a], ci)
		}
	}
	byCheck := make([][]int, len(p.Checks)+1)
	for _, i := range all {
		byCheck[owner[i]] = append(byCheck[owner[i]], i)
	}
	groups := [][]int{}
	for _, g := range byCheck {
		if len(g) > 0 {
			groups = append(groups, g)
		}
	}
	return groups
}
