package benchmcp

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// Mem is a process tree's memory: resident set (VmRSS, which counts a
// binary's pages in every process mapping it) and proportional set (Pss,
// which shares them out, so the sum over processes is what they cost the
// machine together).
type Mem struct {
	Procs  int
	RSSMiB float64
	PSSMiB float64
	// AnonMiB is the resident memory no other process can share (heap,
	// stacks): RssAnon, what a process costs beyond its binary's pages.
	AnonMiB float64
}

// Add sums two trees.
func (m Mem) Add(o Mem) Mem {
	return Mem{Procs: m.Procs + o.Procs, RSSMiB: m.RSSMiB + o.RSSMiB, PSSMiB: m.PSSMiB + o.PSSMiB, AnonMiB: m.AnonMiB + o.AnonMiB}
}

func (m Mem) String() string {
	return fmt.Sprintf("%.0f MiB PSS (%.0f MiB RSS, %.0f MiB of it anonymous; %d processes)", m.PSSMiB, m.RSSMiB, m.AnonMiB, m.Procs)
}

// TreeMem reads the memory of pid and every process descended from it
// (an agent and its warehouse child), from /proc; zero where there is no
// /proc.
func TreeMem(pid int) Mem {
	var m Mem
	for _, p := range append([]int{pid}, Descendants(pid)...) {
		m = m.Add(ProcMem(p))
	}
	return m
}

// ProcMem reads one process's VmRSS, RssAnon and Pss.
func ProcMem(pid int) Mem {
	m := Mem{RSSMiB: RSSMiB(pid)}
	if m.RSSMiB == 0 {
		return Mem{}
	}
	m.Procs = 1
	m.AnonMiB = procField(fmt.Sprintf("/proc/%d/status", pid), "RssAnon:")
	m.PSSMiB = procField(fmt.Sprintf("/proc/%d/smaps_rollup", pid), "Pss:")
	return m
}

// procField reads a "Name:   123 kB" line of a /proc file, in MiB.
func procField(path, name string) float64 {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, name); ok {
			if f := strings.Fields(rest); len(f) > 0 {
				kb, _ := strconv.ParseFloat(f[0], 64)
				return kb / 1024
			}
		}
	}
	return 0
}

// PeakRSS clears the peak resident set (VmHWM) of pid and of every
// process below it, and returns a func that reads their peaks since then,
// summed. It replaces sampling memory while a call runs: reading a busy
// process's smaps_rollup every 50 ms walks its page tables under its
// memory map's lock, and slowed the whole-table quality check it measured
// by 8% (2.59 s → 2.80 s on a warehouse child, same run). The kernel keeps
// the peak for free and exactly, where a sample could fall either side of
// it. The sum adds peaks that may come at different moments, so it is at
// least the tree's peak together (an agent's own is small beside its
// child's); a process that starts later counts from its start, one that
// exits before the read is not counted. Zero where there is no /proc; a
// kernel that cannot reset the peak (before Linux 4.0) fails the
// benchmark rather than report a peak from before the call.
func PeakRSS(tb testing.TB, pid int) func() float64 {
	tb.Helper()
	if _, err := os.Stat("/proc/self/status"); err != nil {
		return func() float64 { return 0 }
	}
	for _, p := range append([]int{pid}, Descendants(pid)...) {
		// "5" resets the peak to the current resident set (Linux 4.0+).
		err := os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", p), []byte("5"), 0)
		if err != nil && !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ESRCH) {
			tb.Fatalf("reset the peak resident set of process %d (needs Linux 4.0 or later): %v", p, err)
		} // else it has exited since Descendants listed it
	}
	return func() float64 {
		var sum float64
		for _, p := range append([]int{pid}, Descendants(pid)...) {
			sum += procField(fmt.Sprintf("/proc/%d/status", p), "VmHWM:")
		}
		return sum
	}
}

// Descendants lists the processes below pid, children first.
func Descendants(pid int) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	children := map[int][]int{}
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		data, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// The command name in parentheses may hold spaces: the parent
		// pid is the second field after its closing parenthesis.
		s := string(data)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(f) < 2 {
			continue
		}
		if pp, err := strconv.Atoi(f[1]); err == nil {
			children[pp] = append(children[pp], p)
		}
	}
	var out []int
	queue := []int{pid}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		out = append(out, children[p]...)
		queue = append(queue, children[p]...)
	}
	return out
}

// Pid is the agent's process id.
func (a *Agent) Pid() int { return a.cmd.Process.Pid }
