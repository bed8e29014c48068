package checks

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/dataworkers/dw/internal/baseline"
	"github.com/dataworkers/dw/internal/store"
	"github.com/dataworkers/dw/internal/warehouse"
)

// Inference is what profiling guessed about a table from its catalog
// entry alone: which column is the key, which hold event and ingest time.
type Inference struct {
	Key        []string `json:"key,omitempty" jsonschema:"inferred key column"`
	EventTime  string   `json:"event_time,omitempty" jsonschema:"inferred event time column"`
	IngestTime string   `json:"ingest_time,omitempty" jsonschema:"inferred ingest time column"`
	// Notes say what was inferred and why, for the report.
	Notes []string `json:"notes,omitempty" jsonschema:"what was inferred and why"`

	keyNote   string
	timeNotes []string
}

// Profile chooses checks for a table nobody declared expectations for:
// row count, the null rate of every column, and uniqueness, freshness and
// load lag where a key and time columns can be inferred.
func Profile(t *warehouse.Table, d warehouse.Dialect) ([]Spec, Inference) {
	inf := Infer(t, d)
	specs := []Spec{{Kind: KindRowCount}}
	for _, c := range t.Columns {
		specs = append(specs, Spec{Kind: KindNullRate, Column: c.Name})
	}
	if len(inf.Key) > 0 {
		specs = append(specs, Spec{Kind: KindUniqueness, Columns: inf.Key, Inferred: true})
	}
	specs = append(specs, timeSpecs(inf.EventTime, inf.IngestTime, "", "", true)...)
	specs = append(specs, valueSpecs(t, d, inf.Key)...)
	return specs, inf
}

// valueSpecs profile the values of every numeric column, and of every
// text column that looks like a category, that is not the key: a median
// that halves or a currency mix that flips is a problem no volume or null
// check sees. They join the same scan as every other check.
func valueSpecs(t *warehouse.Table, d warehouse.Dialect, key []string) []Spec {
	var out []Spec
	for _, c := range t.Columns {
		if slices.ContainsFunc(key, func(k string) bool { return d.SameIdent(k, c.Name) }) {
			continue
		}
		switch classify(d.Name(), c.Type) {
		case kindNumber:
		case kindText:
			if !categoryName(c.Name) {
				continue
			}
		default:
			continue
		}
		out = append(out, Spec{Kind: KindDistribution, Column: c.Name, Inferred: true})
	}
	return out
}

// notCategoryHints mark text columns that name or describe one thing per
// row (ids, names, free text), whose values are nearly all distinct: a
// top-value share of them is noise. This is the cheap first rule; the
// column's own history is the second (gateTextProfiles).
var notCategoryHints = []string{"id", "uuid", "guid", "key", "hash", "token", "email", "name", "url", "uri", "path",
	"description", "desc", "comment", "note", "message", "text", "title", "address", "json", "payload", "body", "sql", "query", "agent"}

// categoryName reports whether a text column's name allows it to be a
// category (currency, status, country, plan): no word of it is a hint of
// one-value-per-row text.
func categoryName(column string) bool {
	for _, w := range strings.FieldsFunc(strings.ToLower(column), func(r rune) bool { return r == '_' || r == '-' || r == ' ' || r == '.' }) {
		if slices.Contains(notCategoryHints, w) {
			return false
		}
	}
	return true
}

// lowCardinalityLimit is the most distinct values a text column may have
// held, in any check of the last two weeks, for its top-value share to be
// profiled. A category (currency, status, country) has a few to a few
// hundred; above a thousand the top value's share is near zero and says
// nothing, and DuckDB's exact top count would hold every value in memory.
const lowCardinalityLimit = 1000

// gateTextProfiles decides "low cardinality" from each text column's own
// history: a column that held more than lowCardinalityLimit distinct
// values keeps only its distinct count (so it is re-admitted if that
// falls). A column without history keeps both: the name rule admitted it,
// and its first scan is what tells.
func gateTextProfiles(ctx context.Context, db *store.DB, asset string, specs []Spec, now time.Time) ([]Spec, error) {
	if !slices.ContainsFunc(specs, func(s Spec) bool { return s.Kind == KindDistribution }) {
		return specs, nil
	}
	series, err := baseline.ListSeries(ctx, db, asset)
	if err != nil {
		return nil, err
	}
	wide := map[string]bool{}
	for _, s := range series {
		if s.Metric != MetricDistinctValues {
			continue
		}
		points, err := baseline.Load(ctx, db, s, now.Add(-14*24*time.Hour), now.Add(time.Millisecond))
		if err != nil {
			return nil, err
		}
		for _, p := range points {
			if p.Value > lowCardinalityLimit {
				wide[strings.ToLower(s.Dimension)] = true
			}
		}
	}
	if len(wide) == 0 {
		return specs, nil
	}
	out := slices.Clone(specs)
	for i, s := range out {
		if s.Kind == KindDistribution && wide[strings.ToLower(s.Column)] {
			out[i].distinctOnly = true
		}
	}
	return out, nil
}

// timeSpecs are the freshness and load-lag checks time columns allow.
func timeSpecs(event, ingest, maxStale, maxLag string, inferred bool) []Spec {
	var out []Spec
	switch {
	case event != "":
		out = append(out, Spec{Kind: KindFreshness, Column: event, MaxAge: maxStale, Inferred: inferred})
	case ingest != "":
		out = append(out, Spec{Kind: KindFreshness, Column: ingest, MaxAge: maxStale, Inferred: inferred})
	}
	if event != "" && ingest != "" {
		out = append(out, Spec{Kind: KindLoadLag, EventTime: event, IngestTime: ingest, MaxAge: maxLag, Inferred: inferred})
	}
	return out
}

