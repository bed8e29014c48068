package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/dataworkers/dw/internal/approvals"
	"github.com/dataworkers/dw/internal/config"
)

// lineageDomain adds a domain for lineage jobs, approved by bob.
const lineageDomain = `  - name: lineage
    assets: ["openlineage://**"]
    autonomy: L2
    owners: [bob]
    approvers: [bob]
`

func (h *harness) dwIn(user string, stdin io.Reader, args ...string) (stdout, stderr string, code int) {
	var out, errb bytes.Buffer
	e := &env{stdout: &out, stderr: &errb, stdin: stdin, osUser: user, clock: h.clk,
		loadConfig: func() (*config.Config, error) { return config.Parse(h.path, h.data) },
		log:        slog.New(slog.NewTextHandler(io.Discard, nil))}
	code = run(context.Background(), e, args)
	return out.String(), errb.String(), code
}

// runEvent names in inputs and out outputs; names lists them as shown.
func runEvent(in, out int, tag string) (event map[string]any, inputs, outputs []string) {
	side := func(n int, prefix string) ([]any, []string) {
		var list []any
		var names []string
		for i := range n {
			name := fmt.Sprintf("%s_%s_%02d", prefix, tag, i)
			list = append(list, map[string]any{"namespace": "kafka://prod", "name": name})
			names = append(names, "kafka://prod/"+name)
		}
		return list, names
	}
	il, inputs := side(in, "in")
	ol, outputs := side(out, "out")
	return map[string]any{"eventType": "RUNNING", "eventTime": "2026-03-10T15:05:00Z", "producer": "https://flink",
		"run": map[string]any{"runId": "0195d8b4-2f0e-7000-8000-00000000000" + tag}, "job": map[string]any{"namespace": "flink-prod", "name": "rollup-" + tag},
		"inputs": il, "outputs": ol}, inputs, outputs
}

func (h *harness) proposeEvent(event map[string]any) *approvals.Proposal {
	h.t.Helper()
	a, err := approvals.LineageEventAction("https://marquez.internal", event)
	if err != nil {
		h.t.Fatal(err)
	}
	p, err := h.service().Propose(context.Background(), approvals.NewProposal{Kind: approvals.KindLineageEvent, What: "Post the rollup's event",
		Why: "Marquez lacks the job", Targets: []string{a.Asset}, Undo: "delete the run", Action: a,
		Details: map[string]any{approvals.DetailLineageEvent: event}, Proposer: "dw-incidents"})
	if err != nil {
		h.t.Fatal(err)
	}
	return p
}

// listedDatasets parses the dataset lines dw prints after "inputs (N):"
// and "outputs (N):".
func listedDatasets(out string) (inputs, outputs []string) {
	var cur *[]string
	for _, l := range strings.Split(out, "\n") {
		t := strings.TrimSpace(l)
		switch {
		case strings.HasPrefix(t, "inputs ("):
			cur = &inputs
		case strings.HasPrefix(t, "outputs ("):
			cur = &outputs
		case cur != nil && strings.HasPrefix(l, "      ") && t != "":
			*cur = append(*cur, t)
		default:
			cur = nil
		}
	}
	return inputs, outputs
}

