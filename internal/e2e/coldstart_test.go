package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// BenchmarkColdStart measures, per agent, spawn to the tools/list answer
// (median of 20 runs) and resident memory right after it. The baseline in
// the same run is the same binary asked for --version: process start and
// the Go runtime, without the MCP handshake. The aim is under 30 ms
// and 30 MiB per agent.
func BenchmarkColdStart(b *testing.B) {
	home := b.TempDir()
	for _, name := range agentNames() {
		b.Run(name, func(b *testing.B) {
			const runs = 20
			var starts, bases []time.Duration
			var rss []float64
			for i := 0; i < b.N; i++ {
				for r := 0; r < runs; r++ {
					d, mem := coldStart(b, name, home)
					starts = append(starts, d)
					rss = append(rss, mem)
					bases = append(bases, versionStart(b, name))
				}
			}
			ms := float64(median(starts).Microseconds()) / 1000
			base := float64(median(bases).Microseconds()) / 1000
			b.ReportMetric(ms, "ms/tools_list")
			b.ReportMetric(base, "ms/exec_baseline")
			b.ReportMetric(ms/base, "x_baseline")
			sort.Float64s(rss)
			b.ReportMetric(rss[len(rss)/2], "MiB_rss")
		})
	}
}

func agentNames() []string {
	var out []string
	entries, _ := os.ReadDir(binDir)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "dw-") {
			out = append(out, e.Name())
		}
	}
	sort.Strings(out)
	return out
}

func coldStart(b *testing.B, name, home string) (time.Duration, float64) {
	b.Helper()
	cmd := exec.Command(filepath.Join(binDir, name))
	cmd.Env = []string{"DW_HOME=" + home, "HOME=" + home, "DW_CONFIG=" + filepath.Join(home, "none.yaml")}
	os.WriteFile(filepath.Join(home, "none.yaml"), nil, 0o644)
	ctx := context.Background()
	start := time.Now()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench"}, nil).Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := cs.ListTools(ctx, nil); err != nil {
		b.Fatal(err)
	}
	d := time.Since(start)
	mem := rssMiB(cmd.Process.Pid)
	cs.Close()
	return d, mem
}

func versionStart(b *testing.B, name string) time.Duration {
	start := time.Now()
	if err := exec.Command(filepath.Join(binDir, name), "--version").Run(); err != nil {
		b.Fatal(err)
	}
	return time.Since(start)
}

// rssMiB reads a process's resident set from /proc.
func rssMiB(pid int) float64 {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(line, "VmRSS:") {
			f := strings.Fields(line)
			kb, _ := strconv.ParseFloat(f[1], 64)
			return kb / 1024
		}
	}
	return 0
}

func median(ds []time.Duration) time.Duration {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}
