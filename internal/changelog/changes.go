// Package changelog is the log of changes made to the data stack: deploys,
// releases, schema versions, restores, config changes. Agents and feeds
// record them here; incidents reads them to diagnose a breakage. It is the
// one writer of incident_changes and incident_change_assets.
package changelog

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/dataworkers/dw/internal/bound"
	"github.com/dataworkers/dw/internal/clock"
	"github.com/dataworkers/dw/internal/lineage"
	"github.com/dataworkers/dw/internal/page"
	"github.com/dataworkers/dw/internal/store"
	"github.com/dataworkers/dw/internal/suggest"
	"github.com/dataworkers/dw/internal/textrule"
)

// Log records changes to the data stack and lists them. It is the one
// writer of incident_changes and incident_change_assets; a diagnosis reads
// them through CountWindow, EachKeyOnAssets, EachKeyInWindow and ByIDs.
type Log struct {
	// DB is the shared store.
	DB *store.DB
	// Clock tells the time; clock.System when nil.
	Clock clock.Clock
}

func (l *Log) now() time.Time {
	if l.Clock == nil {
		return time.Now().UTC()
	}
	return l.Clock.Now().UTC()
}

// ByID reads one change with its details; found is false when there is no
// change with that id.
func ByID(ctx context.Context, q store.Querier, id int64) (c Change, found bool, err error) {
	chs, err := queryChanges(ctx, q, true, changeSelect+" WHERE id = ?", id)
	if err != nil || len(chs) == 0 {
		return Change{}, false, err
	}
	return chs[0], true, nil
}

// ByIDs reads the changes with these ids in one query (in chunks), their
// details left undecoded until LoadDetails: a diagnosis reads in full the
// changes whose bound could place them, and puts only the ten it keeps
// into words. An id with no change is absent from the map.
func ByIDs(ctx context.Context, q store.Querier, ids []int64) (map[int64]Change, error) {
	out := make(map[int64]Change, len(ids))
	// In chunks, well under every engine's limit on bound values.
	const chunk = 500
	for len(ids) > 0 {
		part := ids[:min(len(ids), chunk)]
		ids = ids[len(part):]
		args := make([]any, len(part))
		for i, id := range part {
			args[i] = id
		}
		marks := strings.TrimSuffix(strings.Repeat("?, ", len(part)), ", ")
		chs, err := queryChanges(ctx, q, false, changeSelect+" WHERE id IN ("+marks+")", args...)
		if err != nil {
			return nil, err
		}
		for _, c := range chs {
			out[c.ID] = c
		}
	}
	return out, nil
}

// ChangeKind is what sort of change was made.
type ChangeKind string

// Change kinds.
const (
	ChangeDeploy        ChangeKind = "deploy"
	ChangeRelease       ChangeKind = "release"
	ChangeSchemaVersion ChangeKind = "schema_version"
	ChangeRestore       ChangeKind = "restore"
	ChangeConfig        ChangeKind = "config"
	ChangeConnector     ChangeKind = "connector"
	ChangePartitioning  ChangeKind = "partitioning"
	ChangePipeline      ChangeKind = "pipeline"
)

// ChangeKinds lists every change kind.
var ChangeKinds = []ChangeKind{ChangeDeploy, ChangeRelease, ChangeSchemaVersion, ChangeRestore, ChangeConfig,
	ChangeConnector, ChangePartitioning, ChangePipeline}

func parseChangeKind(s string) (ChangeKind, error) {
	k, err := suggest.Parse("change kind", s, ChangeKinds)
	if err != nil {
		return "", invalid("%v", err)
	}
	return k, nil
}

// FieldOp is how a change touched a field.
type FieldOp string

// Field operations.
const (
	FieldRemoved     FieldOp = "removed"
	FieldAdded       FieldOp = "added"
	FieldTypeChanged FieldOp = "type_changed"
	FieldRenamed     FieldOp = "renamed"
)

