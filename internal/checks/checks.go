// Package checks runs data-quality checks on a warehouse table: volume,
// null rates, key uniqueness, freshness, load lag, accepted values, numeric
// ranges and predicate assertions, optionally per hour or day bucket.
//
// Every requested metric of a table, and every bucket, comes from one
// aggregate scan built for the table's dialect (Plan), never one query per
// check: warehouses bill by the scan, and a table read once is read
// cheaply. Identical aggregate expressions are computed once and shared by
// the checks that need them. A plan is split into several statements only
// where one would pass the engine's statement-size limit.
//
// Results (Run) are judged (Evaluate) against explicit expectations and
// against each metric's own history (package baseline), then stored as
// metric points so the next check has a longer history.
//
// User text reaches SQL only after validation: table and column names are
// resolved against the catalog and quoted by the dialect; predicate text is
// parsed into an expression over the table's columns and re-rendered;
// literal values are quoted by the dialect.
package checks

import (
	"fmt"
	"strings"
	"time"

	"github.com/dataworkers/dw/internal/warehouse"
)

// Kind is what a check measures.
type Kind string

// Check kinds.
const (
	// KindRowCount counts rows (volume), per bucket when bucketed.
	KindRowCount Kind = "row_count"
	// KindNullRate is the share of rows where a column is null.
	KindNullRate Kind = "null_rate"
	// KindUniqueness counts rows whose key (one or more columns) repeats.
	KindUniqueness Kind = "uniqueness"
	// KindFreshness is how long ago the newest time in a column was.
	KindFreshness Kind = "freshness"
	// KindLoadLag is ingest time minus event time: average and p95.
	KindLoadLag Kind = "load_lag"
	// KindAcceptedValues counts non-null values outside a list.
	KindAcceptedValues Kind = "accepted_values"
	// KindRange counts non-null numbers outside [min, max].
	KindRange Kind = "range"
	// KindPredicate counts rows where a boolean expression is not true.
	KindPredicate Kind = "predicate"
	// KindDistribution profiles a column's values, each judged against
	// its own history, so a median that halves or a currency mix that
	// flips is found without a team metric: a numeric column's mean,
	// median, p95 and share of zeros; a low-cardinality text column's
	// distinct count and the share of its most common value.
	KindDistribution Kind = "distribution"
	// KindRelationship counts rows whose column holds a value missing
	// from a column of another table (a broken foreign key, dbt's
	// relationships test), by an anti-join of its own.
	KindRelationship Kind = "relationships"
)

var kinds = []Kind{KindRowCount, KindNullRate, KindUniqueness, KindFreshness, KindLoadLag, KindAcceptedValues, KindRange, KindPredicate, KindDistribution, KindRelationship}

// Where an expectation came from.
const (
	// SourceTeam: set with set_quality_expectations.
	SourceTeam = "team"
	// SourceDBT: a test in an imported dbt manifest.
	SourceDBT = "dbt"
)

// Spec is one requested check. Which fields apply depends on Kind; the
// thresholds are explicit expectations (breaking one fails the check),
// while every metric is also judged against its own history.
type Spec struct {
	Kind Kind `json:"kind" jsonschema:"row_count, null_rate, uniqueness, freshness, load_lag, accepted_values, range, predicate, relationships (column's values must exist in field of table to) or distribution (a numeric column's mean, median, p95 and zero share, or a text column's distinct count and top-value share, judged against history)"`
	// Column is the column checked by null_rate, freshness,
	// accepted_values and range.
	Column string `json:"column,omitempty" jsonschema:"column checked (null_rate, freshness, accepted_values, range, distribution, relationships)"`
	// To and Field name the referenced table and column (relationships).
	To    string `json:"to,omitempty" jsonschema:"relationships: the referenced table, schema.table or table"`
	Field string `json:"field,omitempty" jsonschema:"relationships: the referenced column of to"`
	// Columns is the key of a uniqueness check.
	Columns []string `json:"columns,omitempty" jsonschema:"key columns that together must be unique (uniqueness)"`
	// EventTime and IngestTime are the two columns of a load_lag check.
	EventTime  string `json:"event_time,omitempty" jsonschema:"when the event happened (load_lag)"`
	IngestTime string `json:"ingest_time,omitempty" jsonschema:"when the row landed (load_lag)"`
	// Values lists accepted values as text; numbers for numeric columns.
	Values []string `json:"values,omitempty" jsonschema:"accepted values (accepted_values); numbers for numeric columns"`
	// Min and Max bound numbers (range) or rows per bucket (row_count).
	Min *float64 `json:"min,omitempty" jsonschema:"lowest allowed value (range), any finite number, or rows per bucket (row_count)"`
	Max *float64 `json:"max,omitempty" jsonschema:"highest allowed value (range), any finite number, or rows per bucket (row_count)"`
	// MaxRate is the highest allowed null rate, 0 to 1.
	MaxRate *float64 `json:"max_rate,omitempty" jsonschema:"highest allowed null rate from 0 to 1 (null_rate)"`
	// MaxAge is the staleness allowed (freshness) or the average lag
	// allowed (load_lag), as a Go duration such as 90m or 2h.
	MaxAge string `json:"max_age,omitempty" jsonschema:"allowed staleness (freshness) or average lag (load_lag), e.g. 90m or 2h"`
	// Name and SQL define a predicate: one boolean expression over the
	// table's columns that every row must satisfy.
	Name string `json:"name,omitempty" jsonschema:"short name of the predicate"`
	SQL  string `json:"sql,omitempty" jsonschema:"predicate: one boolean SQL expression over the table's columns, e.g. amount >= 0 AND currency IS NOT NULL"`
	// MaxFailing is how many rows may fail the predicate (default 0).
	MaxFailing *int64 `json:"max_failing,omitempty" jsonschema:"rows allowed to fail the predicate (default 0)"`
	// StayEmpty declares a table that should hold no rows (StayAlways)
	// or stop growing (StayNoNewRows): a dead-letter or quarantine table.
	StayEmpty string `json:"stay_empty,omitempty" jsonschema:"row_count only: always (the table must hold no rows) or new_rows (no rows may arrive: none per bucket in a window, no growth since the previous check without one)"`
	// Inferred marks a check chosen by profiling rather than declared:
	// its key is a guess, so repeats are judged against history only.
	Inferred bool `json:"inferred,omitempty" jsonschema:"chosen by profiling, not declared"`

	// distinctOnly drops a text distribution's top-value share: history
	// says the column is not low-cardinality (see gateTextProfiles).
	distinctOnly bool
	// source is where a declared check's expectation came from (team or
	// dbt); empty for profiled or requested checks.
	source string
	// parent is the resolved referenced table of a relationships check
	// (resolveParents): Plan reads no catalog but the one it is given.
	parent *warehouse.Table
}

