// Package benchmcp measures the agents the way an MCP client feels them:
// a built agent binary, spawned once and kept warm, driven over stdio by
// the go-sdk client, many calls in a row. Every row it reports puts the
// product's time next to a floor measured in the same run on the same
// data (the plainest code that answers the same question in-process), so
// the ratio, not the machine, is what a goal is set against. It is used
// only by benchmarks (make bench); no test asserts on a time.
package benchmcp

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/dataworkers/dw/agents"
)

// BinDirEnv names prebuilt binaries to measure instead of building this
// tree's, e.g. a checkout of an earlier commit, for before/after figures.
const BinDirEnv = "DW_BENCH_BIN_DIR"

// BuildFlags are the flags start-agent.sh builds every binary with (so
// make bench measures what a client runs): paths trimmed, the symbol
// table and DWARF left out and, on Linux, the C++ symbols of the DuckDB
// archive kept out of the dynamic symbol table. BinDir and the cold-start
// floor use them too.
var BuildFlags = buildFlags()

func buildFlags() []string {
	ld := "-ldflags=-s -w"
	if runtime.GOOS == "linux" {
		ld += " " + excludeLibs
	}
	return []string{"-trimpath", ld}
}

// excludeLibs is start-agent.sh's: see the reason there.
const excludeLibs = "-extldflags=-Wl,--exclude-libs,ALL"

var build struct {
	once sync.Once
	dir  string
	err  error
}

// BinDir builds every command of the module once per process (agents need
// dw beside them for the warehouse child) and returns their directory.
func BinDir(tb testing.TB) string {
	tb.Helper()
	if d := os.Getenv(BinDirEnv); d != "" {
		return d
	}
	build.once.Do(func() {
		root, err := moduleRoot()
		if err != nil {
			build.err = err
			return
		}
		dir, err := os.MkdirTemp("", "dw-benchmcp-bin-")
		if err != nil {
			build.err = err
			return
		}
		args := append([]string{"build"}, BuildFlags...)
		cmd := exec.Command("go", append(args, "-o", dir+string(os.PathSeparator), "./cmd/...")...)
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			build.err = fmt.Errorf("go build ./cmd/...: %v\n%s", err, out)
			return
		}
		// The agents' names, as make build installs them.
		if build.err = agents.Install(dir); build.err != nil {
			return
		}
		build.dir = dir
	})
	if build.err != nil {
		tb.Fatal(build.err)
	}
	return build.dir
}

func moduleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", err
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", fmt.Errorf("not inside the module")
	}
	return filepath.Dir(mod), nil
}

// Agent is one running agent process with a connected client session.
type Agent struct {
	Name    string
	cmd     *exec.Cmd
	session *mcp.ClientSession
}

// Start spawns the named agent from BinDir with env added to this
// process's environment, and completes the MCP handshake. The agent's
// stderr (its logs) is discarded unless DW_BENCH_STDERR is set.
func Start(tb testing.TB, name string, env ...string) *Agent {
	tb.Helper()
	return StartBin(tb, filepath.Join(BinDir(tb), name), env...)
}

// StartBin is Start for a binary given by its path.
func StartBin(tb testing.TB, bin string, env ...string) *Agent {
	tb.Helper()
	name := filepath.Base(bin)
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stderr = io.Discard
	if os.Getenv("DW_BENCH_STDERR") != "" {
		cmd.Stderr = os.Stderr
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "dw-benchmcp", Version: "1"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		tb.Fatalf("start %s: %v", name, err)
	}
	a := &Agent{Name: name, cmd: cmd, session: cs}
	tb.Cleanup(func() { a.session.Close() })
	return a
}

// Call makes one tool call and returns its structured answer (decoded into
// out when out is not nil) and the wall time from request to answer. A
// tool error fails the benchmark: a fast wrong answer measures nothing.
func (a *Agent) Call(tb testing.TB, tool string, args map[string]any, out any) time.Duration {
	tb.Helper()
	res, d := a.CallResult(tb, tool, args)
	if out != nil {
		raw, err := json.Marshal(res.StructuredContent)
		if err != nil {
			tb.Fatal(err)
		}
		if err := json.Unmarshal(raw, out); err != nil {
			tb.Fatalf("%s %s: structured answer: %v", a.Name, tool, err)
		}
	}
	return d
}

// CallResult is Call returning the whole result as the client decoded it.
func (a *Agent) CallResult(tb testing.TB, tool string, args map[string]any) (*mcp.CallToolResult, time.Duration) {
	tb.Helper()
	t0 := time.Now()
	res, err := a.session.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: args})
	d := time.Since(t0)
	if err != nil {
		tb.Fatalf("%s %s: %v", a.Name, tool, err)
	}
	if res.IsError {
		var msg strings.Builder
		for _, c := range res.Content {
			if t, ok := c.(*mcp.TextContent); ok {
				msg.WriteString(t.Text)
			}
		}
		tb.Fatalf("%s %s answered an error: %s", a.Name, tool, msg.String())
	}
	return res, d
}

