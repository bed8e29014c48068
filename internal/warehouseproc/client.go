package warehouseproc

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"time"

	"github.com/dataworkers/dw/internal/clock"
	"github.com/dataworkers/dw/internal/config"
	"github.com/dataworkers/dw/internal/warehouse"
)

// Command is how an agent starts the child: the dw binary beside it.
// Tests point it elsewhere.
var Command = func(name string) (*exec.Cmd, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	dw := filepath.Join(filepath.Dir(exe), "dw")
	if _, err := os.Stat(dw); err != nil {
		return nil, fmt.Errorf("warehouse access runs in `dw warehouse serve`, but there is no dw binary beside %s: build it (make build, or start-agent.sh builds it)", exe)
	}
	return exec.Command(dw, "warehouse", "serve", "--name", name), nil
}

// Open returns a warehouse whose driver runs in a child process, started on
// the first call. It has the shape of warehouses.Open so deps can use
// either.
func Open(_ context.Context, _ *config.Config, wc *config.Warehouse, _ clock.Clock) (warehouse.Warehouse, error) {
	var d warehouse.Dialect
	switch wc.Kind {
	case "duckdb":
		d = warehouse.DuckDB{}
	case "bigquery":
		d = warehouse.BigQuery{}
	case "snowflake":
		d = warehouse.Snowflake{}
	default:
		return nil, fmt.Errorf("warehouse %s: unknown kind %q; valid: duckdb, bigquery, snowflake", wc.Name, wc.Kind)
	}
	return &Proxy{name: wc.Name, dialect: d}, nil
}

// Proxy is a warehouse served by a child process. Calls are serialised: the
// child answers one request at a time.
type Proxy struct {
	name    string
	dialect warehouse.Dialect

	mu    sync.Mutex
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *bufio.Scanner
	done  chan struct{}
}

// Name is the configured name.
func (p *Proxy) Name() string { return p.name }

// Dialect spells SQL for the engine behind the child.
func (p *Proxy) Dialect() warehouse.Dialect { return p.dialect }

// Close stops the child.
func (p *Proxy) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stop()
	return nil
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
	p.cmd = nil
}

func (p *Proxy) start() error {
	cmd, err := Command(p.name)
	if err != nil {
		return err
	}
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start the warehouse process for %s: %w", p.name, err)
	}
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 64<<10), maxLine)
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	p.cmd, p.stdin, p.out, p.done = cmd, stdin, sc, done
	return nil
}

// call sends one request and waits for its answer. A cancelled context
// ends the child, which is started again by the next call.
func (p *Proxy) call(ctx context.Context, req request) (*response, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		if err := p.start(); err != nil {
			return nil, err
		}
	}
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
		if a.resp.Error != "" {
			return nil, errors.New(a.resp.Error)
		}
		return a.resp, nil
	case <-ctx.Done():
		_ = p.cmd.Process.Kill()
		<-ch
		p.stop()
		return nil, fmt.Errorf("warehouse %s: %w", p.name, ctx.Err())
	}
}

// Query runs one read-only statement in the child.
func (p *Proxy) Query(ctx context.Context, q warehouse.Query) (*warehouse.Result, error) {
	if err := warehouse.ReadOnlyStatement(q.SQL); err != nil {
		return nil, err
	}
	req := request{Op: "query", SQL: q.SQL, Agent: q.Agent, Tool: q.Tool, TimeoutMS: q.Timeout.Milliseconds()}
	for _, a := range q.Args {
		req.Args = append(req.Args, encodeCell(a))
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
