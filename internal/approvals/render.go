package approvals

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/dataworkers/dw/internal/textrule"
)

// RenderMarkdown prints a receipt for people: the chain's integrity first,
// then cause, proposals with their decisions, steps with their checks, the
// undo, and the full log. Facts come from the hash-chained entries; the
// proposals' current state is shown beside them.
func RenderMarkdown(doc *ReceiptDoc) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Receipt %s\n\n", doc.ID)
	if doc.Chain.OK {
		fmt.Fprintf(&b, "Chain: intact, %d entries, head `%s`.\n", doc.Chain.Entries, short(doc.Chain.Head))
	} else {
		fmt.Fprintf(&b, "Chain: **TAMPERED**, %d entries left. Problems:\n", doc.Chain.Entries)
		for _, p := range doc.Chain.Problems {
			fmt.Fprintf(&b, "- %s\n", p)
		}
	}
	var causes, props, decisions, steps []entryView
	for _, e := range doc.Entries {
		v := entryView{Entry: e, facts: facts(e.Payload)}
		switch e.Kind {
		case EntryCause:
			causes = append(causes, v)
		case EntryProposal:
			props = append(props, v)
		case EntryDecision:
			decisions = append(decisions, v)
		case EntryStep:
			steps = append(steps, v)
		}
	}
	if len(causes) > 0 {
		b.WriteString("\n## Cause\n\n")
		for _, c := range causes {
			fmt.Fprintf(&b, "- %s (recorded by %s at %s)\n", Line(describe(c.facts)), Line(c.Actor), stamp(c.At))
		}
	}
	state := map[string]Proposal{}
	for _, p := range doc.Proposals {
		state[p.ID] = p
	}
	if len(props) > 0 {
		b.WriteString("\n## Proposals\n")
		for _, p := range props {
			id := str(p.facts["proposal"])
			now := ""
			if cur, ok := state[id]; ok {
				now = " [" + string(cur.State) + "]"
			}
			fmt.Fprintf(&b, "\n### %s: %s%s\n\n", id, Line(str(p.facts["what"])), now)
			fmt.Fprintf(&b, "- Action: %s (%s class) in domain %s on %s\n", str(p.facts["kind"]), str(p.facts["class"]), str(p.facts["domain"]), list(p.facts["targets"]))
			fmt.Fprintf(&b, "- Why: %s\n", Text(str(p.facts["why"]), "  "))
			if s := list(p.facts["scope"]); s != "" {
				fmt.Fprintf(&b, "- Blast radius: %s\n", s)
			}
			fmt.Fprintf(&b, "- Undo: %s\n", Text(str(p.facts["undo"]), "  "))
			b.WriteString(receiptAction(p.facts))
			fmt.Fprintf(&b, "- Approver: %s (escalation order: %s)", str(p.facts["approver"]), strings.ReplaceAll(list(p.facts["approver_order"]), ", ", " → "))
			if c := list(p.facts["copied"]); c != "" {
				fmt.Fprintf(&b, "; copied: %s", c)
			}
			b.WriteString("\n")
			fmt.Fprintf(&b, "- Proposed by %s at %s; expires %s\n", p.Actor, stamp(p.At), when(p.facts["expires_at"]))
			found := false
			for _, d := range decisions {
				if str(d.facts["proposal"]) != id {
					continue
				}
				found = true
				verb := "approved"
				if str(d.facts["verdict"]) == string(VerdictReject) {
					verb = "rejected"
				}
				fmt.Fprintf(&b, "- Decision: **%s** by %s via %s at %s", verb, str(d.facts["person"]), str(d.facts["channel"]), stamp(d.At))
				if r := str(d.facts["reason"]); r != "" {
					fmt.Fprintf(&b, ", reason: %s", Line(r))
				}
				if ev, ok := d.facts["evidence"].(map[string]any); ok && len(ev) > 0 {
					fmt.Fprintf(&b, "; evidence: %s", pairs(ev))
				}
				b.WriteString("\n")
			}
			if !found {
				b.WriteString("- Decision: none recorded\n")
			}
		}
	}
	if len(steps) > 0 {
		b.WriteString("\n## Steps\n\n")
		for i, s := range steps {
			fmt.Fprintf(&b, "%d. %s by %s", i+1, stamp(s.At), s.Actor)
			if id := str(s.facts["proposal"]); id != "" {
				fmt.Fprintf(&b, " (%s)", id)
			}
			fmt.Fprintf(&b, ": %s\n", Line(str(s.facts["description"])))
			for _, phase := range []string{"checks_before", "checks_after"} {
				checks, _ := s.facts[phase].([]any)
				for _, c := range checks {
					m, _ := c.(map[string]any)
					mark := "FAIL"
					if ok, _ := m["passed"].(bool); ok {
						mark = "pass"
					}
					label := "before"
					if phase == "checks_after" {
						label = "after"
					}
					fmt.Fprintf(&b, "   - check %s: %s %s", label, mark, str(m["name"]))
					if d := str(m["detail"]); d != "" {
						fmt.Fprintf(&b, " (%s)", d)
					}
					b.WriteString("\n")
				}
			}
		}
	}
	if len(props) > 0 {
		b.WriteString("\n## Undo\n\n")
		for _, p := range props {
			id := str(p.facts["proposal"])
			fmt.Fprintf(&b, "- %s: %s", id, Text(str(p.facts["undo"]), "  "))
			if cur, ok := state[id]; ok && cur.State == StateUndone {
				b.WriteString(" (carried out)")
			}
			b.WriteString("\n")
		}
	}
	b.WriteString("\n## Log\n\n| # | At (UTC) | Kind | Actor | Summary |\n|---|---|---|---|---|\n")
	for _, e := range doc.Entries {
		fmt.Fprintf(&b, "| %d | %s | %s | %s | %s |\n", e.Seq, e.At.UTC().Format("2006-01-02 15:04:05"), e.Kind, cell(e.Actor), cell(summary(e)))
	}
	return b.String()
}

