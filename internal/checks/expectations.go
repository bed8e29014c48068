package checks

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/dataworkers/dw/internal/store"
	"github.com/dataworkers/dw/internal/warehouse"
)

// Expectations are what a team declares about a table: its key, its time
// columns and explicit thresholds. Breaking a threshold fails a check;
// everything else is judged against history.
type Expectations struct {
	Key        []string `json:"key,omitempty" jsonschema:"columns that together identify a row; a repeated key fails the check"`
	EventTime  string   `json:"event_time,omitempty" jsonschema:"column holding when each event happened"`
	IngestTime string   `json:"ingest_time,omitempty" jsonschema:"column holding when each row landed"`
	// MaxNullRate maps a column to the highest null rate allowed (0..1).
	MaxNullRate map[string]float64 `json:"max_null_rate,omitempty" jsonschema:"per column, the highest null rate allowed, from 0 to 1"`
	MinRows     *float64           `json:"min_rows,omitempty" jsonschema:"fewest rows per bucket, or per check without buckets"`
	MaxRows     *float64           `json:"max_rows,omitempty" jsonschema:"most rows per bucket, or per check without buckets"`
	// StayEmpty marks a dead-letter or quarantine table.
	StayEmpty string `json:"stay_empty,omitempty" jsonschema:"for a dead-letter or quarantine table: always (it must hold no rows) or new_rows (rows may remain but none may arrive, so it must stop growing: none per bucket in a window, no growth since the previous check without one)"`
	// MaxStaleness and MaxLoadLag are Go durations such as 90m or 2h.
	MaxStaleness   string           `json:"max_staleness,omitempty" jsonschema:"how old the newest event may be, e.g. 2h"`
	MaxLoadLag     string           `json:"max_load_lag,omitempty" jsonschema:"highest average lag from event to ingest, e.g. 15m"`
	AcceptedValues []AcceptedValues `json:"accepted_values,omitempty" jsonschema:"columns whose non-null values must come from a list"`
	Ranges         []ValueRange     `json:"ranges,omitempty" jsonschema:"numeric columns whose non-null values must lie in a range"`
	Predicates     []PredicateRule  `json:"predicates,omitempty" jsonschema:"boolean SQL expressions every row must satisfy"`
	Relationships  []Relationship   `json:"relationships,omitempty" jsonschema:"columns whose non-null values must exist in a column of another table (a foreign key, like dbt's relationships test)"`

	// fromDBT marks the items that came from an imported dbt manifest's
	// tests rather than from the team (see mergeDBT); never stored.
	fromDBT map[string]bool
}

// Relationship says every non-null value of Column must exist in Field of
// the table To.
type Relationship struct {
	Column string `json:"column" jsonschema:"the referencing column of this table"`
	To     string `json:"to" jsonschema:"the referenced table: schema.table or table"`
	Field  string `json:"field" jsonschema:"the referenced column of that table"`
}

// AcceptedValues lists the values a column may hold.
type AcceptedValues struct {
	Column string   `json:"column" jsonschema:"the column"`
	Values []string `json:"values" jsonschema:"accepted values; numbers for numeric columns"`
}

// ValueRange bounds a numeric column.
type ValueRange struct {
	Column string   `json:"column" jsonschema:"the numeric column"`
	Min    *float64 `json:"min,omitempty" jsonschema:"lowest allowed value: any finite number"`
	Max    *float64 `json:"max,omitempty" jsonschema:"highest allowed value: any finite number"`
}

// PredicateRule is a row-count assertion: rows where SQL is not true are
// counted and at most MaxFailingRows may exist.
type PredicateRule struct {
	Name           string `json:"name" jsonschema:"short name, e.g. non_negative_amount"`
	SQL            string `json:"sql" jsonschema:"one boolean expression over the table's columns, e.g. amount >= 0"`
	MaxFailingRows int64  `json:"max_failing_rows,omitempty" jsonschema:"rows allowed to fail (default 0)"`
}

