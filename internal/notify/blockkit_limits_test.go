package notify

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/dataworkers/dw/internal/approvals"
	"github.com/dataworkers/dw/internal/config"
)

// blockKitViolations checks a Block Kit payload the way Slack does before
// accepting chat.postMessage or chat.update: every limit on every block and
// element type the product sends (docs.slack.dev/reference/block-kit).
// A block or element type it does not know is itself a violation, so a new
// kind of block cannot reach Slack untested.
func blockKitViolations(raw []byte) []string {
	var blocks []map[string]any
	if err := json.Unmarshal(raw, &blocks); err != nil {
		return []string{"blocks are not a JSON array of objects: " + err.Error()}
	}
	var bad []string
	fail := func(format string, a ...any) { bad = append(bad, fmt.Sprintf(format, a...)) }
	// text checks a text object: its type, that it is not empty, and its length.
	text := func(where string, v any, max int, plainOnly bool) {
		m, ok := v.(map[string]any)
		if !ok {
			fail("%s: not a text object", where)
			return
		}
		typ, _ := m["type"].(string)
		if typ != "plain_text" && (plainOnly || typ != "mrkdwn") {
			fail("%s: text type %q", where, typ)
		}
		s, _ := m["text"].(string)
		if n := utf8.RuneCountInString(s); n == 0 || n > max {
			fail("%s: text of %d characters (Slack allows 1 to %d)", where, n, max)
		}
	}
	str := func(where string, v any, max int) {
		if s, _ := v.(string); utf8.RuneCountInString(s) > max {
			fail("%s: %d characters (Slack allows %d)", where, utf8.RuneCountInString(s), max)
		}
	}
	if len(blocks) > 50 {
		fail("%d blocks (Slack allows 50)", len(blocks))
	}
	for i, b := range blocks {
		at := fmt.Sprintf("block %d (%v)", i, b["type"])
		str(at+" block_id", b["block_id"], 255)
		switch b["type"] {
		case "header":
			text(at, b["text"], 150, true)
		case "section":
			fields, _ := b["fields"].([]any)
			if b["text"] == nil && len(fields) == 0 {
				fail("%s: neither text nor fields", at)
			}
			if b["text"] != nil {
				text(at, b["text"], 3000, false)
			}
			if len(fields) > 10 {
				fail("%s: %d fields (Slack allows 10)", at, len(fields))
			}
			for j, f := range fields {
				text(fmt.Sprintf("%s field %d", at, j), f, 2000, false)
			}
		case "context":
			els, _ := b["elements"].([]any)
			if len(els) == 0 || len(els) > 10 {
				fail("%s: %d elements (Slack allows 1 to 10)", at, len(els))
			}
			for j, e := range els {
				text(fmt.Sprintf("%s element %d", at, j), e, 3000, false)
			}
		case "actions":
			els, _ := b["elements"].([]any)
			if len(els) == 0 || len(els) > 25 {
				fail("%s: %d elements (Slack allows 1 to 25)", at, len(els))
			}
			for j, e := range els {
				el, _ := e.(map[string]any)
				ea := fmt.Sprintf("%s element %d (%v)", at, j, el["type"])
				if el["type"] != "button" {
					fail("%s: an element type these limits do not cover", ea)
					continue
				}
				text(ea, el["text"], 75, true)
				str(ea+" action_id", el["action_id"], 255)
				str(ea+" value", el["value"], 2000)
				if c, ok := el["confirm"].(map[string]any); ok {
					text(ea+" confirm title", c["title"], 100, true)
					text(ea+" confirm text", c["text"], 300, false)
					text(ea+" confirm confirm", c["confirm"], 30, true)
					text(ea+" confirm deny", c["deny"], 30, true)
				}
			}
		default:
			fail("%s: a block type these limits do not cover", at)
		}
	}
	return bad
}