// receiptAction renders the action a proposal entry bound, every field,
// as the approver was shown it, with the hash recorded beside it.
func receiptAction(f map[string]any) string {
	raw, ok := f["action"]
	if !ok {
		return "- Runs: nothing (no action bound; people carry it out)\n"
	}
	text, _ := json.Marshal(raw)
	a, err := decodeAction(str(f["proposal"]), string(text))
	if err != nil || a == nil {
		return fmt.Sprintf("- Runs: unreadable action (%v)\n", err)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "- Runs exactly (action sha256 %s):\n", str(f["action_sha256"]))
	for _, fl := range a.Fields() {
		fmt.Fprintf(&b, "  - %s: %s\n", fl.Name, Line(fl.Value))
	}
	return b.String()
}

type entryView struct {
	Entry
	facts map[string]any
}

func facts(raw json.RawMessage) map[string]any {
	m := map[string]any{}
	_ = json.Unmarshal(raw, &m)
	return m
}

func str(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	default:
		b, _ := json.Marshal(x)
		return string(b)
	}
}

func list(v any) string {
	items, _ := v.([]any)
	var out []string
	for _, i := range items {
		out = append(out, str(i))
	}
	return strings.Join(out, ", ")
}

func when(v any) string {
	if t, err := time.Parse(time.RFC3339Nano, str(v)); err == nil {
		return stamp(t)
	}
	return str(v)
}

func pairs(m map[string]any) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var out []string
	for _, k := range keys {
		out = append(out, k+"="+str(m[k]))
	}
	return strings.Join(out, ", ")
}

// describe renders free-form facts (a cause recorded by another package):
// its summary if it has one, else its fields.
func describe(m map[string]any) string {
	for _, k := range []string{"summary", "title", "text", "description"} {
		if s := str(m[k]); s != "" {
			return s
		}
	}
	return pairs(m)
}

func summary(e Entry) string {
	f := facts(e.Payload)
	id := str(f["proposal"])
	switch e.Kind {
	case EntryProposal:
		return fmt.Sprintf("%s proposed: %s", id, str(f["what"]))
	case EntryRequest:
		return fmt.Sprintf("%s put to %s until %s", id, str(f["approver"]), when(f["expires_at"]))
	case EntryNotified:
		return fmt.Sprintf("%s request posted via %s to %s", id, str(f["via"]), str(f["approver"]))
	case EntryEscalated:
		return fmt.Sprintf("%s escalated from %s to %s (%s)", id, str(f["from"]), str(f["to"]), str(f["reason"]))
	case EntryExpired:
		return fmt.Sprintf("%s expired unanswered by %s; nothing granted", id, list(f["asked"]))
	case EntryDecision:
		verb := "approved"
		if str(f["verdict"]) == string(VerdictReject) {
			verb = "rejected"
		}
		return fmt.Sprintf("%s %s by %s via %s", id, verb, str(f["person"]), str(f["channel"]))
	case EntryStep:
		return fmt.Sprintf("%s step: %s", id, str(f["description"]))
	case EntryExecuted:
		return strings.TrimSpace(fmt.Sprintf("%s executed %s", id, str(f["note"])))
	case EntryUndone:
		return fmt.Sprintf("%s undone: %s", id, str(f["undo"]))
	case EntryStop:
		return fmt.Sprintf("org-wide stop: %q", str(f["reason"]))
	case EntryResume:
		return fmt.Sprintf("stop lifted: %q", str(f["reason"]))
	case EntryAutonomy:
		return fmt.Sprintf("domain %s autonomy %s → %s: %q", str(f["domain"]), str(f["from"]), str(f["to"]), str(f["reason"]))
	case EntryApprovers:
		return approversSummary(f)
	}
	s := []rune(describe(f))
	if len(s) > 140 {
		return string(s[:137]) + "..."
	}
	return string(s)
}

func cell(s string) string {
	return strings.ReplaceAll(Line(s), "|", `\|`)
}

func short(h string) string {
	if len(h) > 16 {
		return h[:16]
	}
	return h
}

