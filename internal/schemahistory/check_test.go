package schemahistory

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/dataworkers/dw/internal/changelog"
	"github.com/dataworkers/dw/internal/clock"
	"github.com/dataworkers/dw/internal/compat"
	"github.com/dataworkers/dw/internal/lineage"
	"github.com/dataworkers/dw/internal/registry"
	"github.com/dataworkers/dw/internal/registry/registrytest"
	"github.com/dataworkers/dw/internal/store/storetest"
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

// newChecker is a Checker over a fresh store, against the registry at url
// (none when empty).
func newChecker(t *testing.T, url string) *Checker {
	t.Helper()
	db := storetest.SQLite(t)
	clk := clock.NewFake(time.Date(2026, 3, 10, 15, 10, 0, 0, time.UTC))
	k := &Checker{DB: db, Graph: lineage.New(db, clk), Clock: clk, Source: "test"}
	if url != "" {
		c, err := registry.New(registry.Config{URL: url, Timeout: 2 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		k.Registry, k.Configured = c, true
	}
	return k
}

func (k *Checker) check(t *testing.T, subject, schema string) *Check {
	t.Helper()
	p, err := ParseProposed(CheckParams{Subject: subject, Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	out, err := k.Check(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// recordBillingLineage: the subject's topic feeds a job that sums
// response_bytes.
func recordBillingLineage(t *testing.T, g *lineage.Graph) {
	t.Helper()
	_, err := g.RecordLineage(context.Background(), lineage.Note{
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

func TestCheckCompatibleButUnsafe(t *testing.T) {
	sr := registrytest.New(t)
	sr.SeedVersions("api-usage-value", compat.Backward, registrytest.Seeded{Kind: compat.Avro, Schema: v11, Version: 11})
	k := newChecker(t, sr.URL())
	recordBillingLineage(t, k.Graph)
	out := k.check(t, "api-usage-value", v12)
	if !out.Compatible || !out.Registry.Reached || !out.Registry.Compatible || out.Level != "BACKWARD" || out.Registry.Level != "BACKWARD" {
		t.Errorf("v12 should pass BACKWARD locally and at the registry: level %s, %+v", out.Level, out.Registry)
	}
	if out.Safe || len(out.Readers) != 1 || out.Readers[0].Asset != "flink://usage-hourly-rollup" || out.Readers[0].Owner != "sam" {
		t.Fatalf("readers = %+v", out.Readers)
	}
	if out.Verdict != "compatible under BACKWARD, but unsafe: flink://usage-hourly-rollup SUM(response_bytes)" {
		t.Errorf("verdict = %q", out.Verdict)
	}
	if out.Against != 11 || len(out.Versions) != 1 || out.Disagreement != "" {
		t.Errorf("against %d versions %v disagreement %q", out.Against, out.Versions, out.Disagreement)
	}

	// Version 13 restores the field: compatible, and nothing reads a
	// removed field.
	sr.SeedVersions("api-usage-value", compat.Backward, registrytest.Seeded{Kind: compat.Avro, Schema: v12, Version: 12})
	out = k.check(t, "api-usage-value", v13)
	if !out.Compatible || !out.Safe || out.Against != 12 || !out.Local.At(compat.BackwardTransitive).Compatible || len(out.Readers) != 0 {
		t.Errorf("v13: compatible=%v safe=%v against=%d verdict=%q", out.Compatible, out.Safe, out.Against, out.Verdict)
	}
	if out.SHA256 == "" {
		t.Error("no canonical hash to bind an approval to")
	}
}

// TestCheckRegistryDownUsesStoredVersions: versions read once are judged
// against when the registry is gone, and the answer says so; lineage that
// was never recorded is never "safe".
func TestCheckRegistryDownUsesStoredVersions(t *testing.T) {
	sr := registrytest.New(t)
	sr.SeedVersions("api-usage-value", compat.Backward, registrytest.Seeded{Kind: compat.Avro, Schema: v11, Version: 11})
	k := newChecker(t, sr.URL())
	k.check(t, "api-usage-value", v12)
	sr.Close()
	out := k.check(t, "api-usage-value", v12)
	if out.Registry.Reached || !out.Registry.Configured || !strings.Contains(out.Registry.Note, "not reached") || !out.Compatible || out.Against != 11 {
		t.Errorf("registry down: %+v compatible=%v against=%d", out.Registry, out.Compatible, out.Against)
	}
	if out.Safe || out.LineageNote == "" {
		t.Errorf("unknown lineage must never read as safe: safe=%v note=%q", out.Safe, out.LineageNote)
	}
}

func TestCheckWithoutRegistryIsAFirstVersion(t *testing.T) {
	k := newChecker(t, "")
	out := k.check(t, "api-usage-value", v12)
	if !out.Compatible || out.Registry.Configured || out.Registry.Reached || out.Registry.Compatible || len(out.Versions) != 0 ||
		!strings.HasPrefix(out.Verdict, "compatible: no earlier version of api-usage-value") || !strings.Contains(out.Verdict, "no schema registry is configured") {
		t.Errorf("no registry: %+v", out)
	}
}

func TestCheckNewSubjectNamesTheClosest(t *testing.T) {
	sr := registrytest.New(t)
	sr.SeedVersions("api-usage-value", compat.Backward, registrytest.Seeded{Kind: compat.Avro, Schema: v11, Version: 11})
	k := newChecker(t, sr.URL())
	out := k.check(t, "api-usage-valeu", v12)
	if !out.Compatible || !out.Registry.Reached || !out.Registry.Compatible || len(out.Versions) != 0 ||
		!strings.HasPrefix(out.Verdict, "compatible: no earlier version") || !strings.Contains(out.Verdict, "api-usage-value") {
		t.Errorf("new subject: %+v", out)
	}
}

func TestParseProposedRefusesBadInput(t *testing.T) {
	for name, in := range map[string]CheckParams{
		"empty subject": {Subject: " ", Schema: v12},
		"unparseable":   {Subject: "api-usage-value", Schema: `{"type":"record",`},
		"bad level":     {Subject: "api-usage-value", Schema: v12, Level: "BACKWARDS"},
		"bad type":      {Subject: "api-usage-value", Schema: v12, SchemaType: "XML"},
	} {
		if _, err := ParseProposed(in); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := ParseProposed(CheckParams{Subject: "s", Schema: v12, Level: "BACKWARDS"}); err == nil || !strings.Contains(err.Error(), "BACKWARD") {
		t.Errorf("a bad level should name the valid ones: %v", err)
	}
	p, err := ParseProposed(CheckParams{Subject: "s", Schema: v12, Level: "full_transitive"})
	if err != nil || p.Level != compat.FullTransitive || p.Kind != compat.Avro || p.SHA256 == "" {
		t.Errorf("good input: %+v %v", p, err)
	}
}

// TestCheckLogsANewRegistryVersion: a version that appears after the
// subject was first read is written to the change log with the fields it
// removed, under the key every reader of the registry uses.
func TestCheckLogsANewRegistryVersion(t *testing.T) {
	sr := registrytest.New(t)
	sr.SeedVersions("api-usage-value", compat.Backward, registrytest.Seeded{Kind: compat.Avro, Schema: v11, Version: 11})
	k := newChecker(t, sr.URL())
	k.check(t, "api-usage-value", v12)
	sr.SeedVersions("api-usage-value", compat.Backward, registrytest.Seeded{Kind: compat.Avro, Schema: v12, Version: 12})
	k.check(t, "api-usage-value", v13)
	list, err := (&changelog.Log{DB: k.DB, Clock: k.Clock}).ListChanges(context.Background(), changelog.ChangeFilter{Asset: "schema://api-usage-value"})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Changes) != 1 || list.Changes[0].Key != "schema-registry:api-usage-value:12" || list.Changes[0].Source != "test" {
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

func TestBreakingFields(t *testing.T) {
	got := BreakingFields([]compat.Change{
		{Kind: "added", Path: "tier"},
		{Kind: "removed", Path: "response_bytes"},
		{Kind: "renamed", Path: "account.key", OldPath: "account.id"},
		{Kind: "type_changed", Path: "response_bytes"},
		{Kind: "optional_to_required", Path: "region"},
	})
	if strings.Join(got, ",") != "account,region,response_bytes" {
		t.Errorf("breaking fields = %v", got)
	}
}
