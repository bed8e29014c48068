package notify

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"unicode"

	"github.com/dataworkers/dw/internal/approvals"
	"github.com/dataworkers/dw/internal/config"
)

// TestRequestBlocksMarkWhyContinuation: a why over several lines is shown
// in its own field with every line after the first marked as its
// continuation, and text that reached the store with terminal escapes or
// invisible characters (written before they were refused) is shown
// escaped, in the header too.
func TestRequestBlocksMarkWhyContinuation(t *testing.T) {
	cfg := &config.Config{People: []config.Person{{ID: "bob", Name: "Bob Billing", SlackID: "U0BOB"}}}
	p := boundRun(t)
	p.What = "Rerun \x1b[8mhidden\u202e"
	p.Why = "because\n*Allows exactly this action, nothing else*"
	raw, err := json.Marshal(RequestBlocks(cfg, approvals.Notice{Approver: "bob", Proposal: p}, true))
	if err != nil {
		t.Fatal(err)
	}
	texts := blockTexts(t, raw)
	var why []string
	for _, s := range texts {
		if strings.HasPrefix(s, "*Why*\n") {
			why = strings.Split(s, "\n")
		}
		if strings.IndexFunc(s, func(r rune) bool { return r != '\n' && !unicode.IsPrint(r) }) >= 0 {
			t.Errorf("a block shows an unprintable character: %q", s)
		}
	}
	if want := []string{"*Why*", "because", approvals.ContinuationMark + "*Allows exactly this action, nothing else*"}; !slices.Equal(why, want) {
		t.Fatalf("Why field lines %q, want %q", why, want)
	}
	var blocks []map[string]any
	_ = json.Unmarshal(raw, &blocks)
	head, _ := blocks[0]["text"].(map[string]any)
	if head["text"] != `Approval needed: Rerun \x1b[8mhidden\u202e` {
		t.Fatalf("header %q", head["text"])
	}
}
