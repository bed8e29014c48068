package ingest

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/dataworkers/dw/internal/lineage"
	"github.com/dataworkers/dw/internal/lineage/lineagetest"
	"github.com/dataworkers/dw/internal/store"
	"github.com/dataworkers/dw/internal/store/storetest"
)

func TestRunEventsMarquez(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		g, _ := newGraph(t, db)
		data := fixture(t, "openlineage/marquez__docker_metadata.json")
		opts := OpenLineageOptions{Namespaces: map[string]string{"food_delivery": "postgres"}}
		res, err := RunEvents(ctx, g, data, opts)
		if err != nil {
			t.Fatal(err)
		}
		if res.Events != 26 || res.Imported != 13 || res.WithoutDatasets != 13 || res.Jobs != 13 {
			t.Errorf("events %d imported %d without datasets %d jobs %d", res.Events, res.Imported, res.WithoutDatasets, res.Jobs)
		}
		// 13 datasets plus public.menu_item_id, which only the column
		// lineage of etl_delivery_7_days names.
		if res.Datasets != 14 || lineagetest.Count(t, db, "lineage_assets") != 27 || lineagetest.Count(t, db, "lineage_edges") != 28 {
			t.Errorf("datasets %d, assets %d, edges %d", res.Datasets, lineagetest.Count(t, db, "lineage_assets"), lineagetest.Count(t, db, "lineage_edges"))
		}
		job := mustLineage(t, g, "openlineage://food_delivery/etl_orders_7_days")
		if job.Asset.Kind != lineage.KindJob || !strings.Contains(job.Asset.SQL, "INSERT INTO orders_7_days") {
			t.Errorf("job: %+v", job.Asset)
		}
		// The dataset namespace maps to Postgres, so the table gets a table id.
		cols, ok := edgeCols(t, g, "postgres://public.orders", "openlineage://food_delivery/etl_orders_7_days")
		if !ok || !slices.Contains(cols, lineage.ColumnMapping{From: "id"}) || !slices.Contains(cols, lineage.ColumnMapping{From: "placed_on"}) {
			t.Errorf("orders -> job reads = %v (edge found %v)", cols, ok)
		}
		cols, _ = edgeCols(t, g, "openlineage://food_delivery/etl_orders_7_days", "postgres://public.orders_7_days")
		if !slices.Contains(cols, lineage.ColumnMapping{From: "id", To: "order_id"}) {
			t.Errorf("job -> orders_7_days = %v", cols)
		}
		out := mustLineage(t, g, "postgres://public.orders_7_days")
		if out.Asset.Kind != lineage.KindTable || len(out.Asset.Columns) == 0 || out.Asset.Description == "" {
			t.Errorf("orders_7_days: %+v", out.Asset)
		}
		// Column impact: a change to orders.discount_id reaches orders_7_days
		// through the job, but the drivers table's id does not reach orders_7_days.
		br, err := g.BlastRadius(ctx, lineage.BlastParams{Asset: "postgres://public.orders", Columns: []string{"discount_id"}})
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, a := range br.Assets {
			if a.ID == "postgres://public.orders_7_days" {
				found = slices.Equal(a.AffectedColumns, []string{"discount_id"})
			}
		}
		if !found {
			t.Errorf("orders.discount_id blast radius: %+v", br.Assets)
		}
		before := lineagetest.GraphDump(t, db)
		again, err := RunEvents(ctx, g, data, opts)
		if err != nil || !again.Unchanged || !slices.Equal(before, lineagetest.GraphDump(t, db)) {
			t.Errorf("re-import changed the graph: %+v %v", again, err)
		}
	})
}

