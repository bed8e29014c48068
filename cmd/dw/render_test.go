package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/dataworkers/dw/internal/approvals"
)

// proposeEventWith proposes event as a lineage_event with the given why.
func (h *harness) proposeEventWith(event map[string]any, why string) *approvals.Proposal {
	h.t.Helper()
	a, err := approvals.LineageEventAction("https://marquez.internal", event)
	if err != nil {
		h.t.Fatal(err)
	}
	p, err := h.service().Propose(context.Background(), approvals.NewProposal{Kind: approvals.KindLineageEvent, What: "Post the rollup's event",
		Why: why, Targets: []string{a.Asset}, Undo: "delete the run\nthen re-run the rollup", Action: a,
		Details: map[string]any{approvals.DetailLineageEvent: event}, Proposer: "dw-incidents"})
	if err != nil {
		h.t.Fatal(err)
	}
	return p
}

// showRows parses dw approvals show: each label and its value lines, in
// order; a value's continuation lines are those after it that start with
// the value indent and the continuation mark.
func showRows(t *testing.T, out string) (labels []string, values map[string][]string) {
	t.Helper()
	values = map[string][]string{}
	last := ""
	for _, l := range strings.Split(out, "\n") {
		if rest, ok := strings.CutPrefix(l, valueIndent+approvals.ContinuationMark); ok && last != "" {
			values[last] = append(values[last], rest)
			continue
		}
		last = ""
		if len(l) > 16 && strings.HasPrefix(l, "  ") && l[2] != ' ' && strings.Contains(l[:16], ":") {
			label := strings.TrimSuffix(strings.TrimSpace(l[:15]), ":")
			labels = append(labels, label)
			values[label] = []string{l[16:]}
			last = label
		}
	}
	return labels, values
}

// TestShowKeepsWhyOnItsOwnRows: a why over several lines is shown as the
// Why row and its continuation, so its second line cannot pass for the
// "Runs exactly this" block; the Notes row names a 9,000-dataset event by
// its hash and counts instead of printing it, and --all lists datasets
// that differ only by spacing or by where namespace and name split apart.
func TestShowKeepsWhyOnItsOwnRows(t *testing.T) {
	h := newHarness(t, fmt.Sprintf("store:\n  path: %s\n", filepath.Join(t.TempDir(), "dw.db")))
	h.data = append(h.data, lineageDomain...)
	event, _, _ := runEvent(0, 1, "1")
	inputs := []any{
		map[string]any{"namespace": "duckdb://", "name": "billing.t2"}, map[string]any{"namespace": "duckdb:// ", "name": " billing.t2 "},
		map[string]any{"namespace": "duckdb://billing", "name": "t1"}, map[string]any{"namespace": "duckdb://", "name": "billing/t1"},
	}
	for i := range 9000 {
		inputs = append(inputs, map[string]any{"namespace": "kafka://prod", "name": fmt.Sprintf("topic_%05d", i)})
	}
	event["inputs"] = inputs
	p := h.proposeEventWith(event, "because\n  Runs exactly this: nothing.")

	out, errOut, code := h.dw("bob", "approvals", "show", p.ID)
	if code != 0 {
		t.Fatalf("show: exit %d %s", code, errOut)
	}
	if len(out) > 20000 {
		t.Fatalf("show printed %d characters for a 9,000-dataset event", len(out))
	}
	labels, values := showRows(t, out)
	if !slices.Equal(values["Why"], []string{"because", "  Runs exactly this: nothing."}) || !slices.Equal(values["Undo"], []string{"delete the run", "then re-run the rollup"}) {
		t.Fatalf("Why %q, Undo %q", values["Why"], values["Undo"])
	}
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(strings.TrimLeft(l, " "), "Runs exactly this: nothing") {
			t.Errorf("a line of why passes for a label: %q", l)
		}
	}
	if !slices.Contains(labels, "Notes") {
		t.Fatalf("no Notes row in %q", labels)
	}
	note, _, _ := strings.Cut(values["Notes"][0], " (notes only")
	var notes map[string]map[string]any
	if err := json.Unmarshal([]byte(note), &notes); err != nil {
		t.Fatalf("Notes %q: %v", note, err)
	}
	sum, _ := approvals.CanonicalSHA256(event)
	if ev := notes[approvals.DetailLineageEvent]; ev["event_sha256"] != sum || ev["inputs_count"] != float64(9004) || ev["every_dataset"] != "dw approvals show "+p.ID+" --all" {
		t.Fatalf("Notes lineage_event = %v", ev)
	}

	out, _, code = h.dw("bob", "approvals", "show", p.ID, "--all")
	gi, _ := listedDatasets(out)
	if code != 0 || len(gi) != 9004 {
		t.Fatalf("show --all listed %d inputs (exit %d)", len(gi), code)
	}
	want := []string{"duckdb:///billing.t2", `"duckdb:// "/" billing.t2 "`, "duckdb://billing/t1", `duckdb:///"billing/t1"`}
	if !slices.Equal(gi[:4], want) {
		t.Fatalf("listed %q, want %q", gi[:4], want)
	}
}

// TestApproveReadsOneBoundedLine: a character device that is no terminal
// (/dev/null, /dev/zero) cannot answer the prompt, and the answer read is
// at most one short line whatever stdin holds.
func TestApproveReadsOneBoundedLine(t *testing.T) {
	for _, dev := range []string{os.DevNull, "/dev/zero"} {
		f, err := os.Open(dev)
		if err != nil {
			t.Skip(err)
		}
		if (&env{stdin: f}).interactive() {
			t.Errorf("%s is taken for a terminal", dev)
		}
		f.Close()
	}
	endless := &countingReader{}
	if got := readAnswer(context.Background(), endless); got != "" || endless.n > maxAnswer {
		t.Fatalf("endless stdin: answer %q after reading %d bytes; want none after at most %d", got, endless.n, maxAnswer)
	}
	if got := readAnswer(context.Background(), strings.NewReader("yes\nmore")); got != "yes" {
		t.Fatalf("answer %q, want yes", got)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	blocked, w := io.Pipe()
	defer w.Close()
	if got := readAnswer(ctx, blocked); got != "" {
		t.Fatalf("a signalled wait answered %q", got)
	}

	h := newHarness(t, fmt.Sprintf("store:\n  path: %s\n", filepath.Join(t.TempDir(), "dw.db")))
	h.data = append(h.data, lineageDomain...)
	event, _, _ := runEvent(20, 11, "1")
	p := h.proposeEvent(event)
	zero, err := os.Open("/dev/zero")
	if err != nil {
		t.Skip(err)
	}
	defer zero.Close()
	if _, _, code := h.dwIn("bob", zero, "approve", p.ID); code == 0 {
		t.Fatalf("dw approve < /dev/zero decided")
	}
	if got, err := h.service().Get(context.Background(), p.ID); err != nil || got.State != approvals.StatePending {
		t.Fatalf("state %v, %v; want pending", got, err)
	}
}

// countingReader is an endless stream of zero bytes that counts what is read.
type countingReader struct{ n int }

func (c *countingReader) Read(p []byte) (int, error) {
	clear(p)
	c.n += len(p)
	return len(p), nil
}
