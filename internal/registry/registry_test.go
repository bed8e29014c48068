package registry_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/dataworkers/dw/internal/compat"
	"github.com/dataworkers/dw/internal/registry"
	"github.com/dataworkers/dw/internal/registry/registrytest"
	"github.com/dataworkers/dw/internal/rest/resttest"
)

func usage(optional ...string) string {
	fields := []string{
		`{"name":"usage_id","type":"string"}`,
		`{"name":"account_id","type":"string"}`,
		`{"name":"event_time","type":{"type":"long","logicalType":"timestamp-millis"}}`,
		`{"name":"ingest_time","type":{"type":"long","logicalType":"timestamp-millis"}}`,
		`{"name":"endpoint","type":"string"}`,
		`{"name":"status","type":"int"}`,
	}
	for _, n := range optional {
		fields = append(fields, `{"name":"`+n+`","type":["null","long"],"default":null}`)
	}
	return `{"type":"record","name":"ApiUsage","namespace":"com.example.usage","fields":[` + strings.Join(fields, ",") + `]}`
}

var (
	v11 = usage("response_bytes")
	v12 = usage("response_kib")
	v13 = usage("response_kib", "response_bytes")
)

func client(t *testing.T, url string) *registry.Client {
	t.Helper()
	c, err := registry.New(registry.Config{URL: url, Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// story seeds the billing subject at versions 11 and 12, as in scenario A.
func story(t *testing.T) (*registrytest.Server, *registry.Client) {
	srv := registrytest.New(t)
	if _, err := srv.SeedVersions("api-usage-value", compat.Backward,
		registrytest.Seeded{Schema: v11, Version: 11}, registrytest.Seeded{Schema: v12}); err != nil {
		t.Fatal(err)
	}
	srv.Seed("orders-value", "", `{"type":"record","name":"Order","fields":[{"name":"id","type":"string"}]}`)
	return srv, client(t, srv.URL())
}

func TestReadsSubjectsVersionsAndConfig(t *testing.T) {
	srv, c := story(t)
	ctx := context.Background()
	subs, err := c.Subjects(ctx)
	if err != nil || strings.Join(subs, ",") != "api-usage-value,orders-value" {
		t.Fatalf("subjects %v %v", subs, err)
	}
	vs, err := c.Versions(ctx, "api-usage-value")
	if err != nil || len(vs) != 2 || vs[0] != 11 || vs[1] != 12 {
		t.Fatalf("versions %v %v", vs, err)
	}
	latest, err := c.Latest(ctx, "api-usage-value")
	if err != nil {
		t.Fatal(err)
	}
	if latest.Version != 12 || latest.ID == 0 || latest.Schema != v12 || latest.Kind() != compat.Avro || latest.Subject != "api-usage-value" {
		t.Fatalf("latest %+v", latest)
	}
	old, err := c.Version(ctx, "api-usage-value", 11)
	if err != nil || old.Schema != v11 {
		t.Fatalf("v11 %+v %v", old, err)
	}
	if _, err := c.Version(ctx, "api-usage-value", 5); registry.ErrorCode(err) != registry.CodeVersionNotFound {
		t.Fatalf("missing version: %v", err)
	}
	if _, err := c.Version(ctx, "api-usage-value", 0); err == nil {
		t.Fatal("version 0 accepted")
	}

	cfg, err := c.Config(ctx, "api-usage-value")
	if err != nil || cfg.Level != compat.Backward || cfg.Source != "subject" {
		t.Fatalf("subject config %+v %v", cfg, err)
	}
	if err := srv.SetGlobalLevel(compat.FullTransitive); err != nil {
		t.Fatal(err)
	}
	cfg, err = c.Config(ctx, "orders-value")
	if err != nil || cfg.Level != compat.FullTransitive || cfg.Source != "global" {
		t.Fatalf("global fallback %+v %v", cfg, err)
	}

	// Nothing is cached: a version registered after a read is seen.
	if _, err := c.Register(ctx, "api-usage-value", registry.NewSchema{Schema: v13}); err != nil {
		t.Fatal(err)
	}
	vs, err = c.Versions(ctx, "api-usage-value")
	if err != nil || len(vs) != 3 || vs[2] != 13 {
		t.Fatalf("versions after register %v %v", vs, err)
	}
	latest, err = c.Latest(ctx, "api-usage-value")
	if err != nil || latest.Version != 13 {
		t.Fatalf("latest after register %+v %v", latest, err)
	}
	if srv.Hits("GET /subjects/api-usage-value/versions") != 2 {
		t.Fatalf("versions asked %d times", srv.Hits("GET /subjects/api-usage-value/versions"))
	}
}

func TestRegisterLookupAndStoryVerdicts(t *testing.T) {
	srv, c := story(t)
	ctx := context.Background()
	s13 := registry.NewSchema{Schema: v13}

	if _, found, err := c.Lookup(ctx, "api-usage-value", s13); err != nil || found {
		t.Fatalf("v13 not yet registered: found=%v err=%v", found, err)
	}
	res, err := c.CheckCompatibility(ctx, "api-usage-value", s13, registry.AgainstConfigured)
	if err != nil || !res.IsCompatible || res.Against != "configured" {
		t.Fatalf("v13 BACKWARD against 12: %+v %v", res, err)
	}
	id, err := c.Register(ctx, "api-usage-value", s13)
	if err != nil {
		t.Fatal(err)
	}
	got, found, err := c.Lookup(ctx, "api-usage-value", registry.NewSchema{Schema: strings.ReplaceAll(v13, ",", ", ")})
	if err != nil || !found || got.Version != 13 || got.ID != id {
		t.Fatalf("lookup of a respelled v13: %+v found=%v err=%v", got, found, err)
	}
	again, err := c.Register(ctx, "api-usage-value", s13)
	if err != nil || again != id || len(srv.Versions("api-usage-value")) != 3 {
		t.Fatalf("re-registering returns the same id without a new version: %d %v %v", again, err, srv.Versions("api-usage-value"))
	}

	// The local verdict over the registry's history agrees.
	hist, err := c.History(ctx, "api-usage-value")
	if err != nil || len(hist) != 3 {
		t.Fatalf("history %v %v", hist, err)
	}
	prev, err := c.CompatVersions(ctx, hist[:2])
	if err != nil {
		t.Fatal(err)
	}
	v, err := compat.Check(compat.Avro, compat.Schema{Text: v13}, prev, compat.BackwardTransitive)
	if err != nil || !v.Compatible {
		t.Fatalf("local transitive verdict: %+v %v", v, err)
	}

	bad := registry.NewSchema{Schema: `{"type":"record","name":"ApiUsage","namespace":"com.example.usage","fields":[{"name":"x","type":"nope"}]}`}
	if _, err := c.Register(ctx, "api-usage-value", bad); registry.ErrorCode(err) != registry.CodeInvalidSchema || !strings.Contains(err.Error(), "nope") {
		t.Fatalf("invalid schema: %v", err)
	}
}

func TestVerboseIncompatibleMessages(t *testing.T) {
	srv := registrytest.New(t)
	read := func(name string) string {
		b, err := os.ReadFile("testdata/avro/" + name)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	srv.Seed("validity-period-value", "", read("demo-scene__validity_period.avsc"))
	srv.Seed("membership-value", compat.Backward, read("demo-scene__membership_v1.avsc"))
	c := client(t, srv.URL())
	ctx := context.Background()
	v2 := registry.NewSchema{Schema: read("demo-scene__membership_v2.avsc"),
		References: []registry.Reference{{Name: "io.confluent.devrel.ValidityPeriod", Subject: "validity-period-value", Version: 1}}}

	res, err := c.CheckCompatibility(ctx, "membership-value", v2, registry.AgainstLatest)
	if err != nil {
		t.Fatal(err)
	}
	if res.IsCompatible || len(res.Issues) != 1 {
		t.Fatalf("membership v2 drops dates and adds a required record: %+v", res)
	}
	is := res.Issues[0]
	if is.ErrorType != "READER_FIELD_MISSING_DEFAULT_VALUE" || is.AdditionalInfo != "validity_period" || is.OldSchemaVersion != 1 ||
		!strings.Contains(is.Description, "'/fields/1'") {
		t.Fatalf("issue %+v", is)
	}
	if !strings.HasPrefix(res.Messages[0], "{errorType:'READER_FIELD_MISSING_DEFAULT_VALUE', description:'The field 'validity_period'") {
		t.Fatalf("raw message %q", res.Messages[0])
	}
	_, err = c.Register(ctx, "membership-value", v2)
	var ae *registry.APIError
	if !errors.As(err, &ae) || ae.Code != registry.CodeIncompatible || ae.Status != 409 || !strings.Contains(ae.Message, "validity_period") {
		t.Fatalf("register incompatible: %v", err)
	}
}

func TestTransitiveVersusLatest(t *testing.T) {
	srv := registrytest.New(t)
	srv.Seed("r-value", compat.BackwardTransitive,
		`{"type":"record","name":"R","fields":[{"name":"id","type":"string"},{"name":"x","type":"int"}]}`,
		`{"type":"record","name":"R","fields":[{"name":"id","type":"string"}]}`)
	c := client(t, srv.URL())
	ctx := context.Background()
	v3 := registry.NewSchema{Schema: `{"type":"record","name":"R","fields":[{"name":"id","type":"string"},{"name":"x","type":"string","default":""}]}`}

	latest, err := c.CheckCompatibility(ctx, "r-value", v3, registry.AgainstLatest)
	if err != nil || !latest.IsCompatible || latest.Messages == nil {
		t.Fatalf("against latest: %+v %v", latest, err)
	}
	all, err := c.CheckCompatibility(ctx, "r-value", v3, registry.AgainstConfigured)
	if err != nil || all.IsCompatible {
		t.Fatalf("against all (BACKWARD_TRANSITIVE): %+v %v", all, err)
	}
	if len(all.Issues) != 1 || all.Issues[0].ErrorType != "TYPE_MISMATCH" || all.Issues[0].OldSchemaVersion != 1 {
		t.Fatalf("issues %+v", all.Issues)
	}
	one, err := c.CheckCompatibility(ctx, "r-value", v3, "1")
	if err != nil || one.IsCompatible || one.Against != "1" {
		t.Fatalf("against version 1: %+v %v", one, err)
	}
	if _, err := c.CheckCompatibility(ctx, "r-value", v3, "first"); err == nil {
		t.Fatal("bad against accepted")
	}
	if _, err := c.Register(ctx, "r-value", v3); registry.ErrorCode(err) != registry.CodeIncompatible {
		t.Fatalf("register under BACKWARD_TRANSITIVE: %v", err)
	}
}

func TestUnknownSubjectNamesClosest(t *testing.T) {
	_, c := story(t)
	ctx := context.Background()
	checks := map[string]func() error{
		"versions": func() error { _, err := c.Versions(ctx, "api-usage-valeu"); return err },
		"latest":   func() error { _, err := c.Latest(ctx, "api-usage-valeu"); return err },
		"lookup": func() error {
			_, _, err := c.Lookup(ctx, "api-usage-valeu", registry.NewSchema{Schema: v12})
			return err
		},
		"compatibility": func() error {
			_, err := c.CheckCompatibility(ctx, "api-usage-valeu", registry.NewSchema{Schema: v12}, registry.AgainstLatest)
			return err
		},
	}
	for name, f := range checks {
		err := f()
		var nf *registry.SubjectNotFoundError
		if !errors.As(err, &nf) || nf.Closest[0] != "api-usage-value" || registry.ErrorCode(err) != registry.CodeSubjectNotFound {
			t.Fatalf("%s: %v", name, err)
		}
		if !strings.Contains(err.Error(), `unknown subject "api-usage-valeu"`) || !strings.Contains(err.Error(), "closest: api-usage-value") {
			t.Fatalf("%s message: %v", name, err)
		}
	}
}

func TestUnreachableRegistryFailsFast(t *testing.T) {
	c, err := registry.New(registry.Config{URL: "http://127.0.0.1:1", Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	start := time.Now()
	_, err = c.Subjects(ctx)
	if !registry.IsUnreachable(err) || !strings.HasPrefix(err.Error(), "schema registry http://127.0.0.1:1 not reached within 5s: connection refused") {
		t.Fatalf("subjects: %v", err)
	}
	_, err = c.Latest(ctx, "api-usage-value")
	if !registry.IsUnreachable(err) || !strings.Contains(err.Error(), "GET http://127.0.0.1:1/subjects/api-usage-value/versions/latest") {
		t.Fatalf("latest: %v", err)
	}
	if time.Since(start) > 2*time.Second {
		t.Fatalf("a refused connection took %s", time.Since(start))
	}

	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(3 * time.Second):
		}
	}))
	defer slow.Close()
	c, err = registry.New(registry.Config{URL: slow.URL, Timeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	for name, f := range map[string]func() error{
		"subjects": func() error { _, err := c.Subjects(ctx); return err },
		"config":   func() error { _, err := c.Config(ctx, "x"); return err },
	} {
		err := f()
		var ue *registry.UnreachableError
		if !errors.As(err, &ue) || ue.Cause != "timed out" || !strings.Contains(err.Error(), "not reached within 100ms: timed out") {
			t.Fatalf("%s: %v", name, err)
		}
	}
	if time.Since(start) > time.Second {
		t.Fatalf("timeouts took %s", time.Since(start))
	}

	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := c.Subjects(cancelled); !errors.Is(err, context.Canceled) || registry.IsUnreachable(err) {
		t.Fatalf("a cancelled call is the caller's doing, not an unreachable registry: %v", err)
	}
}

func TestBasicAuthIsSent(t *testing.T) {
	var seen []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, p, ok := r.BasicAuth()
		if !ok || u != "sr-user" || p != "s3cret" {
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write([]byte(`{"error_code":401,"message":"Unauthorized"}`))
			return
		}
		seen = append(seen, r.URL.Path)
		w.Header().Set("Content-Type", "application/vnd.schemaregistry.v1+json")
		if r.URL.Path == "/subjects" {
			_, _ = w.Write([]byte(`["a-value"]`))
			return
		}
		_, _ = w.Write([]byte(`{"compatibilityLevel":"FULL","compatibilityGroup":"abc.cg.version","normalize":true,"alias":""}`))
	}))
	defer srv.Close()
	c, err := registry.New(registry.Config{URL: srv.URL + "/", Username: "sr-user", Password: "s3cret"})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if subs, err := c.Subjects(ctx); err != nil || len(subs) != 1 {
		t.Fatalf("subjects with auth: %v %v", subs, err)
	}
	cfg, err := c.Config(ctx, "a-value")
	if err != nil || cfg.Level != compat.Full || cfg.CompatibilityGroup != "abc.cg.version" || !cfg.Normalize {
		t.Fatalf("config with auth: %+v %v", cfg, err)
	}
	if len(seen) != 2 {
		t.Fatalf("requests seen: %v", seen)
	}
	noAuth := client(t, srv.URL)
	if _, err := noAuth.Config(ctx, "a-value"); registry.ErrorCode(err) != 401 || !strings.Contains(err.Error(), "Unauthorized") {
		t.Fatalf("without credentials: %v", err)
	}
}

func TestConfigValidate(t *testing.T) {
	for _, cfg := range []registry.Config{
		{URL: ""}, {URL: "localhost:8081"}, {URL: "ftp://x"}, {URL: "http://x", Password: "p"},
	} {
		if _, err := registry.New(cfg); err == nil {
			t.Errorf("%+v accepted", cfg)
		}
	}
	c, err := registry.New(registry.Config{URL: "http://localhost:8081"})
	if err != nil || c.Timeout() != registry.DefaultTimeout {
		t.Fatalf("defaults: %v %v", c, err)
	}
}

func TestParseMessages(t *testing.T) {
	msgs := []string{
		"{errorType:'READER_FIELD_MISSING_DEFAULT_VALUE', description:'The field 'f2' at path '/fields/1' in the new schema has no default value and is missing in the old schema', additionalInfo:'f2'}",
		"{errorType:'TYPE_MISMATCH', description:'The type (path '/fields/0/type') of a field in the new schema does not match with the old schema', additionalInfo:'reader type: STRING not compatible with writer type: INT'}",
		"{oldSchemaVersion: 3}",
		"{oldSchema: '{\"type\":\"record\",\"name\":\"R\",\"fields\":[]}'}",
		"{validateFields: 'false', compatibility: 'BACKWARD'}",
		"Incompatibility{type:NAME_MISMATCH, location:/name, message:expected: R, reader:{\"type\":\"record\"}, writer:{\"type\":\"record\"}}",
		"something else",
	}
	got := registry.ParseMessages(msgs)
	if len(got) != 4 {
		t.Fatalf("%+v", got)
	}
	if got[0].ErrorType != "READER_FIELD_MISSING_DEFAULT_VALUE" || got[0].AdditionalInfo != "f2" || got[0].OldSchemaVersion != 3 ||
		!strings.HasPrefix(got[0].Description, "The field 'f2'") {
		t.Fatalf("modern: %+v", got[0])
	}
	if got[1].OldSchemaVersion != 3 || got[1].AdditionalInfo != "reader type: STRING not compatible with writer type: INT" {
		t.Fatalf("second: %+v", got[1])
	}
	if got[2].ErrorType != "NAME_MISMATCH" || got[2].Location != "/name" || got[2].Description != "expected: R" {
		t.Fatalf("legacy: %+v", got[2])
	}
	if got[3].Raw != "something else" {
		t.Fatalf("raw: %+v", got[3])
	}
}

func TestDisagreementIsReported(t *testing.T) {
	local, err := compat.Check(compat.Avro, compat.Schema{Text: v13}, []compat.Version{{Version: 12, Schema: compat.Schema{Text: v12}}}, compat.Backward)
	if err != nil {
		t.Fatal(err)
	}
	agree := &registry.Compatibility{IsCompatible: true, Against: "configured"}
	if d := registry.Disagreement(local, agree); d != "" {
		t.Fatalf("agreeing verdicts: %q", d)
	}
	remote := &registry.Compatibility{Against: "configured", Issues: registry.ParseMessages([]string{
		"{errorType:'READER_FIELD_MISSING_DEFAULT_VALUE', description:'…', additionalInfo:'response_kib'}", "{oldSchemaVersion: 12}"})}
	d := registry.Disagreement(local, remote)
	if !strings.Contains(d, "registry (against configured) finds the schema incompatible") || !strings.Contains(d, "response_kib") ||
		!strings.Contains(d, "against version 12") {
		t.Fatalf("registry stricter: %q", d)
	}
	strict, err := compat.Check(compat.Avro, compat.Schema{Text: v13}, []compat.Version{{Version: 1, Schema: compat.Schema{Text: `{"type":"record","name":"Other","fields":[]}`}}}, compat.Backward)
	if err != nil {
		t.Fatal(err)
	}
	if d := registry.Disagreement(strict, agree); !strings.Contains(d, "local check under BACKWARD does not") || !strings.Contains(d, "NAME_MISMATCH") {
		t.Fatalf("local stricter: %q", d)
	}
}

func TestJSONAndProtobufRoundTrip(t *testing.T) {
	srv := registrytest.New(t)
	c := client(t, srv.URL())
	ctx := context.Background()
	js := registry.NewSchema{Kind: "json", Schema: `{"type":"object","additionalProperties":false,"properties":{"id":{"type":"string"}}}`}
	id, err := c.Register(ctx, "j-value", js)
	if err != nil {
		t.Fatal(err)
	}
	got, found, err := c.Lookup(ctx, "j-value", js)
	if err != nil || !found || got.ID != id || got.SchemaType != "JSON" || got.Kind() != compat.JSON {
		t.Fatalf("json lookup: %+v %v %v", got, found, err)
	}
	wider := registry.NewSchema{Kind: compat.JSON, Schema: `{"type":"object","additionalProperties":false,"properties":{"id":{"type":"string"},"n":{"type":"integer"}}}`}
	if _, err := c.Register(ctx, "j-value", wider); err != nil {
		t.Fatalf("optional property added to a closed model is BACKWARD compatible: %v", err)
	}
	narrower := registry.NewSchema{Kind: compat.JSON, Schema: `{"type":"object","additionalProperties":false,"properties":{}}`}
	res, err := c.CheckCompatibility(ctx, "j-value", narrower, registry.AgainstLatest)
	if err != nil || res.IsCompatible || res.Issues[0].ErrorType != "PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL" {
		t.Fatalf("property removed from closed model: %+v %v", res, err)
	}
	if _, _, err := c.Lookup(ctx, "j-value", registry.NewSchema{Kind: "xml", Schema: "<x/>"}); err == nil || !strings.Contains(err.Error(), "AVRO, JSON, PROTOBUF") {
		t.Fatalf("unknown kind: %v", err)
	}

	proto := registry.NewSchema{Kind: compat.Protobuf, Schema: "syntax = \"proto3\";\npackage p;\nmessage M {\n  string a = 1;\n}\n"}
	if _, err := c.Register(ctx, "p-value", proto); err != nil {
		t.Fatal(err)
	}
	got, found, err = c.Lookup(ctx, "p-value", proto)
	if err != nil || !found || got.Kind() != compat.Protobuf || got.Version != 1 {
		t.Fatalf("protobuf lookup: %+v %v %v", got, found, err)
	}
}

// A registry answering 1 GiB, as a success or as an error, costs at most
// the cap, on a call reading an object and on one reading a list: the
// call fails instead of exhausting memory.
func TestHugeAnswerIsBounded(t *testing.T) {
	for _, status := range []int{http.StatusOK, http.StatusInternalServerError} {
		srv := resttest.HugeServer(t, status)
		c, err := registry.New(registry.Config{URL: srv.URL, Timeout: 20 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Run("object", func(t *testing.T) {
			resttest.RequireBounded(t, 4*registry.MaxResponseBytes, func() error {
				_, err := c.Config(context.Background(), "usage-value")
				return err
			})
		})
		t.Run("list", func(t *testing.T) {
			resttest.RequireBounded(t, 4*registry.MaxResponseBytes, func() error {
				_, err := c.Subjects(context.Background())
				return err
			})
		})
	}
}