func TestRunEventsColumnLineageWithoutJobName(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		g, _ := newGraph(t, db)
		res, err := RunEvents(ctx, g, fixture(t, "openlineage/openlineage__spark__pysparkCLLEnd.json"), OpenLineageOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if res.Jobs != 0 || res.Datasets != 3 || res.ColumnEdges != 2 {
			t.Errorf("jobs %d datasets %d column edges %d", res.Jobs, res.Datasets, res.ColumnEdges)
		}
		cols, ok := edgeCols(t, g, "file:///tmp/cll_test/cll_source1", "file:///tmp/cll_test/tbl1")
		if !ok {
			t.Fatal("no edge cll_source1 -> tbl1")
		}
		for _, want := range []lineage.ColumnMapping{{From: "a", To: "ident"}, {From: "b", To: "trans"}, {From: "b", To: "ident"}} {
			if !slices.Contains(cols, want) {
				t.Errorf("cll_source1 -> tbl1 misses %v: %v", want, cols)
			}
		}
		// source2's c feeds only agg; its a feeds all three output columns.
		br, err := g.BlastRadius(ctx, lineage.BlastParams{Asset: "file:///tmp/cll_test/cll_source2", Columns: []string{"c"}})
		if err != nil {
			t.Fatal(err)
		}
		if br.Total != 1 || !slices.Equal(br.Assets[0].AffectedColumns, []string{"agg"}) || len(br.NoColumnLineage) != 0 {
			t.Errorf("cll_source2.c: %+v", br)
		}
		br, _ = g.BlastRadius(ctx, lineage.BlastParams{Asset: "file:///tmp/cll_test/cll_source2", Columns: []string{"a"}})
		if br.Total != 1 || !slices.Equal(br.Assets[0].AffectedColumns, []string{"agg", "ident", "trans"}) {
			t.Errorf("cll_source2.a: %+v", br)
		}
	})
}

func TestRunEventsAirflowAndSpark(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		g, _ := newGraph(t, db)
		if _, err := RunEvents(ctx, g, fixture(t, "openlineage/compat-tests__airflow__line_03.json"), OpenLineageOptions{}); err != nil {
			t.Fatal(err)
		}
		task := mustLineage(t, g, "airflow://task/BQ.upload")
		if task.Asset.Kind != lineage.KindOrchestratorJob || len(task.Upstream) != 2 || len(task.Downstream) != 1 {
			t.Fatalf("task: %+v up %v down %v", task.Asset, neighborIDs(task.Upstream), neighborIDs(task.Downstream))
		}
		if task.Downstream[0].Asset.ID != "bigquery://mock-project.test.upload" || task.Downstream[0].Asset.Kind != lineage.KindTable {
			t.Errorf("output %+v", task.Downstream[0].Asset)
		}
		if cols := task.Downstream[0].Edge.Columns; !slices.Contains(cols, lineage.ColumnMapping{From: "c", To: "c"}) {
			t.Errorf("task -> table columns %v", cols)
		}
		if cols := task.Upstream[0].Edge.Columns; len(cols) != 4 {
			t.Errorf("reads fields of %s: %v", task.Upstream[0].Asset.ID, cols)
		}
		// The same job is reachable by its OpenLineage namespace and name.
		if id, err := g.Resolve(ctx, "openlineage://airflow/BQ.upload"); err != nil || id != "airflow://task/BQ.upload" {
			t.Errorf("resolve by namespace/name: %s %v", id, err)
		}

		if _, err := RunEvents(ctx, g, fixture(t, "openlineage/compat-tests__spark_dataproc_bigquery_shakespare__1729097631761.json"), OpenLineageOptions{}); err != nil {
			t.Fatal(err)
		}
		sp := mustLineage(t, g, "bigquery://bigquery-public-data.samples.shakespeare")
		if len(sp.Downstream) != 1 || sp.Downstream[0].Asset.Platform != "spark" {
			t.Errorf("shakespeare downstream %+v", sp.Downstream)
		}
	})
}

func TestRunEventsKafkaAndPlaceholders(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		g, _ := newGraph(t, db)
		opts := OpenLineageOptions{KafkaClusters: map[string]string{"kafka-cluster-prod:9092": "prod"}}
		for _, f := range []string{"openlineage__flink1__expected_kafka.json", "openlineage__flink2__expected_sql_kafka.json",
			"openlineage__spark__pysparkKafkaWriteCompleteEvent.json", "openlineage__spark__pysparkKafkaReadCompleteEvent.json"} {
			if _, err := RunEvents(ctx, g, fixture(t, "openlineage/"+f), opts); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
		}
		job := mustLineage(t, g, "flink://flink_examples_stateful")
		if job.Asset.Kind != lineage.KindStreamJob {
			t.Errorf("flink job kind %s", job.Asset.Kind)
		}
		if got := neighborIDs(job.Upstream); !slices.Equal(got, []string{"kafka://prod/io.openlineage.flink.kafka.input1", "kafka://prod/io.openlineage.flink.kafka.input2"}) {
			t.Errorf("flink inputs %v", got)
		}
		in1 := mustLineage(t, g, "kafka://prod/io.openlineage.flink.kafka.input1")
		if in1.Asset.Kind != lineage.KindTopic || len(in1.Downstream) != 2 {
			t.Errorf("input1 %+v downstream %v", in1.Asset, neighborIDs(in1.Downstream))
		}
		// Spark wrote topic1, Spark read it back.
		tr, err := g.Trace(ctx, lineage.TraceParams{Asset: "kafka://prod/topic1"})
		if err != nil {
			t.Fatal(err)
		}
		if len(tr.Nodes) != 3 {
			t.Errorf("topic1 trace %+v", tr.Nodes)
		}
	})
}

