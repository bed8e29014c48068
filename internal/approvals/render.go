package approvals

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"
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
			fmt.Fprintf(&b, "- %s (recorded by %s at %s)\n", describe(c.facts), c.Actor, stamp(c.At))
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
			fmt.Fprintf(&b, "\n### %s: %s%s\n\n", id, str(p.facts["what"]), now)
			fmt.Fprintf(&b, "- Action: %s (%s class) in domain %s on %s\n", str(p.facts["kind"]), str(p.facts["class"]), str(p.facts["domain"]), list(p.facts["targets"]))
			fmt.Fprintf(&b, "- Why: %s\n", str(p.facts["why"]))
			if s := list(p.facts["scope"]); s != "" {
				fmt.Fprintf(&b, "- Blast radius: %s\n", s)
			}
			fmt.Fprintf(&b, "- Undo: %s\n", str(p.facts["undo"]))
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
					fmt.Fprintf(&b, ", reason: %s", r)
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
			fmt.Fprintf(&b, ": %s\n", str(s.facts["description"]))
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
			fmt.Fprintf(&b, "- %s: %s", id, str(p.facts["undo"]))
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
		fmt.Fprintf(&b, "  - %s: %s\n", fl.Name, fl.Value)
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
	s = strings.ReplaceAll(s, "|", `\|`)
	return strings.ReplaceAll(s, "\n", " ")
}

func short(h string) string {
	if len(h) > 16 {
		return h[:16]
	}
	return h
}