// Infer guesses a table's key and time columns by name and type.
func Infer(t *warehouse.Table, d warehouse.Dialect) Inference {
	var inf Inference
	if key, why := inferKey(t, d); key != "" {
		inf.Key = []string{key}
		inf.keyNote = fmt.Sprintf("key %s inferred (%s); repeats are judged against history only until it is declared with set_quality_expectations", key, why)
	} else {
		inf.keyNote = "no key inferred: no column named id, <table>_id, or a first column ending in _id"
	}
	inf.EventTime, inf.IngestTime = inferTimes(t, d)
	if inf.EventTime != "" {
		inf.timeNotes = append(inf.timeNotes, fmt.Sprintf("event time %s inferred from its name and type", inf.EventTime))
	}
	if inf.IngestTime != "" {
		inf.timeNotes = append(inf.timeNotes, fmt.Sprintf("ingest time %s inferred from its name and type", inf.IngestTime))
	}
	if inf.EventTime == "" && inf.IngestTime == "" {
		inf.timeNotes = append(inf.timeNotes, "no date or timestamp column: freshness is not checked")
	}
	inf.Notes = append([]string{inf.keyNote}, inf.timeNotes...)
	return inf
}

func inferKey(t *warehouse.Table, d warehouse.Dialect) (string, string) {
	keyish := func(c warehouse.Column) bool {
		k := classify(d.Name(), c.Type)
		return k == kindNumber || k == kindText
	}
	for _, c := range t.Columns {
		if keyish(c) && strings.EqualFold(c.Name, "id") {
			return c.Name, "named id"
		}
	}
	for _, c := range t.Columns {
		if !keyish(c) {
			continue
		}
		for _, stem := range tableStems(t.Ref.Name) {
			if strings.EqualFold(c.Name, stem+"_id") {
				return c.Name, "named after the table"
			}
		}
	}
	if len(t.Columns) > 0 {
		c := t.Columns[0]
		for _, col := range t.Columns {
			if col.Position > 0 && col.Position < c.Position {
				c = col
			}
		}
		if keyish(c) && strings.HasSuffix(strings.ToLower(c.Name), "_id") {
			return c.Name, "first column, named *_id"
		}
	}
	return "", ""
}

// tableStems are the names a table's key is usually called after:
// member_balances -> member_balances, member_balance, member.
func tableStems(name string) []string {
	n := strings.ToLower(name)
	stems := []string{n, singular(n)}
	if first, _, ok := strings.Cut(n, "_"); ok {
		stems = append(stems, first, singular(first))
	}
	return stems
}

func singular(s string) string {
	switch {
	case strings.HasSuffix(s, "ies"):
		return strings.TrimSuffix(s, "ies") + "y"
	case strings.HasSuffix(s, "ses"), strings.HasSuffix(s, "xes"):
		return strings.TrimSuffix(s, "es")
	case strings.HasSuffix(s, "s") && !strings.HasSuffix(s, "ss"):
		return strings.TrimSuffix(s, "s")
	}
	return s
}

var ingestHints = []string{"ingest", "loaded", "load_time", "load_ts", "inserted", "_etl", "batched_at", "synced", "arrived", "arrival", "received"}

var eventNames = map[string]bool{
	"event_time": true, "event_ts": true, "event_timestamp": true, "event_at": true, "occurred_at": true,
	"timestamp": true, "ts": true, "time": true, "created_at": true, "event_hour": true, "hour": true,
	"window_start": true, "window_end": true, "event_date": true,
}

// latestChangePrefixes begin the names of time columns that record a
// row's latest change (last_activity_at, updated_at, modified_ts).
var latestChangePrefixes = []string{"last_", "latest_", "most_recent_", "updated", "modified", "changed"}

// recordsLatestChange reports whether a time column records each row's
// latest change. Such a table holds current state (an upsert or merge
// target): a row rewritten later leaves the hour it was counted in, so
// rows counted per bucket of that column are the rows whose latest change
// fell there, which shrink as they change again. They are not arrivals,
// and a history read back from the table is biased towards the present.
func recordsLatestChange(column string) bool {
	n := strings.ToLower(column)
	for _, p := range latestChangePrefixes {
		if strings.HasPrefix(n, p) {
			return true
		}
	}
	return false
}

func isIngestName(name string) bool {
	n := strings.ToLower(name)
	for _, h := range ingestHints {
		if strings.Contains(n, h) {
			return true
		}
	}
	return false
}

// inferTimes picks the event time (names like event_time, else the first
// timestamp) and the ingest time (names like ingested_at, loaded_at).
func inferTimes(t *warehouse.Table, d warehouse.Dialect) (event, ingest string) {
	best := 99
	for _, c := range t.Columns {
		k := classify(d.Name(), c.Type)
		if !k.isTime() {
			continue
		}
		if isIngestName(c.Name) {
			if ingest == "" {
				ingest = c.Name
			}
			continue
		}
		n := strings.ToLower(c.Name)
		rank := 3
		switch {
		case strings.Contains(n, "event"):
			rank = 0
		case eventNames[n]:
			rank = 1
		case k != kindDate:
			rank = 2
		}
		if rank < best {
			best, event = rank, c.Name
		}
	}
	return event, ingest
}