func TestRunEventsDBTIntegration(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		g, _ := newGraph(t, db)
		res, err := RunEvents(ctx, g, fixture(t, "openlineage/openlineage__dbt__postgres__successful_run_ol_events.json"), OpenLineageOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if res.Events != 72 {
			t.Errorf("events %d", res.Events)
		}
		// Each model run and the relation it writes are one asset.
		if n := lineagetest.Count(t, db, "lineage_assets"); n != 8 {
			t.Errorf("assets %d, want 3 raw tables + 5 models", n)
		}
		if n := lineagetest.Count(t, db, "lineage_edges"); n != 8 {
			t.Errorf("edges %d, want 8", n)
		}
		id, err := g.Resolve(ctx, "postgres://postgres.public.stg_customers")
		if err != nil || id != "dbt://model.jaffle_shop.stg_customers" {
			t.Errorf("relation resolves to %s, %v", id, err)
		}
		c := mustLineage(t, g, "dbt://model.jaffle_shop.customers")
		if c.Asset.Kind != lineage.KindDBTModel || c.Asset.Platform != "postgres" || len(c.Upstream) != 3 {
			t.Errorf("customers %+v upstream %v", c.Asset, neighborIDs(c.Upstream))
		}
	})
}

func TestRunEventsEveryFixture(t *testing.T) {
	files, err := filepath.Glob("testdata/openlineage/*.json")
	if err != nil || len(files) != 13 {
		t.Fatalf("fixtures: %v %d", err, len(files))
	}
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		g, _ := newGraph(t, db)
		for _, f := range files {
			data, _ := os.ReadFile(f)
			if _, err := RunEvents(context.Background(), g, data, OpenLineageOptions{}); err != nil {
				t.Errorf("%s: %v", filepath.Base(f), err)
			}
		}
	})
}

func TestRunEventsRejectsBadInput(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		g, _ := newGraph(t, db)
		for doc, want := range map[string]string{
			"":   "empty",
			"42": "must be a JSON object",
			`[{"job": {"namespace": "a", "name": "b"}, "inputs": [{"namespace": "", "name": "x"}]}]`:                     "inputs[0]",
			`{"job": {"namespace": "a", "name": "b"}, "outputs": [{"namespace": "postgres://h:5432", "name": "db..t"}]}`: "empty part",
			`{"job": "x"}`: "job",
		} {
			_, err := RunEvents(context.Background(), g, []byte(doc), OpenLineageOptions{})
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("%q: error %v, want mention of %q", doc, err, want)
			}
		}
		// With validation on, an event missing producer is refused before anything is written.
		_, err := RunEvents(context.Background(), g, fixture(t, "openlineage/openlineage__spark__openlineage-event.json"), OpenLineageOptions{Validate: true})
		if err == nil || !strings.Contains(err.Error(), "producer") {
			t.Errorf("validate: %v", err)
		}
		if n := lineagetest.Count(t, db, "lineage_assets"); n != 0 {
			t.Errorf("bad input wrote %d assets", n)
		}
	})
}

