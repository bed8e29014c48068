package flinktest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/dataworkers/dw/internal/flink"
)

// snapshot is Flink's REST compatibility snapshot: per endpoint, the JSON
// schema of the response.
type snapshot struct {
	calls map[string]map[string]any // "GET /jobs/:jobid/checkpoints" -> response schema
	ids   map[string]map[string]any // schema id -> schema, for $ref
}

func loadSnapshot(t *testing.T) *snapshot {
	t.Helper()
	raw, err := os.ReadFile("testdata/flink__rest_api_v1.snapshot.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Calls []struct {
			URL      string         `json:"url"`
			Method   string         `json:"method"`
			Response map[string]any `json:"response"`
		} `json:"calls"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	s := &snapshot{calls: map[string]map[string]any{}, ids: map[string]map[string]any{}}
	var collect func(v any)
	collect = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			if id, ok := x["id"].(string); ok && x["type"] != nil {
				s.ids[id] = x
			}
			for _, e := range x {
				collect(e)
			}
		case []any:
			for _, e := range x {
				collect(e)
			}
		}
	}
	for _, c := range doc.Calls {
		s.calls[c.Method+" "+c.URL] = c.Response
		collect(c.Response)
	}
	return s
}

// checker walks a JSON value against a schema, recording every property
// path it saw so coverage can be judged afterwards.
type checker struct {
	s    *snapshot
	errs []string
	seen map[string]bool
}

// classIDs are the schemas whose instances carry the @class discriminator:
// Flink writes it on every checkpoint statistics object.
var classIDs = []string{
	"urn:jsonschema:org:apache:flink:runtime:rest:messages:checkpoints:CheckpointStatistics",
	"urn:jsonschema:org:apache:flink:runtime:rest:messages:checkpoints:CheckpointStatistics:CompletedCheckpointStatistics",
	"urn:jsonschema:org:apache:flink:runtime:rest:messages:checkpoints:CheckpointStatistics:FailedCheckpointStatistics",
}

var subtypes = map[string]string{
	flink.ClassCompleted: classIDs[1],
	flink.ClassFailed:    classIDs[2],
}

func (c *checker) check(path string, schema map[string]any, v any) {
	if ref, ok := schema["$ref"].(string); ok {
		target, found := c.s.ids[ref]
		if !found {
			c.errs = append(c.errs, path+": unresolved $ref "+ref)
			return
		}
		schema = target
	}
	if v == nil {
		return // Flink writes absent optional members as null
	}
	switch schema["type"] {
	case "object":
		obj, ok := v.(map[string]any)
		if !ok {
			c.errs = append(c.errs, fmt.Sprintf("%s: want object, got %T", path, v))
			return
		}
		id, _ := schema["id"].(string)
		// The discriminator picks the subtype's schema, as the mapping in
		// Flink's OpenAPI file (className: completed, failed, in_progress)
		// says; the snapshot itself lists history items by their base type.
		if cls, ok := obj["@class"].(string); ok && slices.Contains(classIDs, id) {
			if sub, ok := c.s.ids[subtypes[cls]]; ok {
				schema = sub
			}
		}
		props, _ := schema["properties"].(map[string]any)
		addl, _ := schema["additionalProperties"].(map[string]any)
		for k, e := range obj {
			p := path + "." + k
			if k == "@class" && slices.Contains(classIDs, id) {
				if cls, _ := e.(string); !slices.Contains([]string{flink.ClassCompleted, flink.ClassFailed, flink.ClassInProgress}, cls) {
					c.errs = append(c.errs, p+": unknown @class "+fmt.Sprint(e))
				}
				continue
			}
			if ps, ok := props[k].(map[string]any); ok {
				c.seen[p] = true
				c.check(p, ps, e)
				continue
			}
			if addl != nil {
				c.check(path+".*", addl, e)
				continue
			}
			c.errs = append(c.errs, p+": not in Flink's schema")
		}
	case "array":
		arr, ok := v.([]any)
		if !ok {
			c.errs = append(c.errs, fmt.Sprintf("%s: want array, got %T", path, v))
			return
		}
		items, _ := schema["items"].(map[string]any)
		for _, e := range arr {
			c.check(path+"[]", items, e)
		}
	case "integer":
		n, ok := v.(json.Number)
		if _, err := n.Int64(); !ok || err != nil {
			c.errs = append(c.errs, fmt.Sprintf("%s: want integer, got %v", path, v))
		}
	case "number":
		if _, ok := v.(json.Number); !ok {
			c.errs = append(c.errs, fmt.Sprintf("%s: want number, got %v", path, v))
		}
	case "boolean":
		if _, ok := v.(bool); !ok {
			c.errs = append(c.errs, fmt.Sprintf("%s: want boolean, got %v", path, v))
		}
	case "string":
		str, ok := v.(string)
		if !ok {
			c.errs = append(c.errs, fmt.Sprintf("%s: want string, got %v", path, v))
			return
		}
		if enum, ok := schema["enum"].([]any); ok && !slices.Contains(enum, any(str)) {
			c.errs = append(c.errs, fmt.Sprintf("%s: %q is not one of %v", path, str, enum))
		}
	case "any":
	default:
		c.errs = append(c.errs, fmt.Sprintf("%s: schema type %v not understood", path, schema["type"]))
	}
}

// declared lists every property path a schema declares.
func (s *snapshot) declared(path string, schema map[string]any, out map[string]bool, depth int) {
	if depth > 8 {
		return
	}
	if ref, ok := schema["$ref"].(string); ok {
		schema = s.ids[ref]
	}
	switch schema["type"] {
	case "object":
		props, _ := schema["properties"].(map[string]any)
		for k, ps := range props {
			out[path+"."+k] = true
			s.declared(path+"."+k, ps.(map[string]any), out, depth+1)
		}
	case "array":
		s.declared(path+"[]", schema["items"].(map[string]any), out, depth+1)
	}
}

func get(t *testing.T, url string) any {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %s", url, resp.StatusCode, b)
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

// populated is a JobManager whose answers use every member the schemas
// declare: completed, failed, in-progress and savepoint checkpoints, a
// restore, and task and job-level failures.
func populated(t *testing.T) (*Server, string) {
	t.Helper()
	s := NewServer()
	t.Cleanup(s.Close)
	at := time.Date(2026, 3, 3, 14, 0, 0, 0, time.UTC)
	id, err := s.AddJob(Job{Name: "points-balance", Start: at.Add(2 * time.Minute), Tasks: 4})
	must(t, err)
	_, err = s.AddCheckpoint(id, Checkpoint{ID: 41, Savepoint: true, Trigger: at, Duration: 3 * time.Second, Size: 9 << 20, ExternalPath: "s3://flink/savepoints/savepoint-6c2f9a-0b1d2e3f4a5b"})
	must(t, err)
	for i := 0; i < 12; i++ {
		_, err = s.AddCheckpoint(id, Checkpoint{Trigger: at.Add(time.Duration(3+i) * time.Minute), Duration: time.Duration(800+50*i) * time.Millisecond,
			Size: int64(1<<20 + i*4096), ExternalPath: fmt.Sprintf("s3://flink/checkpoints/%s/chk-%d", id, 42+i)})
		must(t, err)
	}
	_, err = s.AddCheckpoint(id, Checkpoint{Status: flink.StatusFailed, Trigger: at.Add(16 * time.Minute), Duration: time.Minute, FailureMessage: "Checkpoint expired before completing."})
	must(t, err)
	_, err = s.AddCheckpoint(id, Checkpoint{Status: flink.StatusInProgress, Trigger: at.Add(17 * time.Minute)})
	must(t, err)
	must(t, s.Restore(id, 41, at.Add(2*time.Minute), true, "s3://flink/savepoints/savepoint-6c2f9a-0b1d2e3f4a5b"))
	must(t, s.AddException(id, flink.RootExceptionInfo{
		ExceptionInfo: flink.ExceptionInfo{ExceptionName: "org.apache.flink.util.FlinkException", Stacktrace: "org.apache.flink.util.FlinkException: Global failure triggered\n\tat ...",
			Timestamp: at.Add(90 * time.Second).UnixMilli(), FailureLabels: map[string]string{"type": "SYSTEM"}},
	}))
	must(t, s.AddException(id, flink.RootExceptionInfo{
		ExceptionInfo: flink.ExceptionInfo{ExceptionName: "java.lang.RuntimeException", Stacktrace: "java.lang.RuntimeException: sink write failed\n\tat ...",
			Timestamp: at.Add(10 * time.Minute).UnixMilli(), TaskName: "Sink: member-balances (1/4)", Endpoint: "10.0.3.17:36211", TaskManagerID: "10.0.3.17:36211-b8a2c4"},
		ConcurrentExceptions: []flink.ExceptionInfo{{ExceptionName: "java.io.IOException", Stacktrace: "java.io.IOException: broken pipe",
			Timestamp: at.Add(10 * time.Minute).UnixMilli(), TaskName: "Sink: member-balances (2/4)", Endpoint: "10.0.3.18:36211", TaskManagerID: "10.0.3.18:36211-1f7e33",
			FailureLabels: map[string]string{}}},
	}))
	return s, id
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestAnswersFollowFlinksSchema checks every answer against the snapshot:
// no member the schema lacks, every type and enum right, and every member
// the schema declares present somewhere (so nothing is silently dropped).
func TestAnswersFollowFlinksSchema(t *testing.T) {
	snap := loadSnapshot(t)
	s, id := populated(t)
	for _, c := range []struct {
		call, path string
		optional   []string // declared members the fake has no data for
	}{
		{"GET /jobs", "/jobs", nil},
		{"GET /jobs/overview", "/jobs/overview", nil},
		{"GET /jobs/:jobid/checkpoints", "/jobs/" + id + "/checkpoints", []string{
			// Per-vertex statistics need a job graph the fake does not model.
			".latest.completed.tasks.", ".latest.savepoint.tasks.", ".latest.failed.tasks.", ".history[].tasks."}},
		{"GET /jobs/:jobid/exceptions", "/jobs/" + id + "/exceptions", nil},
	} {
		t.Run(c.call, func(t *testing.T) {
			schema, ok := snap.calls[c.call]
			if !ok {
				t.Fatalf("%s is not in the snapshot", c.call)
			}
			ck := &checker{s: snap, seen: map[string]bool{}}
			ck.check("", schema, get(t, s.URL()+c.path))
			if len(ck.errs) > 0 {
				t.Fatalf("answer breaks the schema:\n%s", strings.Join(ck.errs, "\n"))
			}
			want := map[string]bool{}
			snap.declared("", schema, want, 0)
			var missing []string
			for p := range want {
				skip := false
				for _, o := range c.optional {
					skip = skip || strings.HasPrefix(p, o)
				}
				if !ck.seen[p] && !skip {
					missing = append(missing, p)
				}
			}
			sort.Strings(missing)
			if len(missing) > 0 {
				t.Fatalf("members the schema declares but the answer never has: %v", missing)
			}
		})
	}
}

func TestCheckpointAnswer(t *testing.T) {
	s, id := populated(t)
	var cs flink.CheckpointingStatistics
	resp, err := http.Get(s.URL() + "/jobs/" + id + "/checkpoints")
	must(t, err)
	defer resp.Body.Close()
	must(t, json.NewDecoder(resp.Body).Decode(&cs))
	if cs.Counts != (flink.Counts{Restored: 1, Total: 15, InProgress: 1, Completed: 13, Failed: 1}) {
		t.Fatalf("counts %+v", cs.Counts)
	}
	if len(cs.History) != HistorySize || cs.History[0].Class != flink.ClassInProgress || cs.History[1].Class != flink.ClassFailed ||
		cs.History[2].ID != 53 || *cs.History[2].ExternalPath != "s3://flink/checkpoints/"+id+"/chk-53" {
		t.Fatalf("history newest first: %+v", cs.History[:3])
	}
	if cs.Latest.Completed.ID != 53 || cs.Latest.Savepoint.ID != 41 || cs.Latest.Savepoint.CheckpointType != flink.TypeSavepoint ||
		*cs.Latest.Failed.FailureMessage != "Checkpoint expired before completing." || cs.Latest.Restored.ID != 41 || !cs.Latest.Restored.IsSavepoint {
		t.Fatalf("latest %+v", cs.Latest)
	}
	sum := cs.Summary.EndToEndDuration
	if sum.Min != 800 || sum.Max != 3000 || sum.P50 != 1100 {
		t.Fatalf("duration summary %+v", sum)
	}
}