// FieldOps lists every field operation.
var FieldOps = []FieldOp{FieldRemoved, FieldAdded, FieldTypeChanged, FieldRenamed}

// breaks reports whether readers of the field's old shape stop getting
// values: they read nulls, fail to parse, or read a different unit.
func (o FieldOp) Breaks() bool { return o != FieldAdded }

// FieldChange is one field a change touched.
type FieldChange struct {
	Asset   string  `json:"asset,omitempty" jsonschema:"asset the field belongs to; default: the change's first asset"`
	Name    string  `json:"name" jsonschema:"field or column name before the change"`
	How     FieldOp `json:"how" jsonschema:"removed, added, type_changed or renamed"`
	NewName string  `json:"new_name,omitempty" jsonschema:"new name, for renamed"`
	Detail  string  `json:"detail,omitempty" jsonschema:"e.g. long -> string, or optional with default null"`
}

// Change is one recorded change to the data stack.
type Change struct {
	ID           int64             `json:"id" jsonschema:"change id"`
	Key          string            `json:"key,omitempty" jsonschema:"external key that makes recording idempotent"`
	At           time.Time         `json:"at" jsonschema:"when the change took effect"`
	Kind         ChangeKind        `json:"kind" jsonschema:"deploy, release, schema_version, restore, config, connector, partitioning or pipeline"`
	System       string            `json:"system" jsonschema:"system changed, e.g. schema-registry, flink, dbt, kafka-connect"`
	Assets       []string          `json:"assets" jsonschema:"asset ids the change touched"`
	Fields       []FieldChange     `json:"fields" jsonschema:"fields the change touched and how"`
	StateSkipped bool              `json:"state_skipped,omitempty" jsonschema:"for restore: state in the snapshot was not restored (e.g. allowNonRestoredState)"`
	Actor        string            `json:"actor,omitempty" jsonschema:"who made the change"`
	Source       string            `json:"source" jsonschema:"who recorded it: a tool, a system feed or a person"`
	Summary      string            `json:"summary" jsonschema:"the change in one line"`
	Details      map[string]string `json:"details" jsonschema:"further facts (version, savepoint, ...)"`
	RecordedAt   time.Time         `json:"recorded_at" jsonschema:"when it was recorded"`
	// The totals are set when an answer lists only the first assets,
	// fields or details (Bounded); the log keeps them all.
	AssetsTotal  int `json:"assets_total,omitempty" jsonschema:"assets the change names in all, when assets lists only the first (dw changes show <id> lists every one; list_changes asset finds the change by any of them)"`
	FieldsTotal  int `json:"fields_total,omitempty" jsonschema:"fields the change names in all, when fields lists only the first (dw changes show <id> lists every one)"`
	DetailsTotal int `json:"details_total,omitempty" jsonschema:"details the change has in all, when details holds only the first keys (dw changes show <id> has every one)"`

	// rawDetails holds the stored details until they are needed: a
	// diagnosis reads thousands of changes and keeps ten.
	rawDetails string
}

// Bounds on a change: how much record_change accepts, and how much of one
// change an answer lists.
const (
	// MaxChangeAssets is how many assets one change may name. A deploy
	// that touches more is recorded per system or per group of models
	// (each with its own key), which is also how a diagnosis tells them
	// apart.
	MaxChangeAssets = 500
	// MaxChangeFields is how many fields one change may name.
	MaxChangeFields = 500
	// MaxChangeDetails is how many details one change may carry.
	MaxChangeDetails = 100

	listedAssets, assetsBudget   = 10, 800
	listedFields, fieldsBudget   = 10, 1000
	listedDetails, detailsBudget = 10, 800
	// pageBudget bounds the changes of one list_changes page, in
	// characters: a page ends early rather than answer more, and
	// next_cursor continues from there.
	pageBudget = 50_000
)

