package schema

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dataworkers/dw/internal/changelog"
	"github.com/dataworkers/dw/internal/clock"
	"github.com/dataworkers/dw/internal/compat"
	"github.com/dataworkers/dw/internal/config"
	"github.com/dataworkers/dw/internal/deps"
	"github.com/dataworkers/dw/internal/lineage"
	"github.com/dataworkers/dw/internal/page"
	"github.com/dataworkers/dw/internal/registry/registrytest"
	"github.com/dataworkers/dw/internal/warehouse/duckdb"
	"github.com/dataworkers/dw/internal/warehouses"
)

const v11 = `{"type":"record","name":"ApiUsage","namespace":"com.example.usage","fields":[
 {"name":"usage_id","type":"string"},{"name":"account_id","type":"string"},
 {"name":"response_bytes","type":["null","long"],"default":null}]}`
const v12 = `{"type":"record","name":"ApiUsage","namespace":"com.example.usage","fields":[
 {"name":"usage_id","type":"string"},{"name":"account_id","type":"string"},
 {"name":"response_kib","type":["null","long"],"default":null}]}`
const v13 = `{"type":"record","name":"ApiUsage","namespace":"com.example.usage","fields":[
 {"name":"usage_id","type":"string"},{"name":"account_id","type":"string"},
 {"name":"response_kib","type":["null","long"],"default":null},
 {"name":"response_bytes","type":["null","long"],"default":null}]}`

