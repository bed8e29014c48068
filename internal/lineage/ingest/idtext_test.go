package ingest

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/dataworkers/dw/internal/lineage"
	"github.com/dataworkers/dw/internal/lineage/lineagetest"
	"github.com/dataworkers/dw/internal/store"
	"github.com/dataworkers/dw/internal/store/storetest"
)

// The refused text each case carries. Errors must never quote the value;
// the secret-looking word shows a value leaking into a message.
const leak = "hunter2"

func reason(r rune, pos int) string {
	return (&lineage.IDTextError{Rune: r, Pos: pos}).Reason()
}

// OpenLineage: a dataset or job whose name breaks the asset id rule is an
// invalid field, named by its path, both when validated (emit_lineage_event)
// and when imported leniently (import_openlineage_events), and nothing is
// written.
func TestRunEventNamesFollowTheIDRule(t *testing.T) {
	event := func(jobName, inNS, inName, outName string) string {
		return `{"eventType": "COMPLETE", "eventTime": "2026-03-10T14:10:00Z", "run": {"runId": "0192963f-f6f8-71c0-8380-500bc70883ee"},
			"job": {"namespace": "etl", "name": ` + q(jobName) + `},
			"inputs": [{"namespace": "postgres://db:5432", "name": "shop.public.orders"}, {"namespace": ` + q(inNS) + `, "name": ` + q(inName) + `}],
			"outputs": [{"namespace": "kafka://broker:9092", "name": ` + q(outName) + `}],
			"producer": "https://example.com/p", "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/definitions/RunEvent"}`
	}
	cases := []struct {
		name  string
		doc   string
		probs []FieldError
	}{
		{"ESC in an input name", event("load", "postgres://db:5432", leak+"\x1b[2K\x1b[1A\rbilling.t0", "out"),
			[]FieldError{{"inputs[1].name", reason(0x1b, 8)}}},
		{"LF in an output name", event("load", "postgres://db:5432", "shop.public.x", "line1\nbilling.fake"),
			[]FieldError{{"outputs[0].name", reason('\n', 6)}}},
		{"zero-width space in a namespace", event("load", "postgres://db\u200b:5432", "shop.public.x", "out"),
			[]FieldError{{"inputs[1].namespace", reason(0x200b, 14)}}},
		{"NUL in the job name", event("lo\x00ad", "postgres://db:5432", "shop.public.x", "out"),
			[]FieldError{{"job.name", reason(0, 3)}}},
		{"bidi override in the job name", event("load\u202e"+leak, "postgres://db:5432", "shop.public.x", "out"),
			[]FieldError{{"job.name", reason(0x202e, 5)}}},
	}
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		g, _ := newGraph(t, db)
		for _, c := range cases {
			// Validated, as emit_lineage_event does.
			err := ValidateRunEvent([]byte(c.doc))
			var ve *ValidationError
			if !errors.As(err, &ve) || !reflect.DeepEqual(ve.Problems, c.probs) {
				t.Errorf("%s: ValidateRunEvent = %v, want %+v", c.name, err, c.probs)
			}
			_, err = RunEvents(ctx, g, []byte(c.doc), OpenLineageOptions{Validate: true})
			if !errors.As(err, &ve) || !reflect.DeepEqual(ve.Problems, c.probs) {
				t.Errorf("%s: RunEvents(Validate) = %v, want %+v", c.name, err, c.probs)
			}
			// Leniently imported: the event is listed as invalid, by field.
			_, err = RunEvents(ctx, g, []byte(c.doc), OpenLineageOptions{})
			var nre *NoRunEventError
			if !errors.As(err, &nre) || len(nre.Invalid) != 1 || !reflect.DeepEqual(nre.Invalid[0].Problems, c.probs) {
				t.Errorf("%s: RunEvents = %v, want invalid %+v", c.name, err, c.probs)
			}
			if err != nil && strings.Contains(err.Error(), leak) {
				t.Errorf("%s: error quotes the value: %v", c.name, err)
			}
		}
		// Invalid UTF-8 in the file: the decoder turns it into U+FFFD,
		// which the rule refuses for that reason.
		bad := strings.Replace(event("load", "postgres://db:5432", "shop.public.ok", "out"), "shop.public.ok", "shop.public.\xffok", 1)
		var ve *ValidationError
		if err := ValidateRunEvent([]byte(bad)); !errors.As(err, &ve) || !reflect.DeepEqual(ve.Problems, []FieldError{{"inputs[1].name", reason(0xfffd, 13)}}) {
			t.Errorf("invalid UTF-8: %v", err)
		}
		if n := lineagetest.Count(t, db, "lineage_assets"); n != 0 {
			t.Errorf("refused events wrote %d assets", n)
		}
	})
}

