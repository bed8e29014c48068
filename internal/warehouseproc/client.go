package warehouseproc

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/dataworkers/dw/internal/clock"
	"github.com/dataworkers/dw/internal/config"
	"github.com/dataworkers/dw/internal/warehouse"
)

// Command is how an agent starts the child for the warehouse name, of
// kind: a binary installed beside the agent's, where make build
// (start-agent.sh) puts them all. Tests point it elsewhere.
var Command = func(_, kind string) (*exec.Cmd, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	return childIn(filepath.Dir(exe), kind)
}

// childIn is the command that serves a warehouse of kind from the
// binaries in dir: ChildPrefix+kind, which links that kind's driver and
// nothing else a child does not run (a process maps what it links and
// runs every init it links: README, "The warehouse child"). (deps.Sibling
// finds dw the same way; this package does not use it, so that the
// children, which link this package, do not link the store deps opens.)
func childIn(dir, kind string) (*exec.Cmd, error) {
	if !slices.Contains(kinds[:], kind) {
		return nil, fmt.Errorf("no warehouse child serves kind %q; valid: %s", kind, strings.Join(kinds[:], ", "))
	}
	binary := ChildPrefix + kind
	path := filepath.Join(dir, binary)
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("%s warehouses are read by %s, and there is no %s binary in %s: build it (make build, or start-agent.sh builds it)", kind, binary, binary, dir)
	}
	return exec.Command(path), nil
}

// Open returns a warehouse whose driver runs in a child process, started on
// the first call. Every child it starts is opened with wc and cfg's data
// directory and source as the agent loaded them (Opening; dw.yaml names
// secrets only by their variables, so none crosses the pipe). It has the
// shape of warehouses.Open so deps can use either.
func Open(_ context.Context, cfg *config.Config, wc *config.Warehouse, _ clock.Clock) (warehouse.Warehouse, error) {
	var d warehouse.Dialect
	switch wc.Kind {
	case "duckdb":
		d = warehouse.DuckDB{}
	case "bigquery":
		d = warehouse.BigQuery{}
	case "snowflake":
		d = warehouse.Snowflake{}
	default:
		return nil, fmt.Errorf("warehouse %s: unknown kind %q; valid: %s", wc.Name, wc.Kind, strings.Join(kinds[:], ", "))
	}
	idle, err := IdleFromEnv(os.Getenv(IdleEnv))
	if err != nil {
		return nil, err
	}
	return &Proxy{name: wc.Name, kind: wc.Kind, dialect: d, idle: idle, opening: opening(cfg, wc)}, nil
}

// IdleEnv names the idle period after which an agent's warehouse child
// exits; the next call starts a new one. 0 keeps the child for the
// agent's life.
const IdleEnv = "DW_WAREHOUSE_IDLE"

// DefaultIdle is how long a child outlives its last call. The child holds
// the driver (a DuckDB child about 35 MiB resident, most of it its
// binary's pages, which only its exit gives back) for calls that come in
// bursts: a minute keeps a conversation's calls on one child, and an
// agent left open all day holds only itself.
const DefaultIdle = 60 * time.Second

// IdleFromEnv parses the value of IdleEnv; empty is DefaultIdle.
func IdleFromEnv(v string) (time.Duration, error) {
	if strings.TrimSpace(v) == "" {
		return DefaultIdle, nil
	}
	d, err := time.ParseDuration(strings.TrimSpace(v))
	if err != nil || d < 0 {
		return 0, fmt.Errorf("%s=%q is not an idle period: give a duration such as 60s or 5m, or 0 to keep the warehouse process for the agent's life", IdleEnv, v)
	}
	return d, nil
}

// drainAfterExit is how long the answers of a child that has exited are
// still read: its last line is in the pipe already, unless something it
// started holds the pipe open, which must not hold the agent's call.
const drainAfterExit = time.Second

// cancelGrace is how long a cancelled call waits for the child to stop
// the statement itself before the child is killed.
const cancelGrace = 2 * time.Second