// Specs turns expectations (nil for none) into checks: the profile's row
// count and null rates always, with the declared thresholds; the declared
// key and time columns, or inferred ones where none are declared.
func Specs(t *warehouse.Table, d warehouse.Dialect, e *Expectations) ([]Spec, Inference) {
	if e == nil {
		return Profile(t, d)
	}
	inf := Infer(t, d)
	var notes []string
	// source says where a declared item came from: dbt's tests or the team.
	source := func(item string) string {
		if e.fromDBT[item] {
			return SourceDBT
		}
		return SourceTeam
	}
	specs := []Spec{{Kind: KindRowCount, Min: e.MinRows, Max: e.MaxRows, StayEmpty: e.StayEmpty, source: SourceTeam}}
	for _, c := range t.Columns {
		s := Spec{Kind: KindNullRate, Column: c.Name}
		for name, rate := range e.MaxNullRate {
			if d.SameIdent(name, c.Name) {
				s.MaxRate = &rate
				s.source = source("null:" + name)
			}
		}
		specs = append(specs, s)
	}
	for name := range e.MaxNullRate {
		if e.fromDBT["null:"+name] && !slices.ContainsFunc(t.Columns, func(c warehouse.Column) bool { return d.SameIdent(name, c.Name) }) {
			notes = append(notes, fmt.Sprintf("dbt test not_null on %s not checked: %s has no column %s", name, t.Ref, name))
		}
	}
	sort.Strings(notes)
	switch {
	case len(e.Key) > 0:
		specs = append(specs, Spec{Kind: KindUniqueness, Columns: e.Key, source: source("key")})
	case len(inf.Key) > 0:
		specs = append(specs, Spec{Kind: KindUniqueness, Columns: inf.Key, Inferred: true})
		notes = append(notes, inf.keyNote)
	}
	event, ingest := e.EventTime, e.IngestTime
	inferred := false
	if event == "" && ingest == "" {
		event, ingest, inferred = inf.EventTime, inf.IngestTime, true
		notes = append(notes, inf.timeNotes...)
	}
	specs = append(specs, timeSpecs(event, ingest, e.MaxStaleness, e.MaxLoadLag, inferred)...)
	key := e.Key
	if len(key) == 0 {
		key = inf.Key
	}
	specs = append(specs, valueSpecs(t, d, key)...)
	for _, a := range e.AcceptedValues {
		specs = append(specs, Spec{Kind: KindAcceptedValues, Column: a.Column, Values: a.Values, source: source("values:" + a.Column)})
	}
	for _, r := range e.Relationships {
		specs = append(specs, Spec{Kind: KindRelationship, Column: r.Column, To: r.To, Field: r.Field, source: source("rel:" + r.Column + ">" + r.To + "." + r.Field)})
	}
	for _, r := range e.Ranges {
		specs = append(specs, Spec{Kind: KindRange, Column: r.Column, Min: r.Min, Max: r.Max, source: SourceTeam})
	}
	for _, p := range e.Predicates {
		maxFailing := p.MaxFailingRows
		specs = append(specs, Spec{Kind: KindPredicate, Name: p.Name, SQL: p.SQL, MaxFailing: &maxFailing, source: SourceTeam})
	}
	used := Inference{Key: e.Key, EventTime: event, IngestTime: ingest, Notes: notes}
	if len(e.Key) == 0 {
		used.Key = inf.Key
	}
	return specs, used
}

