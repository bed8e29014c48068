package warehouseproc

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/dataworkers/dw/internal/memtrim"
	"github.com/dataworkers/dw/internal/warehouse"
)

// maxLine bounds one request or answer: results are aggregates, but a
// catalog listing of a large warehouse can run to megabytes.
const maxLine = 256 << 20

// Serve answers an agent's requests from in on out until in closes. The
// first request opens the warehouse: open makes the driver from the
// agent's Opening (dw passes warehouses.Open); a child that cannot open it
// answers why and ends. Requests are handled one at a time: a warehouse
// connection per agent is what the drivers are built for.
func Serve(ctx context.Context, in io.Reader, out io.Writer, open func(context.Context, Opening) (warehouse.Warehouse, error)) error {
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 64<<10), maxLine)
	enc := json.NewEncoder(out)
	if !sc.Scan() {
		return sc.Err() // the agent went before asking anything
	}
	var first request
	if err := json.Unmarshal(sc.Bytes(), &first); err != nil || first.Op != "open" || first.Open == nil {
		err := errors.New("warehouse process: the first request must be open, with the agent's configuration")
		_ = enc.Encode(response{Error: err.Error()})
		return err
	}
	w, err := open(ctx, *first.Open)
	if err != nil {
		_ = enc.Encode(errorResponse(err))
		return err
	}
	defer w.Close()
	if err := enc.Encode(response{}); err != nil {
		return err
	}
	// A child lives on between bursts of calls (the agent's idle period);
	// once quiet it gives its memory back.
	tr := memtrim.New()
	defer tr.Stop()
	for sc.Scan() {
		tr.Busy()
		var req request
		var resp response
		if err := json.Unmarshal(sc.Bytes(), &req); err != nil {
			resp.Error = fmt.Sprintf("warehouse process: bad request: %v", err)
		} else {
			resp = handle(ctx, w, req)
		}
		resp.Scanned = scannedBy(w)
		err := enc.Encode(resp)
		tr.Quiet()
		if err != nil {
			return err
		}
	}
	return sc.Err()
}

func handle(ctx context.Context, w warehouse.Warehouse, req request) response {
	var resp response
	switch req.Op {
	case "query":
		args := make([]any, len(req.Args))
		for i, c := range req.Args {
			v, err := c.decode()
			if err != nil {
				return response{Error: err.Error()}
			}
			args[i] = v
		}
		res, err := w.Query(ctx, warehouse.Query{SQL: req.SQL, Args: args, Agent: req.Agent, Tool: req.Tool,
			Timeout: time.Duration(req.TimeoutMS) * time.Millisecond})
		if err != nil {
			return errorResponse(err)
		}
		resp.Columns, resp.BytesScanned = res.Columns, res.BytesScanned
		resp.Rows = make([][]cell, len(res.Rows))
		for i, row := range res.Rows {
			cells := make([]cell, len(row))
			for j, v := range row {
				cells[j] = encodeCell(v)
			}
			resp.Rows[i] = cells
		}
	case "validate":
		if err := w.ValidateQuery(ctx, req.SQL); err != nil {
			return errorResponse(err)
		}
	case "preflight":
		return preflight(ctx, w, req.Queries)
	case "resume":
		return resumeSession(ctx, w, req.Scanned, req.Queries)
	case "list":
		tables, err := w.ListTables(ctx)
		if err != nil {
			return response{Error: err.Error()}
		}
		resp.Tables = tables
	case "describe":
		if req.Table == nil {
			return response{Error: "warehouse process: describe needs a table"}
		}
		t, err := w.Describe(ctx, *req.Table)
		if err != nil {
			return response{Error: err.Error()}
		}
		resp.Described = t
	default:
		resp.Error = fmt.Sprintf("warehouse process: unknown op %q", req.Op)
	}
	return resp
}

func errorResponse(err error) response {
	resp := response{Error: err.Error(), Refused: errors.Is(err, warehouse.ErrRefused)}
	var be *warehouse.BudgetError
	if errors.As(err, &be) {
		resp.Budget = be
	}
	return resp
}