// Stay-empty expectations.
const (
	// StayAlways: the table must hold no rows at all.
	StayAlways = "always"
	// StayNoNewRows: rows already there may stay, but none may arrive.
	StayNoNewRows = "new_rows"
)

func checkStayEmpty(v string, minRows *float64) error {
	switch v {
	case "", StayAlways, StayNoNewRows:
	default:
		return fmt.Errorf("stay_empty %q: use always (the table must hold no rows) or new_rows (no rows may arrive; it must stop growing)", v)
	}
	if v != "" && minRows != nil && *minRows > 0 {
		return fmt.Errorf("stay_empty %s contradicts min_rows %v: a table that should stay empty has no minimum; drop one of them", v, *minRows)
	}
	return nil
}

// Label names the check in reports, e.g. null_rate(egress_bytes).
func (s Spec) Label() string {
	switch s.Kind {
	case KindRowCount:
		return string(s.Kind)
	case KindUniqueness:
		return fmt.Sprintf("uniqueness(%s)", strings.Join(s.Columns, ", "))
	case KindLoadLag:
		return fmt.Sprintf("load_lag(%s - %s)", s.IngestTime, s.EventTime)
	case KindPredicate:
		return fmt.Sprintf("predicate(%s)", s.Name)
	case KindRelationship:
		return fmt.Sprintf("relationships(%s -> %s.%s)", s.Column, s.To, s.Field)
	}
	return fmt.Sprintf("%s(%s)", s.Kind, s.Column)
}

// Grain is the width of a bucket.
type Grain string

// Grains.
const (
	// Whole means no buckets: one value for the whole table or window.
	Whole Grain = ""
	Hour  Grain = "hour"
	Day   Grain = "day"
)

// Duration is the bucket width.
func (g Grain) Duration() time.Duration {
	switch g {
	case Hour:
		return time.Hour
	case Day:
		return 24 * time.Hour
	}
	return 0
}

// ParseGrain reads a bucket name from a tool call.
func ParseGrain(s string) (Grain, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "", "none", "whole":
		return Whole, nil
	case "hour", "hourly", "1h":
		return Hour, nil
	case "day", "daily", "1d":
		return Day, nil
	}
	return Whole, fmt.Errorf("unknown bucket %q: use hour, day, or leave it empty for one value over the whole window", s)
}

// Window limits a scan to rows whose time column falls in [Start, End)
// and optionally buckets them. The zero Window scans the whole table.
type Window struct {
	Column string    `json:"column,omitempty" jsonschema:"time column the window and buckets apply to"`
	Start  time.Time `json:"start,omitzero" jsonschema:"first instant included"`
	End    time.Time `json:"end,omitzero" jsonschema:"first instant excluded"`
	Grain  Grain     `json:"grain,omitempty" jsonschema:"hour or day buckets; empty for one value"`
}

// IsZero reports whether the window scans the whole table.
func (w Window) IsZero() bool {
	return w.Column == "" && w.Start.IsZero() && w.End.IsZero() && w.Grain == Whole
}

// maxBuckets bounds a bucketed window: about two months of hours.
const maxBuckets = 1500

// AssetID names a table as a context-graph asset, platform://schema.table,
// lower-cased because all three engines match these names without regard
// to case.
func AssetID(d warehouse.Dialect, t warehouse.TableRef) string {
	name := t.Name
	if t.Schema != "" {
		name = t.Schema + "." + t.Name
	}
	return d.Name() + "://" + strings.ToLower(name)
}