// Bounded is the change as an answer lists it: the first assets, fields
// and details within a count and a budget of characters each, with the
// totals when any was cut. The change log keeps everything.
func (c Change) Bounded() Change {
	if n := len(c.Assets); n > 0 {
		if head := bound.Head(c.Assets, listedAssets, assetsBudget); len(head) < n {
			c.Assets, c.AssetsTotal = head, n
		}
	}
	if n := len(c.Fields); n > 0 {
		if head := bound.Head(c.Fields, listedFields, fieldsBudget); len(head) < n {
			c.Fields, c.FieldsTotal = head, n
		}
	}
	if n := len(c.Details); n > 0 {
		keys := slices.Sorted(maps.Keys(c.Details))
		k := bound.First(n, listedDetails, detailsBudget, func(i int) int { return len(keys[i]) + len(c.Details[keys[i]]) + 6 })
		if k < n {
			kept := make(map[string]string, k)
			for _, key := range keys[:k] {
				kept[key] = c.Details[key]
			}
			c.Details, c.DetailsTotal = kept, n
		}
	}
	return c
}

// FitFields fits the fields a system reports for one change (a schema
// version, a table snapshot) into MaxChangeFields: those that break
// readers first, since diagnosis matches them against what jobs read, and
// the count left out in details["fields_omitted"] (details is made when
// nil). A person recording a change is refused instead (record_change).
func FitFields(fields []FieldChange, details map[string]string) ([]FieldChange, map[string]string) {
	if len(fields) <= MaxChangeFields {
		return fields, details
	}
	fields = slices.Clone(fields)
	slices.SortStableFunc(fields, func(a, b FieldChange) int { return cmp.Compare(breakRank(a.How), breakRank(b.How)) })
	if details == nil {
		details = map[string]string{}
	}
	details["fields_omitted"] = fmt.Sprintf("%d more field changes than a change names; the system that reported them holds the whole difference", len(fields)-MaxChangeFields)
	return fields[:MaxChangeFields], details
}

func breakRank(o FieldOp) int {
	if o.Breaks() {
		return 0
	}
	return 1
}

// Bound shortens the recorded change for an answer (Bounded).
func (r *RecordChangeResult) Bound() { r.Change = r.Change.Bounded() }

// LoadDetails decodes details left raw by a diagnosis read (ByIDs).
func (c *Change) LoadDetails() error {
	if c.Details != nil {
		return nil
	}
	c.Details = map[string]string{}
	if err := decodeJSON(c.rawDetails, &c.Details); err != nil {
		return fmt.Errorf("change %d details: %w", c.ID, err)
	}
	c.rawDetails = ""
	return nil
}

// RecordChangeParams is the input of record_change.
type RecordChangeParams struct {
	Key          string            `json:"key,omitempty" jsonschema:"optional external key (e.g. schema-registry:api-usage-value:12); recording the same key again changes nothing"`
	At           time.Time         `json:"at" jsonschema:"when the change took effect (RFC 3339); must not be in the future"`
	Kind         string            `json:"kind" jsonschema:"deploy, release, schema_version, restore, config, connector, partitioning or pipeline"`
	System       string            `json:"system" jsonschema:"system changed, e.g. schema-registry, flink, dbt, kafka-connect, airflow"`
	Assets       []string          `json:"assets" jsonschema:"asset ids the change touched, e.g. schema://api-usage-value; 1 to 500 (record a larger deploy per system or per group of models)"`
	Fields       []FieldChange     `json:"fields,omitempty" jsonschema:"fields touched and how (removed, added, type_changed, renamed); at most 500"`
	StateSkipped bool              `json:"state_skipped,omitempty" jsonschema:"for restore only: some operator state was not restored"`
	Actor        string            `json:"actor,omitempty" jsonschema:"who made the change"`
	Source       string            `json:"source,omitempty" jsonschema:"who records it; default manual"`
	Summary      string            `json:"summary" jsonschema:"the change in one line a person can check"`
	Details      map[string]string `json:"details,omitempty" jsonschema:"further facts, e.g. version, savepoint path; at most 100"`
}

