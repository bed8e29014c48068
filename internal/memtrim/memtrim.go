// Package memtrim gives a quiet process's free heap back: the agents
// between calls and the warehouse child between requests. Both stay up
// between bursts (an MCP client keeps agents for the session; a child
// outlives its last call by DW_WAREHOUSE_IDLE so the next call does not
// pay for a new process), and the Go runtime's scavenger returns the heap
// a burst freed only slowly; debug.FreeOSMemory returns it at once.
//
// The binary's clean pages are left alone on purpose. Dropping them from
// the page tables (MADV_DONTNEED) was tried: it lowers a quiet child's
// PSS by most of the 90 MiB of the dw binary it maps, but the pages stay
// in the page cache (and in a container's memory charge), so the machine
// saves nothing, and the next call pays to map them again (a quality
// check on a quiet child 305 -> 418 ms median). It moved the figure, not
// the cost.
//
// Measured by internal/benchmcp BenchmarkE2EFiveAgentsMemory.
package memtrim

import (
	"runtime/debug"
	"sync"
	"time"
)

// After is how long a process must be quiet before it is trimmed: past
// the gaps between a conversation's calls (a model reading an answer and
// choosing the next call), so a burst's calls do not pay for a heap the
// runtime has just given back, and past the DuckDB driver's linger (one
// second, after which the engine's memory is already free).
const After = 10 * time.Second

// Idler trims once no work has run for After. Busy and Quiet bracket each
// piece of work (a tool call, a warehouse request); they may overlap.
type Idler struct {
	mu     sync.Mutex
	active int
	seq    uint64
	timer  *time.Timer
	after  time.Duration
	trim   func()
}

// New returns an Idler that trims the process once quiet for After.
func New() *Idler { return &Idler{after: After, trim: Trim} }

// Busy marks work starting: a pending trim is called off.
func (i *Idler) Busy() {
	i.mu.Lock()
	defer i.mu.Unlock()
	i.active++
	i.seq++
	if i.timer != nil {
		i.timer.Stop()
	}
}

// Quiet marks work done: when none is left the process is trimmed After
// from now, unless work starts first.
func (i *Idler) Quiet() {
	i.mu.Lock()
	defer i.mu.Unlock()
	i.active--
	if i.active > 0 {
		return
	}
	n := i.seq
	i.timer = time.AfterFunc(i.after, func() {
		i.mu.Lock()
		defer i.mu.Unlock()
		if i.seq != n || i.active > 0 {
			return
		}
		i.trim()
	})
}

// Stop calls off a pending trim.
func (i *Idler) Stop() {
	i.mu.Lock()
	defer i.mu.Unlock()
	i.seq++
	if i.timer != nil {
		i.timer.Stop()
	}
}

// Trim returns the Go heap's free pages to the system.
func Trim() { debug.FreeOSMemory() }
