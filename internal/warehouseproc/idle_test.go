package warehouseproc

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dataworkers/dw/internal/warehouse"
	"github.com/dataworkers/dw/internal/warehouse/bigquery"
)

// waitChildExit waits until the proxy's current child has exited on its
// own, and fails if it has not within a generous bound.
func waitChildExit(t *testing.T, p *Proxy) {
	t.Helper()
	p.mu.Lock()
	if p.cmd == nil {
		p.mu.Unlock()
		t.Fatal("no child is running")
	}
	done := p.done
	p.mu.Unlock()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the child was still running 30 s after its idle period")
	}
	// The exit was the proxy's doing, not a crash: it has forgotten the
	// child, so the next call starts another.
	deadline := time.Now().Add(5 * time.Second)
	for {
		p.mu.Lock()
		gone := p.cmd == nil
		p.mu.Unlock()
		if gone {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the child exited but the proxy still holds it")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestIdleChildExitsAndComesBack: a child with no call for its idle period
// exits; the next call starts another and answers as the first did; and
// the BigQuery session budget is carried over every idle restart, so
// releasing the child never resets what the session may still scan.
func TestIdleChildExitsAndComesBack(t *testing.T) {
	t.Setenv(IdleEnv, "200ms")
	for _, s := range subjects(t) {
		if s.starts == nil || s.killed {
			continue
		}
		t.Run(s.name, func(t *testing.T) {
			ctx := context.Background()
			p := s.w.(*Proxy)
			if p.idle != 200*time.Millisecond {
				t.Fatalf("idle = %s, want the %s of %s", p.idle, "200ms", IdleEnv)
			}
			q := warehouse.Query{SQL: "SELECT 1", Agent: "dw-quality", Tool: "t"}
			if s.kind == "duckdb" {
				q.SQL = "SELECT count(*) FROM s.t"
			}
			first, err := s.w.Query(ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			waitChildExit(t, p)
			again, err := s.w.Query(ctx, q)
			if err != nil {
				t.Fatalf("first call after the idle exit: %v", err)
			}
			if len(again.Rows) != 1 || again.Rows[0][0] != first.Rows[0][0] {
				t.Fatalf("after the restart: %v, before: %v", again.Rows, first.Rows)
			}
			if *s.starts != 2 {
				t.Fatalf("%d children started; want 2 (one idle exit)", *s.starts)
			}
			if s.bq == nil {
				return
			}
			// 100 B per statement against a 350 B session: two ran, the
			// third fits after one more idle restart, the fourth does not.
			waitChildExit(t, p)
			if _, err := s.w.Query(ctx, q); err != nil {
				t.Fatalf("third statement (300 B of 350): %v", err)
			}
			waitChildExit(t, p)
			_, err = s.w.Query(ctx, q)
			var be *bigquery.BudgetError
			if !errors.As(err, &be) || !be.Session || be.Used != 300 || be.Budget != 350 {
				t.Fatalf("fourth statement after idle restarts: want a session BudgetError with 300 B used, got %#v (%v)", be, err)
			}
			if *s.starts != 4 {
				t.Errorf("%d children started; want 4", *s.starts)
			}
		})
	}
}

// TestIdleZeroKeepsTheChild: 0 turns the idle exit off.
func TestIdleZeroKeepsTheChild(t *testing.T) {
	t.Setenv(IdleEnv, "0")
	p := proxy(t)
	if _, err := p.ListTables(context.Background()); err != nil {
		t.Fatal(err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.idle != 0 || p.idleTimer != nil || p.cmd == nil {
		t.Fatalf("idle %s, timer %v, child %v: with %s=0 the child stays and no timer runs", p.idle, p.idleTimer, p.cmd, IdleEnv)
	}
}

// TestIdleFromEnv: the default, valid periods, and a clear refusal of
// anything else.
func TestIdleFromEnv(t *testing.T) {
	for v, want := range map[string]time.Duration{"": DefaultIdle, " ": DefaultIdle, "0": 0, "90s": 90 * time.Second, " 5m ": 5 * time.Minute} {
		if got, err := IdleFromEnv(v); err != nil || got != want {
			t.Errorf("IdleFromEnv(%q) = %s, %v; want %s", v, got, err, want)
		}
	}
	for _, v := range []string{"60", "-1s", "soon", "1h-"} {
		_, err := IdleFromEnv(v)
		if err == nil || !strings.Contains(err.Error(), IdleEnv) || !strings.Contains(err.Error(), "60s") {
			t.Errorf("IdleFromEnv(%q) = %v; want an error naming %s and a valid example", v, err, IdleEnv)
		}
	}
}
