package mcpserver

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Every answer serves two audiences. Clients such as Claude Code and VS
// Code show structuredContent to people, who then see raw JSON; text-only
// clients never see structuredContent at all. So the text content carries
// the summary a person reads and then the key data, rendered compactly
// (a tool may render its own with Tool.Text), and structuredContent
// carries everything.

// textBudget bounds the rendered data: the summary is never cut, the data
// is cut at a line boundary and says where the rest is.
const textBudget = 6000

// composeText is the text content of a successful answer: the summary, the
// demo-time note, then the key data.
func composeText(summary, note, data string) string {
	parts := []string{}
	if s := strings.TrimRight(summary, "\n"); s != "" {
		parts = append(parts, s)
	}
	if note != "" {
		parts = append(parts, "("+note+")")
	}
	head := strings.Join(parts, "\n")
	if data = strings.TrimSpace(data); data != "" {
		if head == "" {
			return data
		}
		return head + "\n\n" + data
	}
	return head
}

// appendText adds the note and the data to a result's first text content
// (or a new one) without touching structuredContent.
func appendText(res *mcp.CallToolResult, note, data string) {
	if res == nil || res.IsError || (note == "" && strings.TrimSpace(data) == "") {
		return
	}
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			tc.Text = composeText(tc.Text, note, data)
			return
		}
	}
	res.Content = append(res.Content, &mcp.TextContent{Text: composeText("", note, data)})
}

// RenderData renders an output value as compact text: scalar fields as
// "key: value", lists of records one record a line, nested records
// inline. It is the default Tool.Text.
func RenderData(out any) string {
	raw, err := json.Marshal(out)
	if err != nil {
		return ""
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return ""
	}
	var b strings.Builder
	renderBlock(&b, "", v)
	return truncateLines(b.String(), textBudget)
}

// renderBlock writes a top-level value: records field by field, lists item
// by item.
func renderBlock(b *strings.Builder, indent string, v any) {
	switch x := v.(type) {
	case map[string]any:
		for _, k := range sortedKeys(x) {
			val := x[k]
			if isEmpty(val) {
				continue
			}
			switch y := val.(type) {
			case []any:
				fmt.Fprintf(b, "%s%s (%d):\n", indent, k, len(y))
				for _, item := range y {
					fmt.Fprintf(b, "%s- %s\n", indent, inline(item, 400))
				}
			default:
				fmt.Fprintf(b, "%s%s: %s\n", indent, k, inline(val, 400))
			}
		}
	case []any:
		for _, item := range x {
			fmt.Fprintf(b, "%s- %s\n", indent, inline(item, 400))
		}
	default:
		fmt.Fprintf(b, "%s%s\n", indent, inline(v, 400))
	}
}

// inline renders a value on one line, at most max bytes; a record at the
// start of a line goes without braces.
func inline(v any, max int) string { return inlineAt(v, max, false) }

func inlineAt(v any, max int, nested bool) string {
	var s string
	switch x := v.(type) {
	case map[string]any:
		parts := make([]string, 0, len(x))
		for _, k := range sortedKeys(x) {
			if isEmpty(x[k]) {
				continue
			}
			parts = append(parts, k+"="+inlineAt(x[k], max, true))
		}
		s = strings.Join(parts, ", ")
		if nested {
			s = "{" + s + "}"
		}
	case []any:
		parts := make([]string, len(x))
		for i, item := range x {
			parts[i] = inlineAt(item, max, true)
		}
		s = "[" + strings.Join(parts, ", ") + "]"
	case string:
		s = x
	case float64:
		s = fmt.Sprint(x)
	case nil:
		s = "null"
	default:
		s = fmt.Sprint(x)
	}
	if len(s) > max {
		cut := max
		for cut > 0 && s[cut]&0xC0 == 0x80 { // not inside a UTF-8 sequence
			cut--
		}
		s = s[:cut] + "…"
	}
	return s
}

func isEmpty(v any) bool {
	switch x := v.(type) {
	case nil:
		return true
	case string:
		return x == ""
	case []any:
		return len(x) == 0
	case map[string]any:
		return len(x) == 0
	}
	return false
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// truncateLines cuts s at the last line that fits in max bytes.
func truncateLines(s string, max int) string {
	if len(s) <= max {
		return s
	}
	cut := strings.LastIndexByte(s[:max], '\n')
	if cut < 0 {
		cut = max
	}
	return s[:cut] + fmt.Sprintf("\n… (%d more bytes; structuredContent has everything)", len(s)-cut)
}
