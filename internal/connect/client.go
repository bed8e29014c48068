// Package connect reads a Kafka Connect cluster over its REST API: which
// connectors run, the state of each task (with the failing task's stack
// trace), which topics and tables each connector moves, and whether a new
// connector config passes the worker's own validation before a person
// applies it.
package connect

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"time"

	"github.com/dataworkers/dw/internal/rest"
	"github.com/dataworkers/dw/internal/suggest"
)

// DefaultTimeout bounds one REST call when the caller's context has no
// earlier deadline.
const DefaultTimeout = 10 * time.Second

// Client talks to one Connect worker (any worker answers for the cluster).
// It is safe for concurrent use.
type Client struct {
	base *url.URL
	rc   *rest.Client
}

// MaxResponseBytes caps one answer of the worker: a cluster's whole
// connector list with configs is well under it.
const MaxResponseBytes = 32 << 20

// NewClient checks the worker URL (http or https, with a host) and builds a
// client; it does not call the worker.
func NewClient(workerURL string, timeout time.Duration) (*Client, error) {
	u, err := rest.ParseBase(workerURL)
	if err != nil {
		return nil, fmt.Errorf("connect: worker URL %q is not valid; want http://host:8083 or https://host:8083", workerURL)
	}
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	return &Client{base: u, rc: rest.New(u, rest.Options{Name: "connect", Timeout: timeout, MaxResponseBytes: MaxResponseBytes})}, nil
}

// URL is the worker's base URL.
func (c *Client) URL() string { return c.base.String() }

// APIError is an error answer from the worker, carrying Connect's own
// error body ({"error_code":404,"message":"…"}).
type APIError struct {
	URL     string `json:"url"`
	Status  int    `json:"status"`
	Code    int    `json:"error_code"`
	Message string `json:"message"`
}

// Error says which URL answered what.
func (e *APIError) Error() string {
	return fmt.Sprintf("connect: %s answered %d: %s", e.URL, e.Code, e.Message)
}

// IsNotFound reports whether err is a 404 from the worker.
func IsNotFound(err error) bool {
	var ae *APIError
	return errors.As(err, &ae) && ae.Status == http.StatusNotFound
}

// do sends one request and decodes a JSON answer into out.
func (c *Client) do(ctx context.Context, method, path string, query url.Values, body, out any) error {
	resp, err := c.rc.Do(ctx, method, path, query, body)
	if err != nil {
		var te *rest.TransportError
		switch {
		case !errors.As(err, &te):
			return err
		case te.TimedOut:
			return fmt.Errorf("connect: worker at %s did not answer %s %s within %s: %w", c.base, method, path, te.Timeout, err)
		default:
			return fmt.Errorf("connect: cannot reach worker at %s (%s %s, timeout %s): %w", c.base, method, path, te.Timeout, err)
		}
	}
	if resp.Status >= 300 {
		ae := &APIError{URL: resp.URL, Status: resp.Status, Code: resp.Status}
		if json.Unmarshal(resp.Body, ae) != nil || ae.Message == "" {
			ae.Message = rest.Trim(resp.Body, 2000)
			if ae.Message == "" {
				ae.Message = http.StatusText(resp.Status)
			}
		}
		if ae.Code == 0 {
			ae.Code = resp.Status
		}
		return ae
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(resp.Body, out); err != nil {
		return fmt.Errorf("connect: %s %s answered something that is not Connect's JSON: %w", method, resp.URL, err)
	}
	return nil
}

// TaskID names a task as Connect's info lists it.
type TaskID struct {
	Connector string `json:"connector"`
	Task      int    `json:"task"`
}

// Info is a connector's definition (GET /connectors/{name}).
type Info struct {
	Name   string            `json:"name"`
	Config map[string]string `json:"config"`
	Tasks  []TaskID          `json:"tasks"`
	Type   string            `json:"type"`
}

// State is the state of a connector or a task on its worker.
type State struct {
	State    string `json:"state" jsonschema:"RUNNING, PAUSED, STOPPED, FAILED, UNASSIGNED or RESTARTING"`
	WorkerID string `json:"worker_id"`
	Trace    string `json:"trace,omitempty" jsonschema:"stack trace of the failure, when failed"`
}

// TaskState is one task's state.
type TaskState struct {
	ID       int    `json:"id"`
	State    string `json:"state" jsonschema:"RUNNING, PAUSED, STOPPED, FAILED, UNASSIGNED or RESTARTING"`
	WorkerID string `json:"worker_id"`
	Trace    string `json:"trace,omitempty" jsonschema:"stack trace of the failure, when failed"`
}

// Status is a connector's status (GET /connectors/{name}/status).
type Status struct {
	Name      string      `json:"name"`
	Connector State       `json:"connector"`
	Tasks     []TaskState `json:"tasks"`
	Type      string      `json:"type,omitempty"`
}

// Connector is one entry of GET /connectors?expand=status&expand=info.
type Connector struct {
	Info   Info   `json:"info"`
	Status Status `json:"status"`
}

// ListConnectors returns every connector with its definition and status in
// one call, sorted by name.
func (c *Client) ListConnectors(ctx context.Context) ([]Connector, error) {
	var m map[string]Connector
	q := url.Values{"expand": {"status", "info"}}
	if err := c.do(ctx, http.MethodGet, "/connectors", q, nil, &m); err != nil {
		return nil, err
	}
	out := make([]Connector, 0, len(m))
	for name, cn := range m {
		if cn.Info.Name == "" {
			cn.Info.Name = name
		}
		if cn.Status.Name == "" {
			cn.Status.Name = name
		}
		out = append(out, cn)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Info.Name < out[j].Info.Name })
	return out, nil
}

