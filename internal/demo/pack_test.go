package demo

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/hamba/avro/v2"
)

var update = flag.Bool("update", false, "rewrite testdata/scenarios/<pack>/ from the generator")

const scenariosDir = "../../testdata/scenarios"

// TestPackFilesUpToDate keeps the committed files equal to the generator's
// output. Run `go test ./internal/demo -run PackFiles -update` (or
// `go run ./internal/demo/gen`) after changing the generator.
func TestPackFilesUpToDate(t *testing.T) {
	for _, pack := range Packs() {
		if *update {
			if err := WritePackFiles(scenariosDir, pack); err != nil {
				t.Fatal(err)
			}
		}
		files, err := PackFiles(pack)
		if err != nil {
			t.Fatal(err)
		}
		for name, want := range files {
			got, err := os.ReadFile(filepath.Join(scenariosDir, pack, filepath.FromSlash(name)))
			if err != nil {
				t.Errorf("%s/%s: %v (run go run ./internal/demo/gen)", pack, name, err)
				continue
			}
			if !bytes.Equal(got, want) {
				t.Errorf("%s/%s is stale: run go run ./internal/demo/gen", pack, name)
			}
		}
	}
}

func TestPackFilesUnknownPack(t *testing.T) {
	if _, err := PackFiles("loyality"); err == nil || !strings.Contains(err.Error(), "closest: loyalty") {
		t.Fatalf("want a closest-name error, got %v", err)
	}
}

func readPacks(t *testing.T, tl Instants) map[string]*Pack {
	t.Helper()
	out := map[string]*Pack{}
	for _, name := range Packs() {
		p, err := ReadPack(filepath.Join(scenariosDir, name), tl)
		if err != nil {
			t.Fatal(err)
		}
		out[name] = p
	}
	return out
}