// Free text in a proposal (what, why, undo, a reason, a note) is written by
// an agent, which a hostile MCP client may steer; every rendering for
// people (the terminal, Slack, the MCP form, the receipt) shows it through
// Line or Text, so no character of it can move a cursor, recolour or hide
// what follows, or start a line that passes for one of the request's own
// labels ("Runs exactly this: …").

// unshown is the shared free-text rule (internal/textrule), which
// changelog applies to recorded changes too.
func unshown(r rune) bool { return textrule.Unshown(r) }

// Line is s on one line as people are shown it: every character unshown
// reports, a newline included, written as its escape.
func Line(s string) string { return textrule.Line(s) }

// ContinuationMark starts every line of multi-line text after its first,
// after the caller's indent: no line of a why or an undo can begin where a
// label does.
const ContinuationMark = textrule.ContinuationMark

// Text is multi-line free text (why, undo, a reason) as people are shown
// it: split at newlines, each line escaped as Line does, and every line
// after the first written as indent, ContinuationMark, then the line.
func Text(s, indent string) string { return textrule.Text(s, indent) }

// quotedName is a dataset namespace or name as people are shown it: as
// given, unless it is empty, has leading or trailing space, holds a
// character unshown reports, a quote, or one of special; then quoted as Go
// quotes strings. Two different strings never print the same.
func quotedName(s, special string) string {
	if s == "" || s != strings.TrimSpace(s) || strings.IndexFunc(s, unshown) >= 0 || strings.ContainsAny(s, `"`+special) {
		return strconv.Quote(s)
	}
	return s
}

// checkText refuses free text an approver could be misled by: what and
// each scope entry are one line, why and undo may span lines (\n) and
// nothing else; none may hold another control character or an invisible
// formatting one. The error names the field, the character and where.
func checkText(field, s string, multiline bool) error {
	r, i, bad := textrule.First(s, multiline)
	if !bad {
		return nil
	}
	rule := "it is one line of plain text"
	if multiline {
		rule = "it may span lines (\\n) but holds no other control character"
	}
	return invalid("%s holds %U (%s) at character %d; %s and no invisible formatting (zero-width, bidi): remove it so the approver reads exactly what is shown",
		field, r, textrule.Kind(r), i, rule)
}

// maxNote bounds one note's JSON in NotesSummary; a longer one is named by
// its size and where to read it.
const maxNote = 300

// NotesSummary is a proposal's details as an answer or a terminal shows
// them without echoing whole documents: the lineage event a lineage_event
// proposal keeps is named by its SHA-256, job, run and dataset counts
// (dw approvals show ID --all lists every dataset); any other note whose
// JSON is longer than maxNote characters by its size; and once the notes
// shown reach budget characters, the rest by their count. Details are
// notes (they never decide what runs), and the whole of them is in
// dw approvals show ID --json.
func NotesSummary(id string, details map[string]any, budget int) map[string]any {
	if len(details) == 0 {
		return nil
	}
	keys := make([]string, 0, len(details))
	for k := range details {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := map[string]any{}
	used := 0
	for i, k := range keys {
		v := details[k]
		if k == DetailLineageEvent {
			v = eventSummary(id, v)
		} else if raw, _ := json.Marshal(v); len(raw) > maxNote {
			v = fmt.Sprintf("(%d characters of JSON; read them with dw approvals show %s --json)", len(raw), id)
		}
		raw, _ := json.Marshal(v)
		if used += len(raw) + len(clipRunes(k, maxNote)) + 4; used > budget {
			out["omitted_notes"] = fmt.Sprintf("%d more notes (%s); read them with dw approvals show %s --json", len(keys)-i, clipRunes(strings.Join(keys[i:min(len(keys), i+5)], ", "), 200), id)
			break
		}
		out[clipRunes(k, maxNote)] = v
	}
	return out
}

// NotesText is NotesSummary as one line of JSON, at most max characters.
func NotesText(id string, details map[string]any, max int) string {
	raw, _ := json.Marshal(NotesSummary(id, details, max))
	return clipRunes(string(raw), max)
}

// eventSummary names a kept lineage event without its datasets.
func eventSummary(id string, v any) any {
	event, ok := v.(map[string]any)
	if !ok {
		raw, _ := json.Marshal(v)
		return fmt.Sprintf("(not an event object: %d characters of JSON)", len(raw))
	}
	sum, _ := CanonicalSHA256(event)
	field := func(m map[string]any, k string) string { s, _ := m[k].(string); return clipRunes(s, 200) }
	job, _ := event["job"].(map[string]any)
	run, _ := event["run"].(map[string]any)
	ins, _ := event["inputs"].([]any)
	outs, _ := event["outputs"].([]any)
	return map[string]any{
		"event_sha256": sum, "event_type": field(event, "eventType"),
		"job": DatasetName(field(job, "namespace"), field(job, "name")), "run_id": field(run, "runId"),
		"inputs_count": len(ins), "outputs_count": len(outs),
		"every_dataset": "dw approvals show " + id + " --all",
	}
}

// clipRunes is s cut to at most n characters, the cut marked.
func clipRunes(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}