// Status returns one connector's status. An unknown name is an error that
// lists the closest connector names.
func (c *Client) Status(ctx context.Context, name string) (*Status, error) {
	var s Status
	if err := c.do(ctx, http.MethodGet, "/connectors/"+url.PathEscape(name)+"/status", nil, nil, &s); err != nil {
		return nil, c.unknownConnector(ctx, name, err)
	}
	return &s, nil
}

// Info returns one connector's definition.
func (c *Client) Info(ctx context.Context, name string) (*Info, error) {
	var in Info
	if err := c.do(ctx, http.MethodGet, "/connectors/"+url.PathEscape(name), nil, nil, &in); err != nil {
		return nil, c.unknownConnector(ctx, name, err)
	}
	return &in, nil
}

// TaskStatus returns one task's state, with its trace when it failed.
func (c *Client) TaskStatus(ctx context.Context, name string, task int) (*TaskState, error) {
	if task < 0 {
		return nil, fmt.Errorf("connect: task id %d is negative; tasks are numbered from 0", task)
	}
	var s TaskState
	if err := c.do(ctx, http.MethodGet, fmt.Sprintf("/connectors/%s/tasks/%d/status", url.PathEscape(name), task), nil, nil, &s); err != nil {
		if !IsNotFound(err) {
			return nil, err
		}
		st, serr := c.Status(ctx, name)
		if serr != nil {
			return nil, serr
		}
		var ids []string
		for _, t := range st.Tasks {
			ids = append(ids, fmt.Sprint(t.ID))
		}
		return nil, fmt.Errorf("%w; connector %s has tasks [%s]", err, name, strings.Join(ids, ", "))
	}
	return &s, nil
}

// unknownConnector adds the closest names to a 404 about a connector.
func (c *Client) unknownConnector(ctx context.Context, name string, err error) error {
	if !IsNotFound(err) {
		return err
	}
	var names []string
	if lerr := c.do(ctx, http.MethodGet, "/connectors", nil, nil, &names); lerr != nil {
		return err
	}
	return fmt.Errorf("%w; closest connectors: %s", err, strings.Join(suggest.Closest(name, names, 3), ", "))
}

// Plugin is one installed connector plugin.
type Plugin struct {
	Class   string `json:"class"`
	Type    string `json:"type"`
	Version string `json:"version,omitempty"`
}

// Plugins lists the connector plugins installed on the worker.
func (c *Client) Plugins(ctx context.Context) ([]Plugin, error) {
	var ps []Plugin
	if err := c.do(ctx, http.MethodGet, "/connector-plugins", nil, nil, &ps); err != nil {
		return nil, err
	}
	sort.Slice(ps, func(i, j int) bool { return ps[i].Class < ps[j].Class })
	return ps, nil
}
