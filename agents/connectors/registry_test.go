package connectors

import (
	"context"
	"github.com/dataworkers/dw/internal/changelog"
	"strings"
	"testing"
	"time"

	"github.com/dataworkers/dw/internal/compat"
	"github.com/dataworkers/dw/internal/page"
	"github.com/dataworkers/dw/internal/registry/registrytest"
)

// The billing story's subject: version 11 carries an optional
// response_bytes, version 12 drops it for response_kib, version 13
// restores it beside response_kib.
const (
	subject = "api-usage-value"
	v11     = `{"type":"record","name":"ApiUsage","namespace":"com.acme.usage","fields":[
		{"name":"usage_id","type":"string"},{"name":"account_id","type":"string"},
		{"name":"response_bytes","type":["null","long"],"default":null}]}`
	v12 = `{"type":"record","name":"ApiUsage","namespace":"com.acme.usage","fields":[
		{"name":"usage_id","type":"string"},{"name":"account_id","type":"string"},
		{"name":"response_kib","type":["null","double"],"default":null}]}`
	v13 = `{"type":"record","name":"ApiUsage","namespace":"com.acme.usage","fields":[
		{"name":"usage_id","type":"string"},{"name":"account_id","type":"string"},
		{"name":"response_kib","type":["null","double"],"default":null},
		{"name":"response_bytes","type":["null","long"],"default":null}]}`
)

// billingRegistry serves api-usage-value at versions 11 and 12 (BACKWARD)
// and an unrelated subject.
func billingRegistry(t *testing.T) *registrytest.Server {
	t.Helper()
	r := registrytest.New(t)
	if _, err := r.SeedVersions(subject, compat.Backward,
		registrytest.Seeded{Schema: v11, Version: 11}, registrytest.Seeded{Schema: v12, Version: 12}); err != nil {
		t.Fatal(err)
	}
	r.Seed("member-balances-value", "", `{"type":"record","name":"Balance","fields":[{"name":"member_id","type":"string"},{"name":"points","type":"long"}]}`)
	return r
}

func registryYAML(url string) string {
	return "schema_registry:\n  url: " + url + "\n  timeout: 2s\n"
}

// TestLatestSchemaRecordsTheVersion reads version 12, says what it dropped,
// and records it once in the change log with the first-seen time.
func TestLatestSchemaRecordsTheVersion(t *testing.T) {
	engines(t, func(t *testing.T, sy string) {
		ctx := context.Background()
		r := billingRegistry(t)
		e := newEnv(t, sy+registryYAML(r.URL()))

		out, summary, err := e.h.latestSchema(ctx, LatestSchemaIn{Subject: subject})
		if err != nil {
			t.Fatal(err)
		}
		if out.Version != 12 || out.SchemaType != "AVRO" || out.Compatibility != "BACKWARD" || out.LevelSource != "subject" || out.Previous != 11 {
			t.Errorf("latest: %+v", out)
		}
		canon, _ := compat.Canonicalize(compat.Avro, compat.Schema{Text: v12})
		if out.SHA256 != canon.SHA256 {
			t.Errorf("sha256 %s, want %s", out.SHA256, canon.SHA256)
		}
		var removed, added bool
		for _, c := range out.Changes {
			removed = removed || (c.Kind == compat.Removed && c.Path == "response_bytes")
			added = added || (c.Kind == compat.Added && c.Path == "response_kib")
		}
		if !removed || !added {
			t.Errorf("changes from 11: %+v", out.Changes)
		}
		if !strings.Contains(summary, "removed response_bytes") || !strings.Contains(summary, "first seen") {
			t.Errorf("summary:\n%s", summary)
		}
		if out.Change == nil || !out.Change.Created || out.Change.Key != "schema-registry:api-usage-value:12" || !out.Change.At.Equal(t0) {
			t.Fatalf("change: %+v", out.Change)
		}

		changes := e.changes("schema://api-usage-value")
		if len(changes) != 1 {
			t.Fatalf("%d changes recorded", len(changes))
		}
		c := changes[0]
		if c.Kind != changelog.ChangeSchemaVersion || c.System != "schema-registry" || c.Details["version"] != "12" ||
			!strings.Contains(c.Details["registered_at"], "first saw") || !strings.Contains(c.Summary, "removed response_bytes") {
			t.Errorf("recorded change: %+v", c)
		}
		var dropped bool
		for _, f := range c.Fields {
			dropped = dropped || (f.Name == "response_bytes" && f.How == changelog.FieldRemoved)
		}
		if !dropped {
			t.Errorf("fields: %+v", c.Fields)
		}

		// Seen again an hour later: the same change, the first time kept.
		e.clk.Advance(time.Hour)
		out, _, err = e.h.latestSchema(ctx, LatestSchemaIn{Subject: subject})
		if err != nil {
			t.Fatal(err)
		}
		if out.Change == nil || out.Change.Created || out.Change.ID != c.ID || !out.Change.At.Equal(t0) {
			t.Errorf("second read: %+v", out.Change)
		}
		if n := len(e.changes("schema://api-usage-value")); n != 1 {
			t.Errorf("%d changes after a second read", n)
		}

		// A first version has nothing to compare with.
		out, _, err = e.h.latestSchema(ctx, LatestSchemaIn{Subject: "member-balances-value"})
		if err != nil {
			t.Fatal(err)
		}
		if out.Version != 1 || out.Previous != 0 || len(out.Changes) != 0 || out.LevelSource != "global" || !strings.Contains(e.changes("schema://member-balances-value")[0].Summary, "first version") {
			t.Errorf("first version: %+v", out)
		}

		_, _, err = e.h.latestSchema(ctx, LatestSchemaIn{Subject: "api-usage-valu"})
		wantErr(t, err, `unknown subject "api-usage-valu"`, "closest: api-usage-value")
		_, _, err = e.h.latestSchema(ctx, LatestSchemaIn{Subject: " "})
		wantErr(t, err, "subject is empty")
	})
}

