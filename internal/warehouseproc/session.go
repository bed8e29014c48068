package warehouseproc

import (
	"context"
	"time"

	"github.com/dataworkers/dw/internal/warehouse"
)

// The optional interfaces the drivers implement beyond warehouse.Warehouse.
// The proxy implements each of them, forwarding to the child, so a caller
// that type-asserts for one (checks.Run asks for a Preflighter) finds it
// whether the driver runs in its process or in the child; for a driver
// without the capability the child answers as a driver without it would
// (nothing to vet, nothing scanned).
type (
	preflighter interface {
		Preflight(ctx context.Context, qs []warehouse.Query) error
	}
	sessionMeter interface {
		Scanned() int64
	}
	sessionResumer interface {
		ResumeSession(ctx context.Context, scanned int64, inFlight []warehouse.Query) error
	}
)

// Preflight has the child's driver vet every statement of a split plan
// before any runs (BigQuery dry-runs them all against its budgets), so a
// plan over budget is refused whole, as it is in-process.
func (p *Proxy) Preflight(ctx context.Context, qs []warehouse.Query) error {
	req := request{Op: "preflight", Queries: make([]request, len(qs))}
	for i, q := range qs {
		r, err := queryRequest(q)
		if err != nil {
			return err
		}
		req.Queries[i] = r
	}
	_, err := p.call(ctx, req)
	return err
}

// Scanned is how many bytes the session has scanned against the driver's
// budget, across every child this proxy started.
func (p *Proxy) Scanned() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.scanned
}

func queryRequest(q warehouse.Query) (request, error) {
	if err := warehouse.ReadOnlyStatement(q.SQL); err != nil {
		return request{}, err
	}
	req := request{Op: "query", SQL: q.SQL, Agent: q.Agent, Tool: q.Tool, TimeoutMS: q.Timeout.Milliseconds()}
	for _, a := range q.Args {
		req.Args = append(req.Args, encodeCell(a))
	}
	return req, nil
}

func (r request) query() (warehouse.Query, error) {
	args := make([]any, len(r.Args))
	for i, c := range r.Args {
		v, err := c.decode()
		if err != nil {
			return warehouse.Query{}, err
		}
		args[i] = v
	}
	return warehouse.Query{SQL: r.SQL, Args: args, Agent: r.Agent, Tool: r.Tool, Timeout: time.Duration(r.TimeoutMS) * time.Millisecond}, nil
}

// preflight runs in the child.
func preflight(ctx context.Context, w warehouse.Warehouse, reqs []request) response {
	pf, ok := w.(preflighter)
	if !ok {
		return response{}
	}
	qs := make([]warehouse.Query, len(reqs))
	for i, r := range reqs {
		q, err := r.query()
		if err != nil {
			return response{Error: err.Error()}
		}
		qs[i] = q
	}
	if err := pf.Preflight(ctx, qs); err != nil {
		return errorResponse(err)
	}
	return response{}
}

// resumeSession runs in a restarted child: it carries the agent's session
// (bytes scanned, statements cut off in flight) over to the new driver.
func resumeSession(ctx context.Context, w warehouse.Warehouse, scanned int64, reqs []request) response {
	r, ok := w.(sessionResumer)
	if !ok {
		return response{}
	}
	var qs []warehouse.Query
	for _, req := range reqs {
		if q, err := req.query(); err == nil {
			qs = append(qs, q)
		}
	}
	if err := r.ResumeSession(ctx, scanned, qs); err != nil {
		return errorResponse(err)
	}
	return response{}
}

func scannedBy(w warehouse.Warehouse) int64 {
	if m, ok := w.(sessionMeter); ok {
		return m.Scanned()
	}
	return 0
}
