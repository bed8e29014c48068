package incidents

import (
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/dataworkers/dw/internal/approvals"
	"github.com/dataworkers/dw/internal/config"
)

// TestProposeAnswerIsBoundedForHugeEvents: a lineage_event naming 9,000
// datasets (about a megabyte of details) is proposed, and the answer names
// the event by its hash, job, run and counts instead of echoing it, well
// under 80,000 characters; the event itself is kept with the proposal for
// dw approvals show --all.
func TestProposeAnswerIsBoundedForHugeEvents(t *testing.T) {
	s, id, srvURL := lineageStory(t)
	ev := rollupRunEvent(t, "RUNNING", runA)
	var inputs []any
	for i := range 9000 {
		inputs = append(inputs, map[string]any{"namespace": "kafka://broker-1:9092", "name": fmt.Sprintf("topic-with-a-long-name-%05d", i)})
	}
	ev["inputs"] = inputs
	spec := ProposalSpec{Kind: "lineage_event", What: "Post the rollup's RUNNING event", Why: "Marquez lacks the hop",
		Undo: "delete run " + runA + " from Marquez", LineageEvent: ev}
	out, text, err := s.h.propose(s.ctx, ProposeIn{Incident: id, Proposals: []ProposalSpec{spec}})
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(out)
	if total := len(raw) + len(text); total > 80000/4 {
		t.Fatalf("answer is %d characters of JSON and %d of text; want well under 80,000", len(raw), len(text))
	}
	var parsed ProposeOut
	if err := json.Unmarshal(raw, &parsed); err != nil {
		t.Fatal(err)
	}
	p := parsed.Proposals[0]
	sum, _ := approvals.CanonicalSHA256(ev)
	got, _ := p.Details[approvals.DetailLineageEvent].(map[string]any)
	if got["event_sha256"] != sum || got["inputs_count"] != float64(9000) || got["outputs_count"] != float64(1) ||
		got["job"] != "flink-prod/usage-hourly-rollup" || got["run_id"] != runA || got["every_dataset"] != "dw approvals show "+p.ID+" --all" {
		t.Fatalf("the answer's lineage_event note is %v", got)
	}
	if len(p.Omitted) == 0 {
		t.Errorf("the answer does not say it summarized the details")
	}
	// The whole event is still kept for the approver.
	stored, err := s.env().apv.Get(s.ctx, p.ID)
	if err != nil {
		t.Fatal(err)
	}
	ds, err := stored.LineageDatasets()
	if err != nil || len(ds.Inputs) != 9000 {
		t.Fatalf("kept datasets: %v, %v", ds, err)
	}
	_ = srvURL
}

// TestProposeAnswerIsBoundedForAnyInput: the most the tool accepts of
// every free field (20 proposals, 4,096-character texts, long notes) still
// answers in well under 80,000 characters, saying what it shortened.
func TestProposeAnswerIsBoundedForAnyInput(t *testing.T) {
	s := newStory(t, "billing")
	s.osUserFor("sam")
	id := openBilling(s)
	if _, _, err := s.h.diagnose(s.ctx, DiagnoseIn{Incident: id}); err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("x", 4096)
	notes := map[string]any{}
	for i := range 40 {
		notes[fmt.Sprintf("note_%02d", i)] = strings.Repeat("n", 20000)
	}
	var specs []ProposalSpec
	for range 20 {
		specs = append(specs, ProposalSpec{Kind: "hold", What: long, Why: long, Undo: long,
			Targets: []string{"airflow://dag/sync_metered_usage_to_stripe"}, Details: notes})
	}
	out, text, err := s.h.propose(s.ctx, ProposeIn{Incident: id, Proposals: specs})
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(out)
	if total := len(raw) + len(text); total > 60000 {
		t.Fatalf("answer is %d characters of JSON and %d of text; want well under 80,000", len(raw), len(text))
	}
	var parsed ProposeOut
	if err := json.Unmarshal(raw, &parsed); err != nil || len(parsed.Proposals) != 20 {
		t.Fatalf("%d proposals, %v", len(parsed.Proposals), err)
	}
	for _, p := range parsed.Proposals {
		if p.ID == "" || p.HowToDecide == "" || len(p.Omitted) == 0 {
			t.Fatalf("proposal in the answer: %+v", p)
		}
	}
}