func TestListSubjects(t *testing.T) {
	ctx := context.Background()
	r := billingRegistry(t)
	e := newEnv(t, registryYAML(r.URL()))
	out, _, err := e.h.listSubjects(ctx, ListSubjectsIn{})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(out.Subjects, ",") != "api-usage-value,member-balances-value" || out.Total != 2 || out.RegistryTotal != 2 {
		t.Errorf("subjects: %+v", out)
	}
	out, summary, err := e.h.listSubjects(ctx, ListSubjectsIn{Prefix: "member"})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(out.Subjects, ",") != "member-balances-value" || out.Total != 1 || out.RegistryTotal != 2 || !strings.Contains(summary, `1 of 2 subjects`) {
		t.Errorf("prefix: %+v %s", out, summary)
	}
	first, _, err := e.h.listSubjects(ctx, ListSubjectsIn{Params: page.Params{Limit: 1}})
	if err != nil || len(first.Subjects) != 1 || first.NextCursor == "" {
		t.Fatalf("page 1: %+v %v", first, err)
	}
	second, _, err := e.h.listSubjects(ctx, ListSubjectsIn{Params: page.Params{Limit: 1, Cursor: first.NextCursor}})
	if err != nil || len(second.Subjects) != 1 || second.NextCursor != "" || second.Subjects[0] == first.Subjects[0] {
		t.Fatalf("page 2: %+v %v", second, err)
	}
}

// TestRegistryNotReachable names the registry and the timeout.
func TestRegistryNotReachable(t *testing.T) {
	e := newEnv(t, "schema_registry:\n  url: http://127.0.0.1:1\n  timeout: 300ms\n")
	_, _, err := e.h.listSubjects(context.Background(), ListSubjectsIn{})
	wantErr(t, err, "http://127.0.0.1:1", "300ms", "connection refused")
	_, _, err = e.h.latestSchema(context.Background(), LatestSchemaIn{Subject: subject})
	wantErr(t, err, "http://127.0.0.1:1", "300ms")

	hang := make(chan struct{})
	url := newHangingServer(t, hang)
	e = newEnv(t, "schema_registry:\n  url: "+url+"\n  timeout: 200ms\n")
	_, _, err = e.h.latestSchema(context.Background(), LatestSchemaIn{Subject: subject})
	close(hang)
	wantErr(t, err, url, "200ms", "timed out")

	e = newEnv(t, "")
	_, _, err = e.h.listSubjects(context.Background(), ListSubjectsIn{})
	wantErr(t, err, "set schema_registry.url in dw.yaml")
}
