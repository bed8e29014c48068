package warehouseproc

import (
	"context"
	"os/exec"
	"testing"
	"time"

	"github.com/dataworkers/dw/internal/warehouse"
)

// A call cancelled mid-query (its MCP client went away, or the agent got
// SIGTERM) ends the child process, so the query stops burning CPU instead
// of running on to its own timeout.
func TestCancelledQueryKillsTheChild(t *testing.T) {
	p := proxy(t)
	var child *exec.Cmd
	inner := Command
	Command = func(name, kind string) (*exec.Cmd, error) {
		cmd, err := inner(name, kind)
		child = cmd
		return cmd, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := p.Query(ctx, warehouse.Query{SQL: `SELECT sum(hash(i)) FROM range(100000000000) t(i)`})
	if err == nil {
		t.Fatal("a query of 1e11 rows finished within 300ms")
	}
	if el := time.Since(start); el > 2*time.Second {
		t.Errorf("cancelled query returned after %v", el)
	}
	if child == nil || child.ProcessState == nil {
		t.Fatal("the child process was not reaped after cancellation")
	}
	if child.ProcessState.Success() {
		t.Errorf("child exited normally (%v); want it killed", child.ProcessState)
	}
}
