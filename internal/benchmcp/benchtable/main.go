// Command benchtable prints the summary table of `make bench`: every row
// of issue 18 with its goal, the rows the end-to-end benchmarks recorded
// (benchmcp.TableEnv) under it, and "not measured" with the reason for the
// rest. Usage: go run ./internal/benchmcp/benchtable FILE
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/dataworkers/dw/internal/benchmcp"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: benchtable FILE (the rows the benchmarks wrote to $"+benchmcp.TableEnv+")")
		os.Exit(2)
	}
	rows, err := read(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchtable:", err)
		os.Exit(1)
	}
	// A developer command run by `make bench`, not an MCP server: the
	// table is its output, so it goes to stdout.
	write(os.Stdout, rows)
}

func read(path string) (map[string][]benchmcp.Line, error) {
	out := map[string][]benchmcp.Line{}
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return out, nil // no end-to-end benchmark ran
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	for sc.Scan() {
		var l benchmcp.Line
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		out[l.Key] = append(out[l.Key], l)
	}
	return out, sc.Err()
}

func write(w io.Writer, rows map[string][]benchmcp.Line) {
	load := ""
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		load = string(b[:len(b)-1])
	}
	fmt.Fprintf(w, "\nEnd to end through MCP (issue 18), ratios to the floor in the same run; load average %s\n\n", load)
	fmt.Fprintln(w, "| what | through MCP (median, min) | floor (median, min) | ratio (min/median) | memory (RSS) | goal | met? |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|")
	for _, g := range benchmcp.Goals {
		got := rows[g.Key]
		if len(got) == 0 {
			why := g.Missing
			if why == "" {
				why = "its benchmark did not run or did not finish"
			}
			fmt.Fprintf(w, "| %s | not measured: %s | | | | %s | |\n", g.What, why, g.Text)
			continue
		}
		for _, l := range got {
			met := g.Ratio > 0 && l.RatioMedian <= g.Ratio
			if l.Met != nil {
				met = *l.Met
			}
			mark := "no"
			if met {
				mark = "yes"
			}
			if g.Ratio == 0 && l.Met == nil {
				mark = "see note"
			}
			if l.FloorMedian == 0 { // a row without a floor (memory): no ratio
				fmt.Fprintf(w, "| %s | %.1f ms, %.1f ms | | | %s | %s | %s |\n", l.What, l.ProductMedian, l.ProductMin, mib(l.RSSMiB), g.Text, mark)
				continue
			}
			fmt.Fprintf(w, "| %s | %.1f ms, %.1f ms | %.1f ms, %.1f ms | %.2f/%.2f× | %s | %s | %s |\n",
				l.What, l.ProductMedian, l.ProductMin, l.FloorMedian, l.FloorMin, l.RatioMin, l.RatioMedian, mib(l.RSSMiB), g.Text, mark)
		}
	}
	known := map[string]bool{}
	for _, g := range benchmcp.Goals {
		known[g.Key] = true
	}
	for key, ls := range rows {
		if !known[key] {
			for _, l := range ls {
				fmt.Fprintf(w, "| %s | %.1f ms, %.1f ms | %.1f ms, %.1f ms | %.2f/%.2f× | %s | (no goal) | |\n",
					l.What, l.ProductMedian, l.ProductMin, l.FloorMedian, l.FloorMin, l.RatioMin, l.RatioMedian, mib(l.RSSMiB))
			}
		}
	}
	for _, g := range benchmcp.Goals {
		for _, l := range rows[g.Key] {
			if l.Note != "" {
				fmt.Fprintf(w, "\n%s: %s", l.What, l.Note)
			}
		}
	}
	fmt.Fprintln(w)
}

// mib is a row's memory: what its benchmark measured (the agent, with its
// warehouse child where it has one, as the row's note says), blank when
// none was.
func mib(v float64) string {
	if v <= 0 {
		return ""
	}
	return fmt.Sprintf("%.0f MiB", v)
}
