package notify

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dataworkers/dw/internal/approvals"
	"github.com/dataworkers/dw/internal/config"
)

// TestRequestBlocksSayHowManyDatasets: a Slack request for a lineage
// event naming more datasets than it lists says how many there are, the
// digest binding them all and where to read every one, within Slack's
// limits.
func TestRequestBlocksSayHowManyDatasets(t *testing.T) {
	var inputs []any
	for i := range 300 {
		inputs = append(inputs, map[string]any{"namespace": "kafka://prod", "name": fmt.Sprintf("topic_%03d", i)})
	}
	event := map[string]any{"eventType": "COMPLETE", "eventTime": "2026-03-10T15:05:00Z", "run": map[string]any{"runId": "r1"},
		"job": map[string]any{"namespace": "flink-prod", "name": "fan-in"}, "inputs": inputs, "outputs": []any{}}
	a, err := approvals.LineageEventAction("https://marquez.internal", event)
	if err != nil {
		t.Fatal(err)
	}
	a.Domain = "streaming"
	p := approvals.Proposal{ID: "P-AAAACCCC", Domain: "streaming", Kind: approvals.KindLineageEvent, Class: approvals.ClassStandard,
		What: "Post fan-in's event", Why: "Marquez lacks it", Targets: []string{a.Asset}, Undo: "delete the run", Action: a,
		Details: map[string]any{approvals.DetailLineageEvent: event}, Proposer: "dw-incidents", Approver: "bob",
		ApproverOrder: []string{"bob"}, State: approvals.StatePending, ExpiresAt: time.Date(2026, 3, 10, 17, 0, 0, 0, time.UTC)}
	var want string
	for _, f := range a.Fields() {
		if f.Name == "datasets" {
			want = "*datasets*: " + f.Value
		}
	}
	if !strings.Contains(want, "lists 8 of 300 inputs and 0 of 0 outputs") || !strings.Contains(want, a.Params["datasets_sha256"].(string)) {
		t.Fatalf("datasets field %q", want)
	}
	cfg := &config.Config{People: []config.Person{{ID: "bob", Name: "Bob Stream", SlackID: "U0BOB"}}}
	raw, err := json.Marshal(RequestBlocks(cfg, approvals.Notice{Approver: "bob", Proposal: p}, true))
	if err != nil {
		t.Fatal(err)
	}
	var blocks []any
	if err := json.Unmarshal(raw, &blocks); err != nil || len(blocks) > 50 {
		t.Fatalf("%d blocks (%v); Slack takes at most 50", len(blocks), err)
	}
	found := false
	for _, s := range blockTexts(t, raw) {
		if len([]rune(s)) > maxSection {
			t.Errorf("a section is %d characters", len([]rune(s)))
		}
		found = found || slices.Contains(strings.Split(s, "\n"), want)
	}
	if !found {
		t.Fatalf("the request does not show %q:\n%s", want, raw)
	}
}