// TestRequestBlocksStayWithinBlockKitLimits: a proposal at every input
// limit (what, why and undo of 4,096 characters full of characters mrkdwn
// escapes, 100 targets, 1,000 scope entries) still makes a request Slack
// accepts, and the cut lists say how many entries they leave out.
func TestRequestBlocksStayWithinBlockKitLimits(t *testing.T) {
	cfg := &config.Config{People: []config.Person{{ID: "bob", Name: "Bob Billing", SlackID: "U0BOB"}}}
	p := boundRun(t)
	p.What = strings.Repeat("<&> what ", 455)
	p.Why = strings.Repeat("<&> why ", 512)
	p.Undo = strings.Repeat("<&> undo ", 455)
	p.Targets, p.Scope = nil, nil
	for i := range approvals.MaxTargets {
		p.Targets = append(p.Targets, fmt.Sprintf("dagster://job/refresh_usage_partition_%03d", i))
	}
	for i := range approvals.MaxScope {
		p.Scope = append(p.Scope, fmt.Sprintf("duckdb://billing.consumer_table_%04d", i))
	}
	raw, err := json.Marshal(RequestBlocks(cfg, approvals.Notice{Approver: "bob", Proposal: p}, true))
	if err != nil {
		t.Fatal(err)
	}
	if bad := blockKitViolations(raw); len(bad) > 0 {
		t.Fatalf("Slack would refuse the request: %s", strings.Join(bad, "\n"))
	}
	var blocks []struct {
		Fields []struct {
			Text string `json:"text"`
		} `json:"fields"`
	}
	if err := json.Unmarshal(raw, &blocks); err != nil {
		t.Fatal(err)
	}
	more := regexp.MustCompile("\n… and (\\d+) more; `dw approvals show " + p.ID + "` lists every one$")
	seen := map[string]bool{}
	for _, b := range blocks {
		for _, f := range b.Fields {
			head, body, _ := strings.Cut(f.Text, "\n")
			want := map[string]int{"*Targets*": len(p.Targets), "*Blast radius*": len(p.Scope)}[head]
			if want == 0 {
				continue
			}
			seen[head] = true
			m := more.FindStringSubmatch(f.Text)
			if m == nil {
				t.Errorf("%s: cut without saying how many are left out: ends %q", head, f.Text[max(0, len(f.Text)-80):])
				continue
			}
			shown := strings.Count(body, "\n• ") + 1
			if n, _ := strconv.Atoi(m[1]); shown+n != want || shown < 10 {
				t.Errorf("%s: %d shown and %s more; want %d in all", head, shown, m[1], want)
			}
		}
	}
	if !seen["*Targets*"] || !seen["*Blast radius*"] {
		t.Errorf("fields seen %v; want Targets and Blast radius", seen)
	}
}

// TestBlockKitLimitsAreChecked: the fake Slack's check refuses what Slack
// refuses, so a request over a limit fails the tests that post it.
func TestBlockKitLimitsAreChecked(t *testing.T) {
	confirm := func(text string) []byte {
		return []byte(fmt.Sprintf(`[{"type":"actions","elements":[{"type":"button","action_id":"a","text":{"type":"plain_text","text":"Approve"},
			"confirm":{"title":{"type":"plain_text","text":"t"},"text":{"type":"mrkdwn","text":%q},"confirm":{"type":"plain_text","text":"Approve"},"deny":{"type":"plain_text","text":"Cancel"}}}]}]`, text))
	}
	if bad := blockKitViolations(confirm(strings.Repeat("é", 300))); len(bad) != 0 {
		t.Errorf("300 characters refused: %v", bad)
	}
	if bad := blockKitViolations(confirm(strings.Repeat("é", 301))); len(bad) != 1 || !strings.Contains(bad[0], "confirm text: text of 301 characters (Slack allows 1 to 300)") {
		t.Errorf("301 characters: %v", bad)
	}
	for _, raw := range []string{
		`[{"type":"header","text":{"type":"mrkdwn","text":"h"}}]`,
		`[{"type":"section","fields":[{"type":"mrkdwn","text":"` + strings.Repeat("x", 2001) + `"}]}]`,
		`[{"type":"image","image_url":"https://x"}]`,
		`[{"type":"context","elements":[]}]`,
	} {
		if bad := blockKitViolations([]byte(raw)); len(bad) == 0 {
			t.Errorf("accepted %.80s", raw)
		}
	}
}