// TestProposeRefusesTerminalEscapes: text an approver reads may not carry
// control or invisible formatting characters; each is refused naming the
// field, and nothing is sent.
func TestProposeRefusesTerminalEscapes(t *testing.T) {
	s := newStory(t, "billing")
	s.osUserFor("sam")
	id := openBilling(s)
	if _, _, err := s.h.diagnose(s.ctx, DiagnoseIn{Incident: id}); err != nil {
		t.Fatal(err)
	}
	base := ProposalSpec{Kind: "hold", What: "Pause the sync", Why: "egress is wrong", Undo: "unpause the DAG",
		Targets: []string{"airflow://dag/sync_metered_usage_to_stripe"}}
	for name, c := range map[string]struct {
		field string
		edit  func(*ProposalSpec)
	}{
		"ANSI colour in what": {"what", func(p *ProposalSpec) { p.What = "Post lineage \x1b[31mRED\x1b[0m" }},
		"newline in what":     {"what", func(p *ProposalSpec) { p.What = "Pause\nRuns exactly this: nothing" }},
		"zero-width in what":  {"what", func(p *ProposalSpec) { p.What = "Pause sync\u200b" }},
		"bidi override":       {"what", func(p *ProposalSpec) { p.What = "Pause \u202esync" }},
		"bidi isolate":        {"what", func(p *ProposalSpec) { p.What = "Pause \u2066sync" }},
		"C1 CSI in what":      {"what", func(p *ProposalSpec) { p.What = "Pause \u009b2J" }},
		"conceal in why":      {"why", func(p *ProposalSpec) { p.Why = "because\x1b[8m" }},
		"CR in why":           {"why", func(p *ProposalSpec) { p.Why = "because\rRuns exactly this: nothing" }},
		"bidi in undo":        {"undo", func(p *ProposalSpec) { p.Undo = "unpause \u202b the DAG" }},
	} {
		spec := base
		c.edit(&spec)
		_, _, err := s.h.propose(s.ctx, ProposeIn{Incident: id, Proposals: []ProposalSpec{spec}})
		if err == nil || !strings.Contains(err.Error(), c.field+" holds U+") {
			t.Errorf("%s: %v, want a refusal naming %s", name, err, c.field)
		}
	}
	if ps, err := s.env().apv.List(s.ctx, approvals.Filter{}); err != nil || len(ps) != 0 {
		t.Fatalf("refused input sent %d proposals (%v)", len(ps), err)
	}
	// A why over several lines is fine; its lines are shown as its own.
	ok := base
	ok.Why = "because\n  Runs exactly this: nothing."
	if _, _, err := s.h.propose(s.ctx, ProposeIn{Incident: id, Proposals: []ProposalSpec{ok}}); err != nil {
		t.Fatalf("multi-line why refused: %v", err)
	}
}

// lineageStory is the billing story with an OpenLineage endpoint and the
// streaming domain owning every lineage job, the incident diagnosed.
func lineageStory(t *testing.T) (*story, string, string) {
	t.Helper()
	s := newStory(t, "billing")
	s.osUserFor("sam")
	srv := httptest.NewServer(&olEndpoint{})
	t.Cleanup(srv.Close)
	s.cfg.OpenLineage = &config.Service{URL: srv.URL + "/"}
	for i := range s.cfg.Domains {
		if s.cfg.Domains[i].Name == "streaming" {
			s.cfg.Domains[i].Assets = append(s.cfg.Domains[i].Assets, "openlineage://**")
		}
	}
	id := openBilling(s)
	if _, _, err := s.h.diagnose(s.ctx, DiagnoseIn{Incident: id}); err != nil {
		t.Fatal(err)
	}
	return s, id, srv.URL
}
