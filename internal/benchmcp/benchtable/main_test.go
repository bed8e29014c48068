package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/dataworkers/dw/internal/benchmcp"
)

// cells parses the summary table into its rows, each a map from column
// header to cell.
func cells(t *testing.T, out string) []map[string]string {
	t.Helper()
	var header []string
	var rows []map[string]string
	for _, line := range strings.Split(out, "\n") {
		if !strings.HasPrefix(line, "|") {
			continue
		}
		parts := strings.Split(strings.Trim(line, "|"), "|")
		for i := range parts {
			parts[i] = strings.TrimSpace(parts[i])
		}
		switch {
		case header == nil:
			header = parts
		case strings.HasPrefix(parts[0], "---"):
		default:
			if len(parts) != len(header) {
				t.Fatalf("a row of %d cells under %d headers: %q", len(parts), len(header), line)
			}
			row := map[string]string{}
			for i, h := range header {
				row[h] = parts[i]
			}
			rows = append(rows, row)
		}
	}
	return rows
}

func TestTableShowsMemoryAndJudgesByMet(t *testing.T) {
	no := false
	rows := map[string][]benchmcp.Line{
		"quality": {{Key: "quality", What: "one day", ProductMedian: 120, ProductMin: 100, FloorMedian: 100, FloorMin: 90,
			RatioMin: 1.1, RatioMedian: 1.2, RSSMiB: 923.4}},
		// Within the wall-time ratio, but its benchmark judged it (on CPU) a miss.
		"coldstart": {{Key: "coldstart", What: "cold start: dw-schema", ProductMedian: 8, ProductMin: 6, FloorMedian: 5, FloorMin: 4,
			RatioMin: 1.5, RatioMedian: 1.6, RSSMiB: 18, Met: &no}},
	}
	var buf bytes.Buffer
	write(&buf, rows)
	byWhat := map[string]map[string]string{}
	for _, r := range cells(t, buf.String()) {
		byWhat[r["what"]] = r
	}
	q := byWhat["one day"]
	if q == nil || q["memory (RSS)"] != "923 MiB" || q["met?"] != "yes" {
		t.Fatalf("quality row: %v", q)
	}
	if c := byWhat["cold start: dw-schema"]; c == nil || c["met?"] != "no" || c["memory (RSS)"] != "18 MiB" {
		t.Fatalf("cold-start row: %v", c)
	}
	// Every goal has a line: one not measured says so.
	var import_ map[string]string
	for _, g := range benchmcp.Goals {
		if g.Key == "import" {
			import_ = byWhat[g.What]
		}
	}
	if import_ == nil || !strings.HasPrefix(import_["through MCP (median, min)"], "not measured") || import_["memory (RSS)"] != "" {
		t.Fatalf("unmeasured import row: %v", import_)
	}
}