func TestValidateRunEvent(t *testing.T) {
	for _, f := range []string{"compat-tests__airflow__line_03.json", "compat-tests__spark_dataproc_bigquery_shakespare__1729097631761.json",
		"openlineage__client-python__example_full_event.json", "openlineage__proxy-fluentd__event_full.json"} {
		if err := ValidateRunEvent(fixture(t, "openlineage/"+f)); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
	err := ValidateRunEvent(fixture(t, "openlineage/openlineage__flink1__expected_kafka.json"))
	var ve *ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("placeholder event passed validation: %v", err)
	}
	var fields []string
	for _, p := range ve.Problems {
		fields = append(fields, p.Field)
	}
	for _, want := range []string{"eventTime", "producer", "schemaURL", "run.runId"} {
		if !slices.Contains(fields, want) {
			t.Errorf("flink expected event: problems %v miss %s", fields, want)
		}
	}
	bad := map[string]any{
		"eventType": "DONE", "eventTime": "yesterday", "producer": "not a uri", "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
		"run": map[string]any{"runId": "abc"}, "job": map[string]any{"namespace": "ns"},
		"inputs": []any{map[string]any{"namespace": "bigquery"}},
	}
	raw, _ := json.Marshal(bad)
	err = ValidateRunEvent(raw)
	if !errors.As(err, &ve) {
		t.Fatalf("bad event passed: %v", err)
	}
	got := map[string]string{}
	for _, p := range ve.Problems {
		got[p.Field] = p.Message
	}
	want := map[string]string{
		"eventType": "must be one of START, RUNNING, COMPLETE, ABORT, FAIL, OTHER, found a string of 4 characters",
		"eventTime": "must be an ISO-8601 date-time with offset (e.g. 2024-11-26T13:05:29.606Z), found a string of 9 characters",
		"producer":  "must be a URI with a scheme (e.g. https://github.com/org/repo), found a string of 9 characters",
		"run.runId": "must be a UUID (e.g. 0192963f-f6f8-71c0-8380-500bc70883ee), found a string of 3 characters",
		"job.name":  "is required", "inputs[0].name": "is required",
	}
	if !maps.Equal(got, want) {
		t.Errorf("problems %v\nwant %v", got, want)
	}
	// The values themselves are never quoted back.
	for _, v := range []string{"DONE", "yesterday", "not a uri", "abc"} {
		if strings.Contains(err.Error(), v) {
			t.Errorf("error quotes the value %q: %v", v, err)
		}
	}
}

// A document that is not OpenLineage is refused, not "read" as an event
// that names nothing; a batch records its valid events and lists the
// others by position with what is wrong, in the answer, bounded.
func TestImportRunEventsRefusesWhatIsNotARunEvent(t *testing.T) {
	const credentials = `{"type": "service_account", "project_id": "acme", "private_key": "-----BEGIN PRIVATE KEY----- hunter2", "client_email": "svc@acme.iam"}`
	const good = `{"eventType": "COMPLETE", "job": {"namespace": "etl", "name": "load_daily"},
		"inputs": [{"namespace": "postgres://db:5432", "name": "shop.public.orders"}],
		"outputs": [{"namespace": "postgres://db:5432", "name": "shop.public.daily"}]}`
	const noDatasets = `{"eventType": "START", "job": {"namespace": "etl", "name": "load_daily"}}`
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		g, _ := newGraph(t, db)

		// Refused whole: nothing is a RunEvent.
		for name, c := range map[string]struct {
			doc     string
			events  int
			invalid []InvalidEvent
		}{
			"credentials file": {credentials, 1, []InvalidEvent{{0, []FieldError{{"(event)", notRunEvent}}}}},
			"credentials, one per line": {credentials + "\n" + `{"api_key": "hunter2"}`, 2,
				[]InvalidEvent{{0, []FieldError{{"(event)", notRunEvent}}}, {1, []FieldError{{"(event)", notRunEvent}}}}},
			"array of strings": {`["hunter2"]`, 1,
				[]InvalidEvent{{0, []FieldError{{"(event)", "must be a JSON object (an OpenLineage RunEvent), found a string"}}}}},
			"empty array": {`[]`, 0, nil},
			"job a string": {`{"job": "hunter2", "inputs": []}`, 1,
				[]InvalidEvent{{0, []FieldError{{"job", "must be an object with namespace and name, found a string"}}}}},
		} {
			_, err := RunEvents(ctx, g, []byte(c.doc), OpenLineageOptions{})
			var nre *NoRunEventError
			if !errors.As(err, &nre) {
				t.Errorf("%s: %v, want a NoRunEventError", name, err)
				continue
			}
			if nre.Events != c.events || !reflect.DeepEqual(nre.Invalid, c.invalid) {
				t.Errorf("%s: refused %d events %+v, want %d %+v", name, nre.Events, nre.Invalid, c.events, c.invalid)
			}
			if strings.Contains(err.Error(), "hunter2") || goTypeRE.MatchString(err.Error()) {
				t.Errorf("%s: error quotes the file or names a Go type: %v", name, err)
			}
		}
		if n := lineagetest.Count(t, db, "lineage_assets"); n != 0 {
			t.Fatalf("refused documents wrote %d assets", n)
		}

		// Mixed: the valid events are recorded, the others listed.
		mixed := "[" + strings.Join([]string{
			good,
			credentials,
			`{"job": {"namespace": "a", "name": "b"}, "inputs": [{"namespace": "", "name": "x"}]}`,
			`"hunter2"`,
			`{"job": {"namespace": "a", "name": "b"}, "inputs": [{"namespace": 5, "name": "x"}]}`,
			noDatasets,
			`{"job": {"namespace": "a", "name": "b"}, "outputs": [{"namespace": "postgres://h:5432", "name": "db..hunter2"}]}`,
		}, ",") + "]"
		res, err := RunEvents(ctx, g, []byte(mixed), OpenLineageOptions{})
		if err != nil {
			t.Fatal(err)
		}
		wantInvalid := []InvalidEvent{
			{1, []FieldError{{"(event)", notRunEvent}}},
			{2, []FieldError{{"inputs[0]", `namespace and name are both required (a stand-in like ${json-unit.any-string} counts as absent); found namespace (empty), name "x"`}}},
			{3, []FieldError{{"(event)", "must be a JSON object (an OpenLineage RunEvent), found a string"}}},
			{4, []FieldError{{"inputs.namespace", "must be a string, found a number"}}},
			{6, []FieldError{{"outputs[0]", `not a postgres table name: table name "db..hunter2" has an empty part`}}},
		}
		if res.Events != 7 || res.Imported != 1 || res.WithoutDatasets != 1 || res.InvalidCount != 5 || !reflect.DeepEqual(res.Invalid, wantInvalid) {
			t.Fatalf("mixed batch: events %d imported %d without datasets %d invalid %d %+v",
				res.Events, res.Imported, res.WithoutDatasets, res.InvalidCount, res.Invalid)
		}
		job := mustLineage(t, g, "openlineage://etl/load_daily")
		if !slices.Equal(neighborIDs(job.Upstream), []string{"postgres://shop.public.orders"}) ||
			!slices.Equal(neighborIDs(job.Downstream), []string{"postgres://shop.public.daily"}) {
			t.Errorf("recorded job %v -> %v", neighborIDs(job.Upstream), neighborIDs(job.Downstream))
		}
		if n := lineagetest.Count(t, db, "lineage_assets"); n != 3 {
			t.Errorf("mixed batch recorded %d assets, want the valid event's 3", n)
		}

		// The list is bounded; the count is not.
		many := make([]string, 0, 101)
		for range 100 {
			many = append(many, credentials)
		}
		many = append(many, good)
		res, err = RunEvents(ctx, g, []byte("["+strings.Join(many, ",")+"]"), OpenLineageOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if res.InvalidCount != 100 || len(res.Invalid) != maxInvalidListed || res.Invalid[maxInvalidListed-1].Index != maxInvalidListed-1 {
			t.Errorf("100 invalid: count %d, listed %d", res.InvalidCount, len(res.Invalid))
		}

		// With validate on, one invalid event refuses the whole batch.
		before := lineagetest.Count(t, db, "lineage_assets")
		strict := strings.ReplaceAll(good, "load_daily", "strict_job")
		if _, err := RunEvents(ctx, g, []byte("["+strict+","+credentials+"]"), OpenLineageOptions{Validate: true}); err == nil {
			t.Error("validate: a batch with an invalid event was recorded")
		} else if strings.Contains(err.Error(), "hunter2") || goTypeRE.MatchString(err.Error()) {
			t.Errorf("validate: %v", err)
		}
		if n := lineagetest.Count(t, db, "lineage_assets"); n != before {
			t.Errorf("a refused strict batch wrote %d assets", n-before)
		}
	})
}

