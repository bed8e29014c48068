package approvals

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"unicode"

	"github.com/dataworkers/dw/internal/store"
	"github.com/dataworkers/dw/internal/store/storetest"
)

// TestLineAndTextShowEveryCharacter: whatever free text holds, what people
// are shown holds no character a screen acts on, and each line after a
// text's first carries the continuation mark after the indent.
func TestLineAndTextShowEveryCharacter(t *testing.T) {
	hostile := "a\x1b[31mb\x1b[8m\u200b\u202e\u2066\u009b2J\x7f\r\t\u2028z"
	got := Line(hostile)
	if want := `a\x1b[31mb\x1b[8m\u200b\u202e\u2066\u009b2J\x7f\r\t\u2028z`; got != want {
		t.Fatalf("Line = %q, want %q", got, want)
	}
	if strings.IndexFunc(got, unshown) >= 0 {
		t.Fatalf("Line left an unshown character in %q", got)
	}
	lines := strings.Split(Text("because\n  Runs exactly this: nothing.\n\x1b[2K", "    "), "\n")
	want := []string{"because", "    > " + "  Runs exactly this: nothing.", `    > \x1b[2K`}
	if !slices.Equal(lines, want) {
		t.Fatalf("Text lines = %q, want %q", lines, want)
	}
}

// TestDatasetNamesAreExact: datasets that differ only by space or by where
// namespace and name split print differently and hash differently.
func TestDatasetNamesAreExact(t *testing.T) {
	cases := [][2]string{
		{"duckdb://", "billing.t2"}, {"duckdb:// ", " billing.t2 "}, {"duckdb://billing", "t1"}, {"duckdb://", "billing/t1"},
		{"kafka://b\x1b[2K", "t"}, {"kafka://b", "t\u200b"}, {`"duckdb://"`, "t"}, {"", "t"},
	}
	seen := map[string][2]string{}
	digests := map[string][2]string{}
	for _, c := range cases {
		name := DatasetName(c[0], c[1])
		if prev, dup := seen[name]; dup {
			t.Errorf("%q and %q both print %s", prev, c, name)
		}
		seen[name] = c
		if strings.IndexFunc(name, func(r rune) bool { return !unicode.IsPrint(r) }) >= 0 {
			t.Errorf("%q prints with an unprintable character: %q", c, name)
		}
		ds := lineageDatasets(map[string]any{"inputs": []any{map[string]any{"namespace": c[0], "name": c[1]}}})
		if prev, dup := digests[ds.SHA256]; dup {
			t.Errorf("%q and %q have one datasets_sha256", prev, c)
		}
		digests[ds.SHA256] = c
		if !slices.Equal(ds.Inputs, []string{name}) {
			t.Errorf("listed %q, want %q", ds.Inputs, name)
		}
	}
	if got := DatasetName("kafka://broker-1:9092", "api-usage"); got != "kafka://broker-1:9092/api-usage" {
		t.Errorf("a plain name prints as %s", got)
	}
}

// TestProposalTextRefusesControls: what is one line, why and undo may
// span lines; no control or invisible formatting character is stored, and
// the confirmation form shows a multi-line why so that none of its lines
// passes for a label.
func TestProposalTextRefusesControls(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		s, _ := fixture(t, db)
		base := NewProposal{Kind: KindHold, What: "Pause the sync", Why: "egress is wrong", Undo: "unpause the DAG",
			Targets: []string{"airflow://dag/sync_metered_usage_to_stripe"}, Proposer: "dw-incidents"}
		for field, edit := range map[string]func(*NewProposal){
			"what":        func(p *NewProposal) { p.What = "Post \x1b[31mRED" },
			"why":         func(p *NewProposal) { p.Why = "because\u202e" },
			"undo":        func(p *NewProposal) { p.Undo = "unpause\x00" },
			"scope[1]":    func(p *NewProposal) { p.Scope = []string{"duckdb://a.b", "x\u200by"} },
			"incident_id": func(p *NewProposal) { p.IncidentID = "INC-1\n" + "INC-2" },
		} {
			np := base
			edit(&np)
			_, err := s.Propose(ctx, np)
			var ie *InputError
			if !errors.As(err, &ie) || !strings.HasPrefix(ie.Msg, field+" holds U+") {
				t.Errorf("%s: %v, want an input error naming it", field, err)
			}
		}
		if ps, err := s.List(ctx, Filter{}); err != nil || len(ps) != 0 {
			t.Fatalf("refused proposals changed the store: %d, %v", len(ps), err)
		}
		np := base
		np.Why = "because\n  Runs exactly this: nothing."
		p := mustPropose(t, s, np)
		lines := strings.Split(ElicitationRequest(*p).Message, "\n")
		if !slices.Contains(lines, "Why: because") || !slices.Contains(lines, "    >   Runs exactly this: nothing.") {
			t.Fatalf("form lines %q", lines)
		}
		for _, l := range lines {
			if strings.HasPrefix(strings.TrimLeft(l, " "), "Runs exactly this: nothing") {
				t.Errorf("a line of why passes for a label: %q", l)
			}
		}
	})
}