// RSSMiB is the agent process's resident memory now, from /proc (0 where
// there is no /proc).
func (a *Agent) RSSMiB() float64 { return RSSMiB(a.cmd.Process.Pid) }

// RSSMiB reads a process's VmRSS.
func RSSMiB(pid int) float64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			f := strings.Fields(rest)
			if len(f) > 0 {
				kb, _ := strconv.ParseFloat(f[0], 64)
				return kb / 1024
			}
		}
	}
	return 0
}

// Row is one line of the end-to-end table: what was measured, the
// product's per-call times through MCP, the floor's times in the same run,
// and the agent's memory after the calls.
type Row struct {
	// Key names the row of issue 18's table this measures (see Goals), so
	// the summary table can put it under its goal.
	Key     string
	What    string
	Product []time.Duration
	Floor   []time.Duration
	RSSMiB  float64
	Note    string
	// Met, when set, overrides the plain "median ratio within the goal"
	// judgement (e.g. a goal that also asks for flat times).
	Met *bool
}

func med(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

// Ratios are the product's min over the floor's min and the product's
// median over the floor's median.
// A row without a floor (memory) has no ratio: both are 0.
func (r Row) Ratios() (minRatio, medRatio float64) {
	if len(r.Floor) == 0 || len(r.Product) == 0 {
		return 0, 0
	}
	return float64(slices.Min(r.Product)) / float64(slices.Min(r.Floor)),
		float64(med(r.Product)) / float64(med(r.Floor))
}

// Report writes the row as a table line on the benchmark's log and as
// metrics (ms/call, floor-ms, x-floor-min, x-floor-median, MiB-rss).
func (r Row) Report(b *testing.B) {
	b.Helper()
	lo, mid := r.Ratios()
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	b.ReportMetric(ms(med(r.Product)), "ms/call")
	b.ReportMetric(r.RSSMiB, "MiB-rss")
	if len(r.Floor) > 0 {
		b.ReportMetric(ms(med(r.Floor)), "floor-ms")
		b.ReportMetric(lo, "x-floor-min")
		b.ReportMetric(mid, "x-floor-median")
	}
	r.Log(b)
}

// Log writes the row as a table line on the benchmark's log and in the
// summary table, without metrics: for a benchmark's second row, whose
// metrics would overwrite its first's.
func (r Row) Log(b *testing.B) {
	b.Helper()
	lo, mid := r.Ratios()
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	if err := r.record(); err != nil {
		b.Logf("summary table: %v", err)
	}
	if len(r.Floor) == 0 {
		b.Logf("\n| what | through MCP (median, min) | RSS |\n|---|---|---|\n| %s | %.1f ms, %.1f ms | %.0f MiB |%s",
			r.What, ms(med(r.Product)), ms(slices.Min(r.Product)), r.RSSMiB, noteLine(r.Note))
		return
	}
	b.Logf("\n| what | through MCP (median, min) | floor (median, min) | ratio (min/median) | RSS |\n|---|---|---|---|---|\n| %s | %.1f ms, %.1f ms | %.1f ms, %.1f ms | %.2f/%.2f× | %.0f MiB |%s",
		r.What, ms(med(r.Product)), ms(slices.Min(r.Product)), ms(med(r.Floor)), ms(slices.Min(r.Floor)), lo, mid, r.RSSMiB, noteLine(r.Note))
}

func noteLine(n string) string {
	if n == "" {
		return ""
	}
	return "\n" + n
}

// TableEnv names a file each Report appends its row to as one JSON line;
// `make bench` sets it and prints the summary table from it at the end
// (go run ./internal/benchmcp/benchtable FILE).
const TableEnv = "DW_BENCH_TABLE"

// Line is a row as written to the TableEnv file.
type Line struct {
	Key           string  `json:"key"`
	What          string  `json:"what"`
	ProductMedian float64 `json:"product_ms_median"`
	ProductMin    float64 `json:"product_ms_min"`
	FloorMedian   float64 `json:"floor_ms_median"`
	FloorMin      float64 `json:"floor_ms_min"`
	RatioMin      float64 `json:"ratio_min"`
	RatioMedian   float64 `json:"ratio_median"`
	RSSMiB        float64 `json:"rss_mib"`
	Note          string  `json:"note,omitempty"`
	Met           *bool   `json:"met,omitempty"`
}

func (r Row) record() error {
	path := os.Getenv(TableEnv)
	if path == "" || len(r.Product) == 0 {
		return nil
	}
	lo, mid := r.Ratios()
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	l := Line{Key: r.Key, What: r.What,
		ProductMedian: ms(med(r.Product)), ProductMin: ms(slices.Min(r.Product)),
		RatioMin: lo, RatioMedian: mid, RSSMiB: r.RSSMiB, Note: r.Note, Met: r.Met}
	if len(r.Floor) > 0 {
		l.FloorMedian, l.FloorMin = ms(med(r.Floor)), ms(slices.Min(r.Floor))
	}
	line, err := json.Marshal(l)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(append(line, '\n')); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