func testDeps(t *testing.T, registryURL string) *deps.Deps {
	t.Helper()
	yaml := "home: " + t.TempDir() + "\n"
	if registryURL != "" {
		yaml += "schema_registry:\n  url: " + registryURL + "\n  timeout: 2s\n"
	}
	cfg, err := config.Parse("dw.yaml", []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	d := deps.New(Name, cfg, clock.NewFake(time.Date(2026, 3, 10, 15, 10, 0, 0, time.UTC)), nil)
	t.Cleanup(func() { d.Close() })
	return d
}

func recordBillingLineage(t *testing.T, d *deps.Deps) {
	t.Helper()
	db, err := d.Store(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	g := lineage.New(db, d.Clock)
	_, err = g.RecordLineage(context.Background(), lineage.Note{
		Path: []string{"schema://api-usage-value", "kafka://prod/api-usage"},
		Assets: []lineage.NoteAsset{
			{ID: "schema://api-usage-value", Owner: "sam"},
			{ID: "flink://usage-hourly-rollup", Kind: "stream_job", Owner: "sam",
				SQL: "INSERT INTO usage_hourly SELECT account_id, SUM(response_bytes) AS egress_bytes FROM api_usage GROUP BY account_id"},
		},
		Edges: []lineage.NoteEdge{{From: "kafka://prod/api-usage", To: "flink://usage-hourly-rollup", ReadsFields: []string{"response_bytes", "account_id"}}},
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestCompatibleButUnsafe(t *testing.T) {
	sr := registrytest.New(t)
	sr.SeedVersions("api-usage-value", compat.Backward,
		registrytest.Seeded{Kind: compat.Avro, Schema: v11, Version: 11})
	d := testDeps(t, sr.URL())
	recordBillingLineage(t, d)
	h := &handlers{d: d}
	out, summary, err := h.checkCompatibility(context.Background(), CheckIn{Subject: "api-usage-value", Schema: v12})
	if err != nil {
		t.Fatal(err)
	}
	if !out.Compatible || !out.Registry.Reached || !out.Registry.Compatible {
		t.Errorf("v12 should pass BACKWARD locally and at the registry: %+v", out.Registry)
	}
	if out.Safe || len(out.Readers) != 1 || out.Readers[0].Asset != "flink://usage-hourly-rollup" || out.Readers[0].Owner != "sam" {
		t.Fatalf("readers = %+v", out.Readers)
	}
	if !strings.Contains(out.Verdict, "compatible under BACKWARD, but unsafe: flink://usage-hourly-rollup SUM(response_bytes)") {
		t.Errorf("verdict = %q", out.Verdict)
	}
	if !strings.Contains(summary, "unsafe") {
		t.Errorf("summary = %q", summary)
	}

	// Version 13 restores the field: compatible and nothing reads a removed field.
	sr.SeedVersions("api-usage-value", compat.Backward, registrytest.Seeded{Kind: compat.Avro, Schema: v12, Version: 12})
	out, _, err = h.checkCompatibility(context.Background(), CheckIn{Subject: "api-usage-value", Schema: v13})
	if err != nil {
		t.Fatal(err)
	}
	if !out.Compatible || !out.Safe || out.Against != 12 || !out.Local.At(compat.BackwardTransitive).Compatible {
		t.Errorf("v13: compatible=%v safe=%v against=%d verdict=%q", out.Compatible, out.Safe, out.Against, out.Verdict)
	}
	if out.SHA256 == "" {
		t.Error("no canonical hash to bind an approval to")
	}
}

func TestRegistryDownUsesStoredVersionsAndSaysSo(t *testing.T) {
	sr := registrytest.New(t)
	sr.SeedVersions("api-usage-value", compat.Backward, registrytest.Seeded{Kind: compat.Avro, Schema: v11, Version: 11})
	d := testDeps(t, sr.URL())
	h := &handlers{d: d}
	if _, _, err := h.checkCompatibility(context.Background(), CheckIn{Subject: "api-usage-value", Schema: v12}); err != nil {
		t.Fatal(err)
	}
	sr.Close()
	out, _, err := h.checkCompatibility(context.Background(), CheckIn{Subject: "api-usage-value", Schema: v12})
	if err != nil {
		t.Fatal(err)
	}
	if out.Registry.Reached || !strings.Contains(out.Registry.Note, "not reached") || !out.Compatible {
		t.Errorf("registry down: %+v compatible=%v", out.Registry, out.Compatible)
	}
	if out.Safe {
		t.Error("unknown lineage must never read as safe")
	}
}

func TestBadInput(t *testing.T) {
	sr := registrytest.New(t)
	sr.SeedVersions("api-usage-value", compat.Backward, registrytest.Seeded{Kind: compat.Avro, Schema: v11, Version: 11})
	h := &handlers{d: testDeps(t, sr.URL())}
	ctx := context.Background()
	// A subject the registry does not have is a first version, not an
	// error; a near miss names the subject it may have meant.
	out, _, err := h.checkCompatibility(ctx, CheckIn{Subject: "api-usage-valeu", Schema: v12})
	if err != nil || !out.Compatible || !strings.HasPrefix(out.Verdict, "compatible: no earlier version") || !strings.Contains(out.Verdict, "api-usage-value") || len(out.Versions) != 0 {
		t.Errorf("new subject: %+v, %v", out, err)
	}
	if _, _, err := h.checkCompatibility(ctx, CheckIn{Subject: "api-usage-value", Schema: `{"type":"record",`}); err == nil {
		t.Error("unparseable schema accepted")
	}
	if _, _, err := h.checkCompatibility(ctx, CheckIn{Subject: "api-usage-value", Schema: v12, Level: "BACKWARDS"}); err == nil || !strings.Contains(err.Error(), "BACKWARD") {
		t.Errorf("bad level: %v", err)
	}
}

// TestNewRegistryVersionIsAChange: a version that appears after the
// subject was first read is written to the change log with the fields it
// removed, under the key dw-connectors uses too.
func TestNewRegistryVersionIsAChange(t *testing.T) {
	sr := registrytest.New(t)
	sr.SeedVersions("api-usage-value", compat.Backward, registrytest.Seeded{Kind: compat.Avro, Schema: v11, Version: 11})
	d := testDeps(t, sr.URL())
	h := &handlers{d: d}
	ctx := context.Background()
	if _, _, err := h.checkCompatibility(ctx, CheckIn{Subject: "api-usage-value", Schema: v12}); err != nil {
		t.Fatal(err)
	}
	sr.SeedVersions("api-usage-value", compat.Backward, registrytest.Seeded{Kind: compat.Avro, Schema: v12, Version: 12})
	if _, _, err := h.checkCompatibility(ctx, CheckIn{Subject: "api-usage-value", Schema: v13}); err != nil {
		t.Fatal(err)
	}
	db, _ := d.Store(ctx)
	list, err := (&changelog.Log{DB: db, Clock: d.Clock}).ListChanges(ctx, changelog.ChangeFilter{Asset: "schema://api-usage-value"})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Changes) != 1 || list.Changes[0].Key != "schema-registry:api-usage-value:12" {
		t.Fatalf("changes = %+v", list.Changes)
	}
	removed := false
	for _, f := range list.Changes[0].Fields {
		removed = removed || (f.Name == "response_bytes" && f.How == changelog.FieldRemoved)
	}
	if !removed {
		t.Errorf("version 12's change should name response_bytes as removed: %+v", list.Changes[0].Fields)
	}
}

func TestDetectSchemaChange(t *testing.T) {
	home := t.TempDir()
	path := filepath.Join(home, "wh.duckdb")
	write := func(stmts ...string) {
		db, err := duckdb.OpenWrite(context.Background(), path, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		for _, s := range stmts {
			if _, err := db.Exec(s); err != nil {
				t.Fatalf("%s: %v", s, err)
			}
		}
	}
	write(`CREATE SCHEMA usage`, `CREATE TABLE usage.usage_hourly (usage_id VARCHAR, egress_bytes BIGINT, region VARCHAR)`)
	cfg, err := config.Parse("dw.yaml", []byte("home: "+home+"\nwarehouses:\n  - {name: wh, kind: duckdb, path: "+path+"}\n"))
	if err != nil {
		t.Fatal(err)
	}
	d := deps.New(Name, cfg, clock.NewFake(time.Date(2026, 3, 10, 9, 0, 0, 0, time.UTC)), nil)
	d.OpenWarehouse = warehouses.Open
	t.Cleanup(func() { d.Close() })
	h := &handlers{d: d}
	ctx := context.Background()
	first, _, err := h.detectSchemaChange(ctx, DetectIn{Table: "usage.usage_hourly"})
	if err != nil || !first.First {
		t.Fatalf("first: %+v %v", first, err)
	}
	write(`ALTER TABLE usage.usage_hourly RENAME COLUMN egress_bytes TO egress_kib`, `ALTER TABLE usage.usage_hourly DROP COLUMN region`)
	out, summary, err := h.detectSchemaChange(ctx, DetectIn{Table: "usage.usage_hourly"})
	if err != nil {
		t.Fatal(err)
	}
	if !out.Changed || out.ChangeID == 0 || !strings.Contains(summary, "egress_bytes likely renamed to egress_kib") || !strings.Contains(summary, "dropped region") {
		t.Errorf("second: %+v %q", out, summary)
	}
	if _, _, err := h.detectSchemaChange(ctx, DetectIn{Table: "usage.usage_hourli"}); err == nil || !strings.Contains(err.Error(), "usage_hourly") {
		t.Errorf("unknown table: %v", err)
	}
	list, _, err := h.listSchemaChanges(ctx, ListIn{})
	if err != nil || len(list.Changes) != 1 {
		t.Fatalf("list: %+v %v", list, err)
	}
}

// TestWideTableAnswersAreBounded: a table rebuilt with 20,000 columns.
// detect_schema_change, get_schema_snapshot and list_schema_changes each
// answer in bounded size, say what they left out, and paging the snapshot
// visits every column once.
func TestWideTableAnswersAreBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a 20,000-column table")
	}
	const wide = 20_000
	home := t.TempDir()
	path := filepath.Join(home, "wh.duckdb")
	write := func(stmts ...string) {
		db, err := duckdb.OpenWrite(context.Background(), path, 30*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		for _, s := range stmts {
			if _, err := db.Exec(s); err != nil {
				t.Fatalf("%.200s: %v", s, err)
			}
		}
	}
	write(`CREATE SCHEMA usage`, `CREATE TABLE usage.wide (id VARCHAR)`)
	cfg, err := config.Parse("dw.yaml", []byte("home: "+home+"\nwarehouses:\n  - {name: wh, kind: duckdb, path: "+path+"}\n"))
	if err != nil {
		t.Fatal(err)
	}
	d := deps.New(Name, cfg, clock.NewFake(time.Date(2026, 3, 10, 9, 0, 0, 0, time.UTC)), nil)
	d.OpenWarehouse = warehouses.Open
	t.Cleanup(func() { d.Close() })
	h := &handlers{d: d}
	ctx := context.Background()
	if _, _, err := h.detectSchemaChange(ctx, DetectIn{Table: "usage.wide"}); err != nil {
		t.Fatal(err)
	}
	var cols strings.Builder
	cols.WriteString("id VARCHAR")
	for i := range wide - 1 {
		fmt.Fprintf(&cols, ", column_with_a_long_name_%05d BIGINT", i)
	}
	write(`DROP TABLE usage.wide`, `CREATE TABLE usage.wide (`+cols.String()+`)`)

	det, summary, err := h.detectSchemaChange(ctx, DetectIn{Table: "usage.wide"})
	if err != nil {
		t.Fatal(err)
	}
	if n := jsonSize(t, det) + len(summary); n > maxAnswer {
		t.Errorf("detect_schema_change answer is %d characters", n)
	}
	if !det.Changed || det.ColumnsTotal != wide || det.ChangesTotal != wide-1 || !det.Truncated ||
		len(det.Snapshot.Columns) != maxDetectColumns || len(det.Snapshot.Changes) != maxSnapshotChanges {
		t.Errorf("detect: changed %v, columns %d of %d, changes %d of %d, truncated %v", det.Changed,
			len(det.Snapshot.Columns), det.ColumnsTotal, len(det.Snapshot.Changes), det.ChangesTotal, det.Truncated)
	}

	snap, summary, err := h.getSchemaSnapshot(ctx, SnapshotIn{Table: "usage.wide"})
	if err != nil {
		t.Fatal(err)
	}
	if n := jsonSize(t, snap) + len(summary); n > maxAnswer {
		t.Errorf("get_schema_snapshot answer is %d characters", n)
	}
	if snap.Total != wide || snap.NextCursor == "" || len(snap.Snapshot.Columns) != snapshotColumnsDefault ||
		snap.ChangesTotal != wide-1 || len(snap.Snapshot.Changes) != maxSnapshotChanges {
		t.Fatalf("snapshot: %d columns of %d, cursor %q, changes %d of %d", len(snap.Snapshot.Columns), snap.Total,
			snap.NextCursor, len(snap.Snapshot.Changes), snap.ChangesTotal)
	}
	seen := map[string]int{}
	in := SnapshotIn{Table: "usage.wide", Params: page.Params{Limit: page.MaxLimit}}
	for {
		res, _, err := h.getSchemaSnapshot(ctx, in)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range res.Snapshot.Columns {
			seen[c.Name]++
		}
		if res.NextCursor == "" {
			break
		}
		in.Cursor = res.NextCursor
	}
	if len(seen) != wide {
		t.Errorf("paging visited %d of %d columns", len(seen), wide)
	}
	for name, n := range seen {
		if n != 1 {
			t.Fatalf("column %s listed %d times", name, n)
		}
	}
	for _, bad := range []string{"99999999999", "-1", "AAAAAAAAAAAAAAAAAAAA"} {
		if _, _, err := h.getSchemaSnapshot(ctx, SnapshotIn{Table: "usage.wide", Params: page.Params{Cursor: bad}}); err == nil || !strings.Contains(err.Error(), "cursor") {
			t.Errorf("forged cursor %q: %v", bad, err)
		}
	}

	list, summary, err := h.listSchemaChanges(ctx, ListIn{})
	if err != nil {
		t.Fatal(err)
	}
	if n := jsonSize(t, list) + len(summary); n > maxAnswer {
		t.Errorf("list_schema_changes answer is %d characters", n)
	}
	if len(list.Changes) != 1 || list.Changes[0].ChangesTotal != wide-1 || len(list.Changes[0].Changes) != maxListedChanges {
		t.Errorf("list: %d entries, %+v", len(list.Changes), list.Changes)
	}
	// A cursor pages the column list it started on: after a snapshot with
	// other columns it says so instead of going on by position.
	write(`ALTER TABLE usage.wide ADD COLUMN a_late_column BIGINT`)
	if _, _, err := h.detectSchemaChange(ctx, DetectIn{Table: "usage.wide"}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := h.getSchemaSnapshot(ctx, SnapshotIn{Table: "usage.wide", Params: page.Params{Cursor: snap.NextCursor}}); err == nil ||
		!strings.Contains(err.Error(), "changed since the first page") || !strings.Contains(err.Error(), "omit cursor") {
		t.Errorf("cursor over a replaced snapshot: %v", err)
	}
}

// maxAnswer is about 20k tokens, the most a default answer may hold.
const maxAnswer = 80_000

func jsonSize(t *testing.T, v any) int {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return len(b)
}