// Normalize validates expectations against the table's catalog and
// returns them in catalog spelling. Every check they imply is planned, so
// anything Plan would refuse is refused here, before it is stored.
func (e Expectations) Normalize(t *warehouse.Table, d warehouse.Dialect) (Expectations, error) {
	col := func(name, role string) (string, error) {
		c, err := t.Column(d, name)
		if err != nil {
			return "", fmt.Errorf("%s: %w", role, err)
		}
		return c.Name, nil
	}
	out := e
	var err error
	out.Key = nil
	for _, k := range e.Key {
		name, err := col(k, "key")
		if err != nil {
			return e, err
		}
		out.Key = append(out.Key, name)
	}
	if e.EventTime != "" {
		if out.EventTime, err = col(e.EventTime, "event_time"); err != nil {
			return e, err
		}
	}
	if e.IngestTime != "" {
		if out.IngestTime, err = col(e.IngestTime, "ingest_time"); err != nil {
			return e, err
		}
	}
	if len(e.MaxNullRate) > 0 {
		out.MaxNullRate = map[string]float64{}
		for name, rate := range e.MaxNullRate {
			c, err := col(name, "max_null_rate")
			if err != nil {
				return e, err
			}
			out.MaxNullRate[c] = rate
		}
	}
	out.AcceptedValues = append([]AcceptedValues(nil), e.AcceptedValues...)
	for i := range out.AcceptedValues {
		if out.AcceptedValues[i].Column, err = col(e.AcceptedValues[i].Column, "accepted_values"); err != nil {
			return e, err
		}
	}
	out.Ranges = append([]ValueRange(nil), e.Ranges...)
	for i := range out.Ranges {
		if out.Ranges[i].Column, err = col(e.Ranges[i].Column, "ranges"); err != nil {
			return e, err
		}
	}
	out.Relationships = append([]Relationship(nil), e.Relationships...)
	for i := range out.Relationships {
		if out.Relationships[i].Column, err = col(e.Relationships[i].Column, "relationships"); err != nil {
			return e, err
		}
		if strings.TrimSpace(e.Relationships[i].To) == "" || strings.TrimSpace(e.Relationships[i].Field) == "" {
			return e, fmt.Errorf("relationships on %s: give to (the referenced table) and field (its column)", out.Relationships[i].Column)
		}
	}
	for _, b := range []struct {
		field string
		v     *float64
	}{{"min_rows", e.MinRows}, {"max_rows", e.MaxRows}} {
		if err := checkRowBound(b.field, b.v); err != nil {
			return e, err
		}
	}
	if err := checkStayEmpty(e.StayEmpty, e.MinRows); err != nil {
		return e, err
	}
	names := map[string]bool{}
	for _, p := range e.Predicates {
		if names[p.Name] {
			return e, fmt.Errorf("two predicates are named %q; give each its own name", p.Name)
		}
		names[p.Name] = true
		if p.MaxFailingRows < 0 {
			return e, fmt.Errorf("predicate %s: max_failing_rows %d is negative", p.Name, p.MaxFailingRows)
		}
	}
	if e.EventTime == "" && e.IngestTime == "" && (e.MaxStaleness != "" || e.MaxLoadLag != "") {
		if inf := Infer(t, d); inf.EventTime == "" && inf.IngestTime == "" {
			return e, fmt.Errorf("max_staleness and max_load_lag need a time column: set event_time (time columns: %v)", timeColumns(t, d))
		}
	}
	if e.MaxLoadLag != "" && (out.EventTime == "") != (out.IngestTime == "") {
		return e, errors.New("max_load_lag needs both event_time and ingest_time")
	}
	specs, _ := Specs(t, d, &out)
	// The referenced tables are resolved against the warehouse by the
	// caller (resolveParents); here only this table's own checks.
	specs = slices.DeleteFunc(specs, func(s Spec) bool { return s.Kind == KindRelationship })
	if _, err := Plan(t, d, specs, Window{}); err != nil {
		return e, err
	}
	return out, nil
}

// SaveExpectations records a table's expectations, replacing any earlier.
func SaveExpectations(ctx context.Context, q store.Querier, warehouseName string, table warehouse.TableRef, e Expectations, at time.Time) error {
	doc, err := json.Marshal(e)
	if err != nil {
		return err
	}
	_, err = q.ExecContext(ctx, `INSERT INTO quality_expectations (warehouse, table_ref, spec, updated_ms) VALUES (?, ?, ?, ?)
		ON CONFLICT (warehouse, table_ref) DO UPDATE SET spec = excluded.spec, updated_ms = excluded.updated_ms`,
		warehouseName, table.String(), string(doc), store.Millis(at))
	if err != nil {
		return fmt.Errorf("save expectations for %s: %w", table, err)
	}
	return nil
}

// LoadExpectations reads a table's expectations, the team's merged with
// those an imported dbt manifest's tests declare (mergeDBT: the team's win
// where both speak); nil when there are none. The time is when the team
// last set them.
func LoadExpectations(ctx context.Context, q store.Querier, warehouseName string, table warehouse.TableRef) (*Expectations, time.Time, error) {
	team, at, err := loadTeam(ctx, q, warehouseName, table)
	if err != nil {
		return nil, at, err
	}
	dbt, err := loadDBT(ctx, q, warehouseName, table)
	if err != nil || dbt == nil {
		return team, at, err
	}
	return mergeDBT(team, dbt), at, nil
}

// loadTeam reads what set_quality_expectations stored for a table.
func loadTeam(ctx context.Context, q store.Querier, warehouseName string, table warehouse.TableRef) (*Expectations, time.Time, error) {
	var doc string
	var ms int64
	err := q.QueryRowContext(ctx, `SELECT spec, updated_ms FROM quality_expectations WHERE warehouse = ? AND table_ref = ?`,
		warehouseName, table.String()).Scan(&doc, &ms)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, time.Time{}, nil
	}
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("load expectations for %s: %w", table, err)
	}
	var e Expectations
	if err := json.Unmarshal([]byte(doc), &e); err != nil {
		return nil, time.Time{}, fmt.Errorf("expectations stored for %s are unreadable: %w", table, err)
	}
	return &e, store.FromMillis(ms), nil
}

// labels lists the checks specs would run, for confirmations.
func labels(specs []Spec) []string {
	out := make([]string, len(specs))
	for i, s := range specs {
		out[i] = s.Label()
	}
	sort.Strings(out)
	return out
}