// Proxy is a warehouse served by a child process. Calls are serialised: the
// child answers one request at a time.
type Proxy struct {
	name    string
	kind    string
	dialect warehouse.Dialect
	// idle is how long the child outlives its last call (0: forever).
	idle time.Duration
	// opening is the configuration every child is opened with.
	opening Opening

	mu sync.Mutex
	// scanned is the bytes the session has scanned against the driver's
	// budget, as the child last reported it; it outlives the child.
	scanned int64
	// inFlight are the queries whose child was ended before answering;
	// the next child books them as the ended one had.
	inFlight []request
	cmd      *exec.Cmd
	stdin    io.WriteCloser
	stdout   *os.File // the read end of the child's stdout; out scans it
	out      *bufio.Scanner
	done     chan struct{}
	// idleTimer ends the child once idle has passed without a call;
	// calls counts the calls made, so a timer that fired while a call
	// held mu sees that it is stale.
	idleTimer *time.Timer
	calls     uint64
}

// Name is the configured name.
func (p *Proxy) Name() string { return p.name }

// Dialect spells SQL for the engine behind the child.
func (p *Proxy) Dialect() warehouse.Dialect { return p.dialect }

// Close stops the child.
func (p *Proxy) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.idleTimer != nil {
		p.idleTimer.Stop()
	}
	p.stop()
	return nil
}

// armIdle (re)starts the idle countdown after a call; p.mu is held. The
// child is ended between calls, never during one: the timer takes p.mu,
// which a call holds throughout, and gives up if a call came since.
func (p *Proxy) armIdle() {
	p.calls++
	if p.idle <= 0 || p.cmd == nil {
		return
	}
	if p.idleTimer != nil {
		p.idleTimer.Stop()
	}
	n := p.calls
	p.idleTimer = time.AfterFunc(p.idle, func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.calls != n || p.cmd == nil {
			return
		}
		slog.Debug("warehouse process idle: ending it; the next call starts a new one", "warehouse", p.name, "idle", p.idle)
		p.stop()
	})
}

func (p *Proxy) stop() {
	if p.cmd == nil {
		return
	}
	p.stdin.Close()
	select {
	case <-p.done:
	case <-time.After(2 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
	// A reader still in Scan (a call given up on) gets an error; its
	// answer is not waited for.
	p.stdout.Close()
	p.cmd = nil
}

func (p *Proxy) start() error {
	cmd, err := Command(p.name, p.kind)
	if err != nil {
		return err
	}
	cmd.Stderr = os.Stderr
	// The answers come through a pipe this side owns, not StdoutPipe's:
	// Wait closes that one as soon as the child exits, so the answer of a
	// child that answers and exits at once (one that cannot open its
	// warehouse) was lost to "file already closed" about one time in ten.
	// This one is read to its end: EOF once every copy of its write end
	// is closed, which is when the child exits unless a process it
	// started holds one; so once the child is gone, the reader gets
	// drainAfterExit more and the pipe is closed under it.
	stdout, w, err := os.Pipe()
	if err != nil {
		return err
	}
	cmd.Stdout = w
	stdin, err := cmd.StdinPipe()
	if err != nil {
		stdout.Close()
		w.Close()
		return err
	}
	err = cmd.Start()
	w.Close() // the child has its own copy
	if err != nil {
		stdin.Close()
		stdout.Close()
		return fmt.Errorf("start the warehouse process for %s: %w", p.name, err)
	}
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 64<<10), maxLine)
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
		time.AfterFunc(drainAfterExit, func() { stdout.Close() })
	}()
	p.cmd, p.stdin, p.stdout, p.out, p.done = cmd, stdin, stdout, sc, done
	return nil
}

// call sends one request and waits for its answer. A cancelled context
// ends the child, which is started again by the next call; a new child is
// first opened with the agent's configuration and told what the session
// has scanned so far, so a scan budget carries across restarts.
func (p *Proxy) call(ctx context.Context, req request) (*response, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	defer p.armIdle()
	if p.cmd == nil {
		if err := p.start(); err != nil {
			return nil, err
		}
		if _, err := p.exchange(ctx, request{Op: "open", Open: &p.opening}); err != nil {
			p.stop() // a child that cannot open the warehouse ends
			return nil, err
		}
		if p.scanned > 0 || len(p.inFlight) > 0 {
			if _, err := p.exchange(ctx, request{Op: "resume", Scanned: p.scanned, Queries: p.inFlight}); err != nil {
				return nil, err
			}
			p.inFlight = nil
		}
	}
	return p.exchange(ctx, req)
}

