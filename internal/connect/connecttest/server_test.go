package connecttest

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/dataworkers/dw/internal/connect"
)

// paths lists every key path of a JSON value: "a.b", arrays as "[]" and,
// when mapKeys is set at the top, the top-level keys as "*" (the expanded
// connector list is keyed by connector name).
func paths(v any, prefix string, out map[string]bool) {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			p := prefix + "." + k
			out[p] = true
			paths(e, p, out)
		}
	case []any:
		for _, e := range x {
			paths(e, prefix+"[]", out)
		}
	}
}

func shape(t *testing.T, body []byte, byName bool) map[string]bool {
	t.Helper()
	var v any
	if err := json.Unmarshal(body, &v); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, body)
	}
	out := map[string]bool{}
	if m, ok := v.(map[string]any); ok && byName {
		for _, e := range m {
			paths(e, "*", out)
		}
		return out
	}
	paths(v, "", out)
	return out
}

func fixtureShape(t *testing.T, byName bool, names ...string) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	for _, n := range names {
		b, err := Fixture(n)
		if err != nil {
			t.Fatal(err)
		}
		for p := range shape(t, b, byName) {
			out[p] = true
		}
	}
	return out
}

// sameShape fails when the fake emits a key the captures never show, or
// leaves out one they always show (optional keys excepted).
func sameShape(t *testing.T, what string, got, want map[string]bool, optional ...string) {
	t.Helper()
	var extra, missing []string
	for p := range got {
		if !want[p] {
			extra = append(extra, p)
		}
	}
	for p := range want {
		if !got[p] && !slices.ContainsFunc(optional, func(o string) bool { return strings.HasSuffix(p, o) }) {
			missing = append(missing, p)
		}
	}
	sort.Strings(extra)
	sort.Strings(missing)
	if len(extra)+len(missing) > 0 {
		t.Errorf("%s: keys not in the captures %v; keys the captures have but the fake lacks %v", what, extra, missing)
	}
}

func call(t *testing.T, method, url string, body any) (int, []byte) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, url, rd)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, out
}