// RecordChangeResult is the output of record_change.
type RecordChangeResult struct {
	Change  Change `json:"change" jsonschema:"the recorded change"`
	Created bool   `json:"created" jsonschema:"false when a change with the same key was already recorded"`
}

// futureSkew tolerates clocks of other systems running slightly ahead.
const FutureSkew = time.Minute

const maxAssetLen = 500

func CleanAsset(field, a string) (string, error) {
	a = strings.TrimSpace(a)
	switch {
	case a == "":
		return "", invalid("%s: empty asset id; use an id like snowflake://usage.usage_hourly", field)
	case len(a) > maxAssetLen:
		return "", invalid("%s: asset id longer than %d characters", field, maxAssetLen)
	case strings.ContainsAny(a, " \t\r\n"):
		return "", invalid("%s: asset id %q contains whitespace", field, a)
	}
	// The one asset id text rule (control and invisible format characters,
	// invalid UTF-8), as every other way in applies it.
	if err := lineage.CheckIDText("", a); err != nil {
		return "", invalid("%s: asset id %s", field, err.(*lineage.IDTextError).Reason())
	}
	return a, nil
}

func (p RecordChangeParams) validate(now time.Time) (Change, error) {
	var c Change
	kind, err := parseChangeKind(p.Kind)
	if err != nil {
		return c, err
	}
	if p.At.IsZero() {
		return c, invalid("at is required: when the change took effect, RFC 3339 (e.g. 2026-10-13T14:05:00Z)")
	}
	if p.At.After(now.Add(FutureSkew)) {
		return c, invalid("at %s is in the future (now %s): record a change once it has taken effect",
			p.At.UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339))
	}
	if strings.TrimSpace(p.System) == "" {
		return c, invalid("system is empty: name the system changed, e.g. schema-registry, flink, dbt")
	}
	if strings.TrimSpace(p.Summary) == "" {
		return c, invalid("summary is empty: say in one line what changed, so a person can check it")
	}
	if len(p.Key) > 300 {
		return c, invalid("key is longer than 300 characters")
	}
	// A change's text is shown to people (dw cause set, a diagnosis, the
	// why of every proposal citing it) and printed in terminals: it is one
	// line of plain text, by the rule approvals applies to a proposal's
	// what, so a stored change cannot recolour, hide or forge a line.
	for _, f := range []struct{ name, v string }{{"summary", p.Summary}, {"actor", p.Actor}, {"key", p.Key}, {"system", p.System}, {"source", p.Source}} {
		if err := checkLine(f.name, f.v); err != nil {
			return c, err
		}
	}
	if len(p.Assets) == 0 {
		return c, invalid("assets is empty: name at least one asset id the change touched")
	}
	if len(p.Assets) > MaxChangeAssets {
		return c, invalid("assets names %d assets; a change names at most %d: record a larger deploy per system or per group of models, each with its own key", len(p.Assets), MaxChangeAssets)
	}
	if len(p.Fields) > MaxChangeFields {
		return c, invalid("fields names %d fields; a change names at most %d: record a wider schema change per asset", len(p.Fields), MaxChangeFields)
	}
	var assets []string
	for _, a := range p.Assets {
		a, err := CleanAsset("assets", a)
		if err != nil {
			return c, err
		}
		if !slices.Contains(assets, a) {
			assets = append(assets, a)
		}
	}
	if p.StateSkipped && kind != ChangeRestore {
		return c, invalid("state_skipped applies only to kind restore (got %s)", kind)
	}
	fields := make([]FieldChange, 0, len(p.Fields))
	for i, f := range p.Fields {
		f.Name = strings.TrimSpace(f.Name)
		f.NewName = strings.TrimSpace(f.NewName)
		if f.Name == "" {
			return c, invalid("fields[%d]: name is empty", i)
		}
		op, err := suggest.Parse("how", string(f.How), FieldOps)
		if err != nil {
			return c, invalid("fields[%d] (%s): %v", i, f.Name, err)
		}
		f.How = op
		if op == FieldRenamed && f.NewName == "" {
			return c, invalid("fields[%d] (%s): renamed needs new_name", i, f.Name)
		}
		f.Asset = strings.TrimSpace(f.Asset)
		if f.Asset == "" {
			f.Asset = assets[0]
		} else if !slices.Contains(assets, f.Asset) {
			return c, invalid("fields[%d] (%s): asset %q is not among the change's assets (%s)", i, f.Name, f.Asset,
				strings.Join(assets, ", "))
		}
		fields = append(fields, f)
	}
	details := map[string]string{}
	if len(p.Details) > MaxChangeDetails {
		return c, invalid("details has %d entries; at most %d", len(p.Details), MaxChangeDetails)
	}
	for k, v := range p.Details {
		if strings.TrimSpace(k) == "" {
			return c, invalid("details: empty key")
		}
		details[k] = v
	}
	source := strings.TrimSpace(p.Source)
	if source == "" {
		source = "manual"
	}
	return Change{
		Key: strings.TrimSpace(p.Key), At: p.At.UTC().Truncate(time.Millisecond), Kind: kind,
		System: strings.TrimSpace(p.System), Assets: assets, Fields: fields, StateSkipped: p.StateSkipped,
		Actor: strings.TrimSpace(p.Actor), Source: source, Summary: strings.TrimSpace(p.Summary),
		Details: details, RecordedAt: now.UTC(),
	}, nil
}

