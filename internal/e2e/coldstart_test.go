package e2e

import (
	"bufio"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
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

// coldStart spawns the agent and speaks raw JSON-RPC over its stdio, so
// the time is the server's alone (an SDK client would add its own schema
// processing of the answer): initialize, then tools/list, until the
// tools/list answer arrives.
func coldStart(b *testing.B, name, home string) (time.Duration, float64) {
	b.Helper()
	cmd := exec.Command(filepath.Join(binDir, name))
	cmd.Env = []string{"DW_HOME=" + home, "HOME=" + home, "DW_CONFIG=" + filepath.Join(home, "none.yaml")}
	os.WriteFile(filepath.Join(home, "none.yaml"), nil, 0o644)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	send := func(line string) {
		if _, err := io.WriteString(stdin, line+"\n"); err != nil {
			b.Fatal(err)
		}
	}
	waitFor := func(id string) {
		for sc.Scan() {
			if strings.Contains(sc.Text(), `"id":`+id+`,`) || strings.HasSuffix(sc.Text(), `"id":`+id+`}`) {
				return
			}
		}
		b.Fatalf("%s: no answer to request %s", name, id)
	}
	send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}`)
	waitFor("1")
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	send(`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
	waitFor("2")
	d := time.Since(start)
	mem := rssMiB(cmd.Process.Pid)
	stdin.Close()
	_ = cmd.Wait()
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