func TestReadPackMovesTimesToTheTimeline(t *testing.T) {
	tl := Timeline(storyNow)
	packs := readPacks(t, tl)
	b, l := packs["billing"], packs["loyalty"]

	at := map[string]time.Time{}
	for _, c := range append(append([]Change(nil), b.Changes...), l.Changes...) {
		at[c.ID] = c.At
	}
	if !at["billing-chg-4"].Equal(tl.SchemaV12) || !at["billing-chg-5"].Equal(tl.GatewayDeploy) ||
		!at["billing-chg-3"].Equal(tl.DashboardChange) || !at["billing-chg-2"].Equal(tl.PrevDayDBTDeploy) {
		t.Errorf("billing change times not on the timeline: %v", at)
	}
	if !at["loyalty-chg-4"].Equal(tl.ReleaseV42) || !at["loyalty-chg-5"].Equal(tl.Restore) {
		t.Errorf("loyalty change times not on the timeline: %v", at)
	}
	if last := b.Changes[len(b.Changes)-1]; last.ID != "billing-chg-5" {
		t.Errorf("changes not oldest first: last is %s", last.ID)
	}
	restore := l.Changes[len(l.Changes)-1]
	if restore.Kind != "restore" || restore.Details["state_skipped"] != true || restore.Details["allowNonRestoredState"] != true {
		t.Errorf("restore change: %+v", restore)
	}
	deploy := b.Changes[len(b.Changes)-1]
	if end, _ := time.Parse(time.RFC3339, deploy.Details["completed_at"].(string)); !end.Equal(tl.GatewayDeployEnd) {
		t.Errorf("deploy completed_at %v, want %s", deploy.Details["completed_at"], tl.GatewayDeployEnd)
	}

	var manifest struct {
		Metadata struct {
			Version     string    `json:"dbt_schema_version"`
			GeneratedAt time.Time `json:"generated_at"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(b.Manifest, &manifest); err != nil {
		t.Fatal(err)
	}
	if manifest.Metadata.Version != "https://schemas.getdbt.com/dbt/manifest/v12.json" ||
		manifest.Metadata.GeneratedAt.Truncate(time.Minute) != tl.DBTBuild {
		t.Errorf("manifest metadata %+v", manifest.Metadata)
	}
	var ev struct {
		EventTime time.Time `json:"eventTime"`
	}
	if err := json.Unmarshal(l.LineageEvents[2], &ev); err != nil {
		t.Fatal(err)
	}
	if ev.EventTime.Truncate(time.Minute) != tl.Restore {
		t.Errorf("v4.2 START at %s, want %s", ev.EventTime, tl.Restore)
	}
	v12 := b.Subjects[0].Versions[1]
	if v12.Version != 12 || !v12.RegisteredAt.Equal(tl.SchemaV12) || !strings.Contains(v12.Schema, "response_kib") {
		t.Errorf("subject version 12: %+v", v12)
	}
}

// TestPackReferencesResolve checks every name a pack file uses is defined:
// owners and actors are people, edge ends and change assets are assets,
// dbt nodes depend on nodes that exist.
func TestPackReferencesResolve(t *testing.T) {
	for name, p := range readPacks(t, Timeline(storyNow)) {
		people := map[string]bool{}
		emails := map[string]bool{}
		for _, person := range p.People {
			people[person.ID] = true
			emails[person.Email] = true
		}
		var m struct {
			Nodes     map[string]json.RawMessage `json:"nodes"`
			Sources   map[string]json.RawMessage `json:"sources"`
			Exposures map[string]struct {
				Owner struct {
					Email string `json:"email"`
				} `json:"owner"`
				DependsOn struct {
					Nodes []string `json:"nodes"`
				} `json:"depends_on"`
			} `json:"exposures"`
			ParentMap map[string][]string `json:"parent_map"`
			ChildMap  map[string][]string `json:"child_map"`
		}
		if err := json.Unmarshal(p.Manifest, &m); err != nil {
			t.Fatal(err)
		}
		known := map[string]bool{}
		for id := range m.Nodes {
			known[id] = true
		}
		for id := range m.Sources {
			known[id] = true
		}
		for id, e := range m.Exposures {
			known[id] = true
			if !emails[e.Owner.Email] {
				t.Errorf("%s: exposure %s owner %s is not in people.yaml", name, id, e.Owner.Email)
			}
		}
		for id, parents := range m.ParentMap {
			if !known[id] {
				t.Errorf("%s: parent_map has unknown %s", name, id)
			}
			for _, par := range parents {
				if !known[par] {
					t.Errorf("%s: %s depends on unknown %s", name, id, par)
				}
				if !contains(m.ChildMap[par], id) {
					t.Errorf("%s: child_map[%s] misses %s", name, par, id)
				}
			}
		}
		if len(m.ParentMap) != len(known) || len(m.ChildMap) != len(known) {
			t.Errorf("%s: %d nodes, parent_map %d, child_map %d", name, len(known), len(m.ParentMap), len(m.ChildMap))
		}

		assets := map[string]bool{}
		for _, a := range p.Notes.Assets {
			assets[a.ID] = true
			if a.Owner != "" && !people[a.Owner] {
				t.Errorf("%s: asset %s owner %q is not in people.yaml", name, a.ID, a.Owner)
			}
		}
		isAsset := func(id string) bool {
			return assets[id] || (strings.HasPrefix(id, "dbt://") && known[strings.TrimPrefix(id, "dbt://")])
		}
		for _, e := range p.Notes.Edges {
			if !isAsset(e.From) || !isAsset(e.To) {
				t.Errorf("%s: edge %s -> %s has an unknown end", name, e.From, e.To)
			}
		}
		for _, c := range p.Changes {
			if !people[c.Actor] {
				t.Errorf("%s: change %s actor %q is not in people.yaml", name, c.ID, c.Actor)
			}
			for _, a := range c.Assets {
				if !isAsset(a) {
					t.Errorf("%s: change %s touches unknown asset %s", name, c.ID, a)
				}
			}
		}
		for _, d := range p.Domains {
			if len(d.Owners) == 0 || len(d.Assets) == 0 {
				t.Errorf("%s: domain %s has no owners or assets", name, d.Name)
			}
		}
	}
}

func contains(s []string, v string) bool {
	for _, e := range s {
		if e == v {
			return true
		}
	}
	return false
}

func TestBillingStoryLineage(t *testing.T) {
	p := readPacks(t, Timeline(storyNow))["billing"]
	var rollup *NoteAsset
	for i := range p.Notes.Assets {
		if p.Notes.Assets[i].ID == assetRollup {
			rollup = &p.Notes.Assets[i]
		}
	}
	if rollup == nil || !strings.Contains(rollup.SQL, "SUM(response_bytes)") || rollup.Properties["schema_version"] != "11" {
		t.Fatalf("the statement's note must carry its SQL summing response_bytes, created against v11: %+v", rollup)
	}
	reads := false
	for _, e := range p.Notes.Edges {
		if e.From == assetAPIUsage && e.To == assetRollup && contains(e.Fields, "response_bytes") {
			reads = true
		}
	}
	if !reads {
		t.Error("no edge records the statement reading response_bytes from api-usage")
	}
	for _, a := range p.Notes.Assets {
		if a.ID == assetStripeDAG && (a.Schedule != "0 23 * * *" || !contains(a.Tags, "outbound") || !contains(a.Tags, "money") || a.Owner != "bea") {
			t.Errorf("Stripe DAG note: %+v", a)
		}
	}
}

// TestAvroVersions proves the registry story with the Avro library: v12
// is BACKWARD compatible with v11 (so the registry accepts it), a reader
// still on v11 gets null response_bytes from v12 data, and v13 is
// compatible with both.
func TestAvroVersions(t *testing.T) {
	p := readPacks(t, Timeline(storyNow))["billing"]
	schemas := map[int]avro.Schema{}
	for _, v := range p.Subjects[0].Versions {
		s, err := avro.ParseWithCache(v.Schema, "", &avro.SchemaCache{})
		if err != nil {
			t.Fatalf("version %d: %v", v.Version, err)
		}
		schemas[v.Version] = s
	}
	compat := avro.NewSchemaCompatibility()
	for _, pair := range [][2]int{{12, 11}, {13, 12}, {13, 11}} {
		if err := compat.Compatible(schemas[pair[0]], schemas[pair[1]]); err != nil {
			t.Errorf("reader v%d, writer v%d: %v", pair[0], pair[1], err)
		}
	}
	rec := map[string]any{
		"usage_id": "0f8e", "account_id": "acct_0001", "event_time": time.UnixMilli(1_700_000_000_000).UTC(),
		"ingest_time": time.UnixMilli(1_700_000_000_100).UTC(), "endpoint": "/v1/maps", "method": "GET", "status": 200,
		"region": "eu-west-1", "latency_ms": 41, "request_bytes": nil, "response_kib": int64(18),
	}
	data, err := avro.Marshal(schemas[12], rec)
	if err != nil {
		t.Fatal(err)
	}
	resolved, err := compat.Resolve(schemas[11], schemas[12])
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := avro.Unmarshal(resolved, data, &got); err != nil {
		t.Fatal(err)
	}
	if v, ok := got["response_bytes"]; !ok || v != nil {
		t.Errorf("a v11 reader of v12 data got response_bytes = %v (present %t), want null", v, ok)
	}
}

func TestLineageEventsAreRunEvents(t *testing.T) {
	p := readPacks(t, Timeline(storyNow))["loyalty"]
	uuid := regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)
	var complete bool
	for i, raw := range p.LineageEvents {
		var ev struct {
			EventType string    `json:"eventType"`
			EventTime time.Time `json:"eventTime"`
			Producer  string    `json:"producer"`
			SchemaURL string    `json:"schemaURL"`
			Run       struct {
				RunID string `json:"runId"`
			} `json:"run"`
			Job struct {
				Namespace, Name string
			} `json:"job"`
			Inputs, Outputs []struct {
				Namespace, Name string
			}
		}
		if err := json.Unmarshal(raw, &ev); err != nil {
			t.Fatal(err)
		}
		if !uuid.MatchString(ev.Run.RunID) || ev.Producer == "" || !strings.HasSuffix(ev.SchemaURL, "#/$defs/RunEvent") ||
			ev.EventTime.IsZero() || ev.Job.Name != "points-balance" {
			t.Errorf("event %d is not a complete RunEvent: %+v", i, ev)
		}
		if len(ev.Inputs) != 1 || ev.Inputs[0].Name != "pos-transactions" || !strings.HasPrefix(ev.Inputs[0].Namespace, "kafka://") ||
			len(ev.Outputs) != 1 || ev.Outputs[0].Name != "member-balances" {
			t.Errorf("event %d datasets: %+v %+v", i, ev.Inputs, ev.Outputs)
		}
		complete = complete || ev.EventType == "COMPLETE"
	}
	if !complete {
		t.Error("no COMPLETE event")
	}
	if len(p.Connectors) != 1 || p.Connectors[0].Info.Config["connector.class"] != "com.wepay.kafka.connect.bigquery.BigQuerySinkConnector" ||
		p.Connectors[0].Info.Config["defaultDataset"] != "loyalty" || p.Connectors[0].Status.Connector.State != "RUNNING" {
		t.Errorf("connectors: %+v", p.Connectors)
	}
}

func TestShiftTimes(t *testing.T) {
	in := []byte(`{"a":"2026-03-10T14:05:00Z","b":["2026-03-09T23:00:00.123Z",{"c":"2026-03-10T14:05:00+02:00"}],
		"d":"2026-03-10","e":"0 23 * * *","f":1773154722,"g":"at 2026-03-10T14:05:00Z"}`)
	out, err := shiftTimes(in, 48*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"a": "2026-03-12T14:05:00Z",
		"b": []any{"2026-03-11T23:00:00.123Z", map[string]any{"c": "2026-03-12T14:05:00+02:00"}},
		"d": "2026-03-10", "e": "0 23 * * *", "f": float64(1773154722), "g": "at 2026-03-10T14:05:00Z",
	}
	gotJSON, _ := json.Marshal(got)
	wantJSON, _ := json.Marshal(want)
	if !bytes.Equal(gotJSON, wantJSON) {
		t.Errorf("shiftTimes:\n got %s\nwant %s", gotJSON, wantJSON)
	}
}

func TestReadPackErrors(t *testing.T) {
	if _, err := ReadPack(filepath.Join(t.TempDir(), "nope"), Timeline(storyNow)); err == nil {
		t.Error("a missing directory must fail")
	}
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, fileNotes), []byte(`{"assets":[],"edges":[],"surprise":1}`), 0o644)
	os.WriteFile(filepath.Join(dir, fileChanges), []byte(`[]`), 0o644)
	os.WriteFile(filepath.Join(dir, filePeople), []byte("people: []\n"), 0o644)
	if _, err := ReadPack(dir, Timeline(storyNow)); err == nil || !strings.Contains(err.Error(), "surprise") {
		t.Errorf("an unknown key must be named, got %v", err)
	}
}