// ValidateRunEvent lists at most maxEventProblems problems, then says how
// many more there were.
func TestValidateRunEventBoundsItsProblems(t *testing.T) {
	ds := make([]any, 50)
	for i := range ds {
		ds[i] = map[string]any{"namespace": []any{"hunter2"}}
	}
	raw, _ := json.Marshal(map[string]any{"inputs": ds})
	var ve *ValidationError
	if err := ValidateRunEvent(raw); !errors.As(err, &ve) {
		t.Fatalf("%v", err)
	}
	if len(ve.Problems) != maxEventProblems+1 {
		t.Fatalf("%d problems listed", len(ve.Problems))
	}
	// eventTime, producer, schemaURL, run, job, then each dataset's namespace and name.
	if last := ve.Problems[maxEventProblems]; last != (FieldError{"(event)", "and 95 more problems"}) {
		t.Errorf("last problem %+v", last)
	}
	if ve.Problems[5] != (FieldError{"inputs[0].namespace", "must be a string, found an array"}) {
		t.Errorf("problem 5 %+v", ve.Problems[5])
	}
	if err := ValidateRunEvent([]byte(`["hunter2"]`)); !errors.As(err, &ve) ||
		!reflect.DeepEqual(ve.Problems, []FieldError{{"(event)", "must be a JSON object (an OpenLineage RunEvent), found an array"}}) {
		t.Errorf("array: %v", err)
	}
}