// exchange writes one request to the running child and reads its answer;
// p.mu is held. Errors come back as the types the driver returned:
// warehouse.BudgetError and warehouse.ErrRefused cross the pipe as fields.
func (p *Proxy) exchange(ctx context.Context, req request) (*response, error) {
	line, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	if _, err := p.stdin.Write(append(line, '\n')); err != nil {
		p.stop()
		return nil, fmt.Errorf("warehouse process for %s: %w", p.name, err)
	}
	type answer struct {
		resp *response
		err  error
	}
	ch := make(chan answer, 1)
	go func() {
		if !p.out.Scan() {
			err := p.out.Err()
			if err == nil {
				err = errors.New("the warehouse process exited (its stderr is in this agent's log)")
			}
			ch <- answer{err: err}
			return
		}
		var r response
		if err := json.Unmarshal(p.out.Bytes(), &r); err != nil {
			ch <- answer{err: err}
			return
		}
		ch <- answer{resp: &r}
	}()
	select {
	case a := <-ch:
		if a.err != nil {
			p.stop()
			return nil, fmt.Errorf("warehouse %s: %w", p.name, a.err)
		}
		p.scanned = max(p.scanned, a.resp.Scanned)
		if a.resp.Budget != nil {
			return nil, a.resp.Budget
		}
		if a.resp.Refused {
			return nil, warehouse.Refused("%s", a.resp.Error)
		}
		if a.resp.Error != "" {
			return nil, errors.New(a.resp.Error)
		}
		return a.resp, nil
	case <-ctx.Done():
		// Ask the child to stop the call: the child cancels its
		// driver's context on SIGINT, so BigQuery cancels the job server-side
		// (it would run on, and bill, after a kill) and DuckDB interrupts.
		// Give it a moment to answer, then kill it. Either way the child is
		// ended; a query that did not answer is booked by the next child.
		_ = p.cmd.Process.Signal(os.Interrupt)
		select {
		case a := <-ch:
			if a.err == nil {
				p.scanned = max(p.scanned, a.resp.Scanned)
			} else if req.Op == "query" {
				p.inFlight = append(p.inFlight, req)
			}
		case <-time.After(cancelGrace):
			if req.Op == "query" {
				p.inFlight = append(p.inFlight, req)
			}
			_ = p.cmd.Process.Kill()
			<-ch
		}
		p.stop()
		return nil, fmt.Errorf("warehouse %s: %w", p.name, ctx.Err())
	}
}

// Query runs one read-only statement in the child.
func (p *Proxy) Query(ctx context.Context, q warehouse.Query) (*warehouse.Result, error) {
	req, err := queryRequest(q)
	if err != nil {
		return nil, err
	}
	resp, err := p.call(ctx, req)
	if err != nil {
		return nil, err
	}
	res := &warehouse.Result{Columns: resp.Columns, BytesScanned: resp.BytesScanned, Rows: make([][]any, len(resp.Rows))}
	for i, row := range resp.Rows {
		vals := make([]any, len(row))
		for j, c := range row {
			if vals[j], err = c.decode(); err != nil {
				return nil, err
			}
		}
		res.Rows[i] = vals
	}
	return res, nil
}

// ValidateQuery has the child's driver judge sqlText without running it.
func (p *Proxy) ValidateQuery(ctx context.Context, sqlText string) error {
	_, err := p.call(ctx, request{Op: "validate", SQL: sqlText})
	return err
}

// ListTables lists the warehouse's tables through the child.
func (p *Proxy) ListTables(ctx context.Context) ([]warehouse.TableRef, error) {
	resp, err := p.call(ctx, request{Op: "list"})
	if err != nil {
		return nil, err
	}
	return resp.Tables, nil
}

// Describe reads a table's columns through the child.
func (p *Proxy) Describe(ctx context.Context, t warehouse.TableRef) (*warehouse.Table, error) {
	resp, err := p.call(ctx, request{Op: "describe", Table: &t})
	if err != nil {
		return nil, err
	}
	if resp.Described == nil {
		return nil, fmt.Errorf("warehouse %s: no description of %s", p.name, t)
	}
	return resp.Described, nil
}