func q(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteString(`\` + string(r))
		case r < 0x20:
			b.WriteString(`\u00`)
			b.WriteByte("0123456789abcdef"[r>>4])
			b.WriteByte("0123456789abcdef"[r&15])
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// dbt: a node whose id or relation parts break the rule is refused by its
// path, the value never shown.
func TestDBTNodeNamesFollowTheIDRule(t *testing.T) {
	const v12 = `"dbt_schema_version": "https://schemas.getdbt.com/dbt/manifest/v12.json", "adapter_type": "duckdb"`
	doc := func(section, key, body string) string {
		other := map[string]string{"nodes": "sources", "sources": "nodes"}[section]
		return `{"metadata": {` + v12 + `}, "` + other + `": {}, "` + section + `": {` + q(key) + `: ` + body + `}}`
	}
	cases := []struct {
		name, doc, want string
	}{
		{"unique_id with a zero-width space", doc("nodes", "model.p.a\u200b", `{"unique_id": "model.p.a\u200b", "resource_type": "model"}`),
			`dbt manifest nodes["model.p.a"… (a name of 10 characters)].unique_id ` + reason(0x200b, 10)},
		{"alias with ESC", doc("nodes", "model.p.a", `{"unique_id": "model.p.a", "resource_type": "model", "schema": "s", "alias": "`+leak+`\u001b[2K"}`),
			`dbt manifest nodes["model.p.a"].alias ` + reason(0x1b, 8)},
		{"source identifier with LF", doc("sources", "source.p.s.t", `{"unique_id": "source.p.s.t", "resource_type": "source", "schema": "s", "identifier": "t\nfake"}`),
			`dbt manifest sources["source.p.s.t"].identifier ` + reason('\n', 2)},
		{"relation_name with NUL", doc("nodes", "model.p.a", `{"unique_id": "model.p.a", "resource_type": "model", "relation_name": "\"db\".\"s\".\"a\u0000\""}`),
			`dbt manifest nodes["model.p.a"].relation_name ` + reason(0, 12)},
	}
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		g, _ := newGraph(t, db)
		for _, c := range cases {
			_, err := DBTManifest(context.Background(), g, strings.NewReader(c.doc), DBTOptions{})
			if err == nil || err.Error() != c.want {
				t.Errorf("%s:\n got %v\nwant %s", c.name, err, c.want)
			}
			if err != nil && strings.Contains(err.Error(), leak) {
				t.Errorf("%s: error quotes the value: %v", c.name, err)
			}
		}
		if n := lineagetest.Count(t, db, "lineage_assets"); n != 0 {
			t.Errorf("refused manifests wrote %d assets", n)
		}
	})
}

// Kafka Connect: a connector, cluster, topic or table name that breaks the
// rule is refused by its field.
func TestConnectorNamesFollowTheIDRule(t *testing.T) {
	cases := []struct {
		spec    ConnectorSpec
		cluster string
		want    string
	}{
		{ConnectorSpec{Name: "orders\u200b-sink", Class: "JdbcSinkConnector", Platform: "postgres", Topic: "t", Table: "a.b"}, "prod",
			"connectors[0].name " + reason(0x200b, 7)},
		{ConnectorSpec{Name: "x", Class: "JdbcSinkConnector", Platform: "postgres", Topic: leak + "\x1b[1A", Table: "a.b"}, "prod",
			"connectors[0].topic " + reason(0x1b, 8)},
		{ConnectorSpec{Name: "x", Class: "JdbcSinkConnector", Platform: "postgres", Topic: "t", Table: "a.b\r" + leak}, "prod",
			"connectors[0].table " + reason('\r', 4)},
		{ConnectorSpec{Name: "x", Class: "JdbcSinkConnector", Platform: "postgres", Topic: "t", Table: "a.b", Cluster: "pr\u2066od"}, "prod",
			"connectors[0].cluster " + reason(0x2066, 3)},
		{ConnectorSpec{Name: "x", Class: "JdbcSinkConnector", Platform: "postgres", Topic: "t", Table: "a.b"}, "pr\x00od",
			"cluster " + reason(0, 3)},
	}
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		g, _ := newGraph(t, db)
		for i, c := range cases {
			_, err := Connectors(context.Background(), g, []ConnectorSpec{c.spec}, ConnectorOptions{Cluster: c.cluster})
			if err == nil || err.Error() != c.want {
				t.Errorf("case %d:\n got %v\nwant %s", i, err, c.want)
			}
			if err != nil && strings.Contains(err.Error(), leak) {
				t.Errorf("case %d: error quotes the value: %v", i, err)
			}
		}
		if n := lineagetest.Count(t, db, "lineage_assets"); n != 0 {
			t.Errorf("refused connectors wrote %d assets", n)
		}
	})
}