// RecordChange adds a change to the log. With a key, recording the same
// event again (a registry version seen on every poll, a restore reported
// twice) returns the first record and changes nothing.
func (l *Log) RecordChange(ctx context.Context, p RecordChangeParams) (*RecordChangeResult, error) {
	c, err := p.validate(l.now())
	if err != nil {
		return nil, err
	}
	res := &RecordChangeResult{}
	err = l.DB.InTx(ctx, func(tx *store.Tx) error {
		got, created, err := insertChange(ctx, tx, c)
		res.Change, res.Created = got, created
		return err
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

func insertChange(ctx context.Context, tx *store.Tx, c Change) (Change, bool, error) {
	var key any
	if c.Key != "" {
		key = c.Key
	}
	var id int64
	err := tx.QueryRowContext(ctx, `INSERT INTO incident_changes
		(external_key, at_ms, kind, system, assets, fields, state_skipped, actor, source, summary, details, recorded_ms)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (external_key) DO NOTHING RETURNING id`,
		key, store.Millis(c.At), string(c.Kind), c.System, mustJSON(c.Assets), mustJSON(c.Fields),
		boolInt(c.StateSkipped), c.Actor, c.Source, c.Summary, mustJSON(c.Details), store.Millis(c.RecordedAt)).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		existing, err := queryChanges(ctx, tx, true, changeSelect+" WHERE external_key = ?", c.Key)
		if err != nil {
			return Change{}, false, err
		}
		if len(existing) == 0 {
			return Change{}, false, fmt.Errorf("change with key %q neither inserted nor found", c.Key)
		}
		return existing[0], false, nil
	}
	if err != nil {
		return Change{}, false, fmt.Errorf("record change: %w", err)
	}
	c.ID = id
	for _, a := range c.Assets {
		if _, err := tx.ExecContext(ctx, `INSERT INTO incident_change_assets (asset, change_id, at_ms) VALUES (?, ?, ?)
			ON CONFLICT (asset, change_id) DO NOTHING`, a, id, store.Millis(c.At)); err != nil {
			return Change{}, false, fmt.Errorf("record change asset: %w", err)
		}
	}
	return c, true, nil
}

// ChangeFilter selects changes for list_changes.
type ChangeFilter struct {
	Since  time.Time `json:"since,omitzero" jsonschema:"only changes at or after this time"`
	Until  time.Time `json:"until,omitzero" jsonschema:"only changes before this time"`
	Asset  string    `json:"asset,omitempty" jsonschema:"only changes touching this asset id"`
	Kind   string    `json:"kind,omitempty" jsonschema:"only changes of this kind"`
	System string    `json:"system,omitempty" jsonschema:"only changes to this system"`
	page.Params
}

// ChangeList is the output of list_changes.
type ChangeList struct {
	Changes []Change `json:"changes" jsonschema:"this page of matching changes, newest first: up to limit, fewer when they are long (next_cursor continues); each lists its first assets, fields and details (assets_total, fields_total, details_total count them all)"`
	page.Info
}

// ListChanges lists recorded changes, newest first.
func (l *Log) ListChanges(ctx context.Context, f ChangeFilter) (*ChangeList, error) {
	if !f.Since.IsZero() && !f.Until.IsZero() && !f.Until.After(f.Since) {
		return nil, invalid("until (%s) must be after since (%s)", f.Until.UTC().Format(time.RFC3339), f.Since.UTC().Format(time.RFC3339))
	}
	pg, err := f.ResolveKeyset(changeKey, "list_changes", f.Since.String(), f.Until.String(), f.Asset, f.Kind, f.System)
	if err != nil {
		return nil, err
	}
	var where []string
	var args []any
	from := "incident_changes c"
	if f.Asset != "" {
		a, err := CleanAsset("asset", f.Asset)
		if err != nil {
			return nil, err
		}
		from += " JOIN incident_change_assets ca ON ca.change_id = c.id"
		where = append(where, "ca.asset = ?")
		args = append(args, a)
	}
	if f.Kind != "" {
		k, err := parseChangeKind(f.Kind)
		if err != nil {
			return nil, err
		}
		where = append(where, "c.kind = ?")
		args = append(args, string(k))
	}
	if f.System != "" {
		where = append(where, "c.system = ?")
		args = append(args, strings.TrimSpace(f.System))
	}
	if !f.Since.IsZero() {
		where = append(where, "c.at_ms >= ?")
		args = append(args, store.Millis(f.Since))
	}
	if !f.Until.IsZero() {
		where = append(where, "c.at_ms < ?")
		args = append(args, store.Millis(f.Until))
	}
	cond := ""
	if len(where) > 0 {
		cond = " WHERE " + strings.Join(where, " AND ")
	}
	var total int
	if err := l.DB.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+from+cond, args...).Scan(&total); err != nil {
		return nil, fmt.Errorf("count changes: %w", err)
	}
	// The page is the rows after the previous page's last (at, id), so a
	// change recorded or removed between pages moves no other row.
	if pg.After != nil {
		where = append(where, "(c.at_ms, c.id) < (?, ?)")
		args = append(args, pg.After...)
		cond = " WHERE " + strings.Join(where, " AND ")
	}
	q := `SELECT c.id, c.external_key, c.at_ms, c.kind, c.system, c.assets, c.fields, c.state_skipped,
		c.actor, c.source, c.summary, c.details, c.recorded_ms FROM ` + from + cond +
		" ORDER BY c.at_ms DESC, c.id DESC LIMIT ?"
	changes, err := queryChanges(ctx, l.DB, true, q, append(args, pg.Fetch())...)
	if err != nil {
		return nil, err
	}
	for i := range changes {
		changes[i] = changes[i].Bounded()
	}
	key := func(c Change) page.Key { return page.Key{store.Millis(c.At), c.ID} }
	// A page of long changes ends early, within the answer's budget: the
	// cursor then goes on after the last change listed.
	if n := min(len(changes), pg.Limit); n > 0 {
		if kept := bound.Head(changes[:n], n, pageBudget); len(kept) < n {
			return &ChangeList{Changes: kept, Info: page.Info{Total: total, NextCursor: pg.NextAfter(key(kept[len(kept)-1]), true)}}, nil
		}
	}
	list := &ChangeList{}
	list.Changes, list.Info = page.Cut(pg, changes, total, key)
	return list, nil
}

// changeKey pages list_changes newest first by when each change happened,
// its id breaking ties.
var changeKey = page.Keyset{page.Int, page.Int}

const changeSelect = `SELECT id, external_key, at_ms, kind, system, assets, fields, state_skipped,
	actor, source, summary, details, recorded_ms FROM incident_changes`

// loadChanges reads the changes in [from, to), oldest first, leaving their
// details undecoded (see Change.loadDetails). The time index keeps this to
// the window however long the log grows.
func LoadWindow(ctx context.Context, q store.Querier, from, to time.Time) ([]Change, error) {
	return queryChanges(ctx, q, false, changeSelect+" WHERE at_ms >= ? AND at_ms < ? ORDER BY at_ms, id",
		store.Millis(from), store.Millis(to))
}

func queryChanges(ctx context.Context, q store.Querier, withDetails bool, query string, args ...any) ([]Change, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("read changes: %w", err)
	}
	defer rows.Close()
	out := []Change{}
	for rows.Next() {
		var c Change
		var key sql.NullString
		var atMs, recMs int64
		var kind, assets, fields, details string
		var skipped int
		if err := rows.Scan(&c.ID, &key, &atMs, &kind, &c.System, &assets, &fields, &skipped,
			&c.Actor, &c.Source, &c.Summary, &details, &recMs); err != nil {
			return nil, fmt.Errorf("read change: %w", err)
		}
		c.Key, c.At, c.Kind, c.StateSkipped, c.RecordedAt = key.String, store.FromMillis(atMs), ChangeKind(kind), skipped != 0, store.FromMillis(recMs)
		if err := decodeJSON(assets, &c.Assets); err != nil {
			return nil, fmt.Errorf("change %d assets: %w", c.ID, err)
		}
		if c.Assets == nil {
			c.Assets = []string{}
		}
		if fields == "[]" {
			c.Fields = []FieldChange{}
		} else if err := decodeJSON(fields, &c.Fields); err != nil {
			return nil, fmt.Errorf("change %d fields: %w", c.ID, err)
		}
		c.rawDetails = details
		if withDetails {
			if err := c.LoadDetails(); err != nil {
				return nil, err
			}
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

// describeFields is "removed response_bytes; added response_kib".
func DescribeFields(fs []FieldChange) string {
	byOp := map[FieldOp][]string{}
	for _, f := range fs {
		name := f.Name
		if f.How == FieldRenamed {
			name += " to " + f.NewName
		}
		byOp[f.How] = append(byOp[f.How], name)
	}
	var parts []string
	for _, op := range FieldOps {
		if names := byOp[op]; len(names) > 0 {
			sort.Strings(names)
			verb := string(op)
			if op == FieldTypeChanged {
				verb = "changed the type of"
			}
			parts = append(parts, verb+" "+strings.Join(names, ", "))
		}
	}
	return strings.Join(parts, "; ")
}

// ErrInvalid is matched (errors.Is) by every error caused by bad input, so
// a tool can tell the model to fix its call rather than retry it.
// incidents.ErrInvalid is the same value.
var ErrInvalid = errors.New("invalid input")

type invalidError struct{ msg string }

func (e *invalidError) Error() string        { return e.msg }
func (e *invalidError) Is(target error) bool { return target == ErrInvalid }

// checkLine applies the one free-text rule (internal/textrule) to one
// field of a change, naming the field, the character and where it stands.
func checkLine(field, s string) error {
	r, pos, bad := textrule.First(strings.TrimSpace(s), false)
	if !bad {
		return nil
	}
	return invalid("%s holds %U (%s) at character %d; it is one line of plain text: no control characters and no invisible formatting (zero-width, bidi), so the change reads as it is shown",
		field, r, textrule.Kind(r), pos)
}

func invalid(format string, args ...any) error {
	return &invalidError{msg: fmt.Sprintf(format, args...)}
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		// Only plain structs, slices and maps of strings are stored.
		panic(fmt.Sprintf("changelog: encode %T: %v", v, err))
	}
	return string(b)
}

func decodeJSON(s string, v any) error {
	if s == "" {
		return nil
	}
	return json.Unmarshal([]byte(s), v)
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
