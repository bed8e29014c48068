// Package warehouseproc runs the warehouse drivers in a child process.
//
// The DuckDB, BigQuery and Snowflake drivers cost an agent about 50 MiB of
// resident memory at start-up through their packages' initialisation
// alone, before any warehouse is used. An MCP client starts every agent at
// once, so the agents do not link the drivers: the first tool call that
// needs a warehouse starts a child beside the agent's binary that links
// the driver (Command: dw-warehouse-<kind>, which links that kind's driver
// alone; each is a call of Main) and talks to it over its stdin and
// stdout, one JSON request per line. Results are small (checks aggregate in the
// warehouse), so the hop costs little.
//
// The child reads no configuration of its own: the agent's first request
// (op open) carries what the agent loaded (Opening), so a child started
// again after an idle exit serves the warehouse the agent's tools describe,
// even if dw.yaml was edited since.
package warehouseproc

import (
	"encoding/base64"
	"fmt"
	"math/big"
	"strconv"
	"time"

	"github.com/dataworkers/dw/internal/config"
	"github.com/dataworkers/dw/internal/warehouse"
)

// Opening is the child's first frame: as much of the configuration the
// agent loaded as opening its warehouse needs.
type Opening struct {
	// Warehouse is the warehouse's section, defaults filled in.
	Warehouse config.Warehouse `json:"warehouse"`
	// Home is the data directory, where the embedded default's demo clock
	// is anchored.
	Home string `json:"home"`
	// Source is the file the configuration came from; "" is the embedded
	// default, whose demo warehouse is created and seeded on first use.
	Source string `json:"source"`
}

// opening is what cfg says of wc.
func opening(cfg *config.Config, wc *config.Warehouse) Opening {
	return Opening{Warehouse: *wc, Home: cfg.Home, Source: cfg.Source}
}

// Config is the configuration the child opens the warehouse with: the
// agent's, holding this one warehouse.
func (o Opening) Config() *config.Config {
	return &config.Config{Home: o.Home, Source: o.Source, Warehouses: []config.Warehouse{o.Warehouse}}
}

// request is one call to the child.
type request struct {
	Op        string              `json:"op"` // open (first), query, validate, preflight, resume, list or describe
	Open      *Opening            `json:"open,omitempty"`
	SQL       string              `json:"sql,omitempty"`
	Args      []cell              `json:"args,omitempty"`
	Agent     string              `json:"agent,omitempty"`
	Tool      string              `json:"tool,omitempty"`
	TimeoutMS int64               `json:"timeout_ms,omitempty"`
	Table     *warehouse.TableRef `json:"table,omitempty"`
	// Queries are the statements of a preflight, or for resume the
	// queries an ended child left in flight.
	Queries []request `json:"queries,omitempty"`
	// Scanned is, for resume, the bytes the agent's session scanned in
	// earlier children.
	Scanned int64 `json:"scanned,omitempty"`
}

// response is the child's answer.
type response struct {
	Error string `json:"error,omitempty"`
	// Refused says Error is a statement the warehouse refused
	// (warehouse.ErrRefused), so the agent can tell it from a failure.
	Refused      bool                 `json:"refused,omitempty"`
	Columns      []string             `json:"columns,omitempty"`
	Rows         [][]cell             `json:"rows,omitempty"`
	BytesScanned int64                `json:"bytes_scanned,omitempty"`
	Tables       []warehouse.TableRef `json:"tables,omitempty"`
	Described    *warehouse.Table     `json:"described,omitempty"`
	// Budget is a refusal over a scan budget, re-made at the agent as the
	// same *warehouse.BudgetError the driver returned.
	Budget *warehouse.BudgetError `json:"budget,omitempty"`
	// Scanned is the session's bytes scanned against the driver's budget
	// after this request, for drivers that keep one.
	Scanned int64 `json:"scanned,omitempty"`
}

// cell carries one value with its type, so integers keep their precision
// and times stay times across JSON.
type cell struct {
	T string `json:"t"` // i, f, s, t, b, x (bytes), n (null)
	V string `json:"v,omitempty"`
}

func encodeCell(v any) cell {
	switch x := v.(type) {
	case nil:
		return cell{T: "n"}
	case int64:
		return cell{T: "i", V: strconv.FormatInt(x, 10)}
	case int32:
		return cell{T: "i", V: strconv.FormatInt(int64(x), 10)}
	case int:
		return cell{T: "i", V: strconv.Itoa(x)}
	case int16:
		return cell{T: "i", V: strconv.FormatInt(int64(x), 10)}
	case int8:
		return cell{T: "i", V: strconv.FormatInt(int64(x), 10)}
	case uint64:
		return cell{T: "s", V: strconv.FormatUint(x, 10)}
	case uint32:
		return cell{T: "i", V: strconv.FormatUint(uint64(x), 10)}
	case float64:
		return cell{T: "f", V: strconv.FormatFloat(x, 'g', -1, 64)}
	case float32:
		return cell{T: "f", V: strconv.FormatFloat(float64(x), 'g', -1, 32)}
	case bool:
		return cell{T: "b", V: strconv.FormatBool(x)}
	case string:
		return cell{T: "s", V: x}
	case []byte:
		return cell{T: "x", V: base64.StdEncoding.EncodeToString(x)}
	case time.Time:
		return cell{T: "t", V: x.UTC().Format(time.RFC3339Nano)}
	case *big.Int:
		return cell{T: "s", V: x.String()}
	case *big.Rat:
		return cell{T: "s", V: x.FloatString(12)}
	case *big.Float:
		return cell{T: "s", V: x.Text('g', 20)}
	}
	// Decimals, UUIDs and other driver types read as their text: the
	// consumers parse numbers from strings.
	return cell{T: "s", V: fmt.Sprint(v)}
}

func (c cell) decode() (any, error) {
	switch c.T {
	case "n":
		return nil, nil
	case "i":
		return strconv.ParseInt(c.V, 10, 64)
	case "f":
		return strconv.ParseFloat(c.V, 64)
	case "b":
		return strconv.ParseBool(c.V)
	case "s":
		return c.V, nil
	case "x":
		return base64.StdEncoding.DecodeString(c.V)
	case "t":
		return time.Parse(time.RFC3339Nano, c.V)
	}
	return nil, fmt.Errorf("warehouse process: unknown value type %q", c.T)
}