// TestApproveLongLineageEventShowsEveryDataset: dw approvals show --all
// lists every dataset; dw approve prints them all before deciding and
// decides only once the person confirms, by the prompt or by the digest,
// recording the digest they were shown.
func TestApproveLongLineageEventShowsEveryDataset(t *testing.T) {
	h := newHarness(t, fmt.Sprintf("store:\n  path: %s\n", filepath.Join(t.TempDir(), "dw.db")))
	h.data = append(h.data, lineageDomain...)
	event, ins, outs := runEvent(20, 11, "1")
	p := h.proposeEvent(event)
	sha, _ := p.Action.Params["datasets_sha256"].(string)

	out, errOut, code := h.dw("bob", "approvals", "show", p.ID, "--all", "--json")
	var shown struct {
		ID       string                     `json:"id"`
		Action   approvals.ActionSpec       `json:"action"`
		Datasets *approvals.LineageDatasets `json:"datasets"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &shown) != nil || shown.Datasets == nil {
		t.Fatalf("show --all --json: exit %d, %s %s", code, out, errOut)
	}
	if shown.ID != p.ID || !slices.Equal(shown.Datasets.Inputs, ins) || !slices.Equal(shown.Datasets.Outputs, outs) || shown.Datasets.SHA256 != sha {
		t.Fatalf("show --all lists %d inputs, %d outputs, sha %s; want 20, 11, %s", len(shown.Datasets.Inputs), len(shown.Datasets.Outputs), shown.Datasets.SHA256, sha)
	}
	out, _, code = h.dw("bob", "approvals", "show", p.ID, "--all")
	if gi, gout := listedDatasets(out); code != 0 || !slices.Equal(gi, ins) || !slices.Equal(gout, outs) {
		t.Fatalf("show --all text lists %d inputs and %d outputs (exit %d):\n%s", len(gi), len(gout), code, out)
	}

	state := func() approvals.State {
		got, err := h.service().Get(context.Background(), p.ID)
		if err != nil {
			t.Fatal(err)
		}
		return got.State
	}
	// Refused: no terminal to confirm, a wrong digest, a "no" at the prompt.
	pipe, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	w.Close()
	defer pipe.Close()
	for name, c := range map[string]struct {
		stdin io.Reader
		args  []string
	}{
		"no terminal":      {nil, nil},
		"script's pipe":    {pipe, nil},
		"wrong digest":     {nil, []string{"--datasets-sha256", strings.Repeat("0", 64)}},
		"answered no":      {strings.NewReader("no\n"), nil},
		"closed prompt":    {strings.NewReader(""), nil},
		"digest of others": {nil, []string{"--datasets-sha256", strings.ToUpper(sha[:60]) + "0000"}},
	} {
		out, errOut, code := h.dwIn("bob", c.stdin, append([]string{"approve", p.ID}, c.args...)...)
		gi, gout := listedDatasets(out)
		if code == 0 || state() != approvals.StatePending {
			t.Fatalf("%s: exit %d, state %s; want a refusal and nothing decided\n%s%s", name, code, state(), out, errOut)
		}
		if !slices.Equal(gi, ins) || !slices.Equal(gout, outs) {
			t.Errorf("%s: printed %d inputs and %d outputs before refusing; want all 20 and 11", name, len(gi), len(gout))
		}
	}

	out, errOut, code = h.dwIn("bob", nil, "approve", p.ID, "--datasets-sha256", strings.ToUpper(sha))
	if code != 0 {
		t.Fatalf("approve with the digest: exit %d\n%s%s", code, out, errOut)
	}
	got, err := h.service().Get(context.Background(), p.ID)
	if err != nil {
		t.Fatal(err)
	}
	if d := got.Decision; got.State != approvals.StateApproved || d == nil || d.Evidence["datasets_sha256"] != sha || d.Evidence["datasets_shown"] != "31" {
		t.Fatalf("decision: state %s, %+v; want approved with the digest shown in evidence", got.State, got.Decision)
	}

	// At a terminal: the prompt answered yes.
	event2, _, _ := runEvent(9, 0, "2")
	p2 := h.proposeEvent(event2)
	if out, errOut, code := h.dwIn("bob", strings.NewReader("yes\n"), "approve", p2.ID); code != 0 {
		t.Fatalf("approve at the prompt: exit %d\n%s%s", code, out, errOut)
	}

	// A request listing every dataset needs no confirmation, and refuses
	// one given for nothing.
	small, _, _ := runEvent(2, 1, "3")
	p3 := h.proposeEvent(small)
	if _, _, code := h.dwIn("bob", nil, "approve", p3.ID, "--datasets-sha256", sha); code == 0 {
		t.Fatalf("a digest for a request listing every dataset was taken")
	}
	if out, errOut, code := h.dwIn("bob", nil, "approve", p3.ID); code != 0 {
		t.Fatalf("approve a small event: exit %d\n%s%s", code, out, errOut)
	}
}