// mirror arranges the fake like the captured worker: a Verifiable source
// with a failed, a running and a paused task.
func mirror(t *testing.T) *Server {
	t.Helper()
	s := NewServer()
	t.Cleanup(s.Close)
	if err := s.AddConnector("MyTestConnector", map[string]string{
		"connector.class": "org.apache.kafka.connect.tools.VerifiableSourceConnector", "tasks.max": "3", "topics": "test-topic",
	}, 3); err != nil {
		t.Fatal(err)
	}
	must(t, s.SetTaskState("MyTestConnector", 0, connect.StateFailed, "trace0"))
	must(t, s.SetTaskState("MyTestConnector", 2, connect.StatePaused, ""))
	return s
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestAnswersHaveTheCapturedShapes(t *testing.T) {
	s := mirror(t)
	u := s.URL()

	_, b := call(t, "GET", u+"/connectors?expand=status&expand=info", nil)
	sameShape(t, "expanded list", shape(t, b, true), fixtureShape(t, true, "sourcelab__getConnectorsWithAllExpandedMetadata.json"))
	_, b = call(t, "GET", u+"/connectors?expand=info", nil)
	sameShape(t, "expand=info", shape(t, b, true), fixtureShape(t, true, "sourcelab__getConnectorsWithExpandedInfo.json"))
	_, b = call(t, "GET", u+"/connectors?expand=status", nil)
	sameShape(t, "expand=status", shape(t, b, true), fixtureShape(t, true, "sourcelab__getConnectorsWithExpandedStatus.json"))

	_, b = call(t, "GET", u+"/connectors/MyTestConnector/status", nil)
	sameShape(t, "status", shape(t, b, false),
		fixtureShape(t, false, "sourcelab__getConnectorStatus.json", "jcustenborder__statusConnector.json"), "trace")

	_, b = call(t, "GET", u+"/connectors/MyTestConnector/tasks/0/status", nil)
	sameShape(t, "task status", shape(t, b, false), fixtureShape(t, false, "sourcelab__getConnectorTaskStatus.json"))

	_, b = call(t, "GET", u+"/connector-plugins", nil)
	sameShape(t, "plugins", shape(t, b, false), fixtureShape(t, false, "sourcelab__getConnectorPlugins.json"))

	_, b = call(t, "PUT", u+"/connector-plugins/org.apache.kafka.connect.tools.VerifiableSourceConnector/config/validate",
		map[string]string{"connector.class": "org.apache.kafka.connect.tools.VerifiableSourceConnector", "tasks.max": "3"})
	sameShape(t, "validate", shape(t, b, false),
		fixtureShape(t, false, "sourcelab__putConnectorPluginConfigValidate.json", "jcustenborder__validate.json"))

	code, b := call(t, "GET", u+"/connectors/DoesNotExist/status", nil)
	want, _ := Fixture("sourcelab__errorResourceNotFound.json")
	var gotErr, wantErr any
	json.Unmarshal(b, &gotErr)
	json.Unmarshal(want, &wantErr)
	if code != http.StatusNotFound || !reflect.DeepEqual(gotErr, wantErr) {
		t.Errorf("404: %d %s, want %s", code, b, want)
	}
}

// TestValidateReproducesCapturedAnswers sends the requests behind the two
// captured validate answers and expects those answers back, key for key:
// the fake's rules (required keys, defaults, hidden passwords, group order,
// error count) are Connect's.
func TestValidateReproducesCapturedAnswers(t *testing.T) {
	s := NewServer()
	defer s.Close()
	for _, c := range []struct {
		fixture, plugin string
		config          map[string]string
	}{
		// The request recorded in the jcustenborder envelope.
		{"jcustenborder__validate.json", "io.confluent.connect.activemq.ActiveMQSourceConnector",
			map[string]string{"connector.class": "io.confluent.connect.activemq.ActiveMQSourceConnector", "tasks.max": "1"}},
		// The values echoed in the sourcelab answer.
		{"sourcelab__putConnectorPluginConfigValidate.json", "org.apache.kafka.connect.tools.VerifiableSourceConnector",
			map[string]string{"connector.class": "org.apache.kafka.connect.tools.VerifiableSourceConnector", "tasks.max": "3"}},
	} {
		code, got := call(t, "PUT", s.URL()+"/connector-plugins/"+c.plugin+"/config/validate", c.config)
		want, err := Fixture(c.fixture)
		if err != nil {
			t.Fatal(err)
		}
		var g, w any
		json.Unmarshal(got, &g)
		json.Unmarshal(want, &w)
		if code != http.StatusOK || !reflect.DeepEqual(g, w) {
			t.Errorf("%s: answer differs from the capture\n got %s\nwant %s", c.fixture, got, want)
		}
	}
}

func TestServerRejectsWhatConnectRejects(t *testing.T) {
	s := NewServer()
	defer s.Close()
	if err := s.AddConnector("x", map[string]string{"connector.class": "com.example.Nope"}, 1); err == nil ||
		!strings.Contains(err.Error(), "Failed to find any class that implements Connector and which name matches com.example.Nope") {
		t.Fatalf("unknown plugin: %v", err)
	}
	must(t, s.AddConnector("sink", map[string]string{"connector.class": "FileStreamSink", "topics": "t"}, 1))
	if err := s.AddConnector("sink", map[string]string{"connector.class": "FileStreamSink"}, 1); err == nil {
		t.Fatal("duplicate accepted")
	}
	if err := s.SetTaskState("sink", 3, connect.StateFailed, ""); err == nil {
		t.Fatal("task 3 of 1 accepted")
	}
	if err := s.SetConnectorState("sink", "BROKEN", ""); err == nil || !strings.Contains(err.Error(), "RUNNING, PAUSED") {
		t.Fatalf("bad state: %v", err)
	}
	code, b := call(t, "GET", s.URL()+"/connectors/sink/tasks/9/status", nil)
	if code != http.StatusNotFound || !strings.Contains(string(b), "No status found for task sink-9") {
		t.Fatalf("task 404: %d %s", code, b)
	}
	code, b = call(t, "GET", s.URL()+"/connectors", nil)
	if code != http.StatusOK || strings.TrimSpace(string(b)) != `["sink"]` {
		t.Fatalf("names: %d %s", code, b)
	}
	code, b = call(t, "PUT", s.URL()+"/connector-plugins/com.example.Nope/config/validate", map[string]string{})
	if code != http.StatusBadRequest || !strings.Contains(string(b), `"error_code":400`) {
		t.Fatalf("validate unknown plugin: %d %s", code, b)
	}
}
