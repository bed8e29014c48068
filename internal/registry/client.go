// Package registry talks to a Confluent Schema Registry: subjects, versions,
// compatibility levels, the registry's own compatibility verdict with its
// messages, registration and lookup.
//
// Every call is plain REST through internal/rest (base URL, auth, timeout,
// capped answers). riferrei/srclient was used for listing, version numbers
// and lookup; it dropped what the rest needs (the verbose compatibility
// messages, a subject's own config versus the global one, a version's
// metadata), and linking it cost every agent that talks to a registry
// about 2 ms of CPU and 1 MB of allocations at start: its JSON Schema
// dependency compiles five meta-schemas in init (README, Development).
package registry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/dataworkers/dw/internal/rest"
	"github.com/dataworkers/dw/internal/suggest"
)

// DefaultTimeout bounds one request when the configuration gives none.
const DefaultTimeout = 5 * time.Second

const contentType = "application/vnd.schemaregistry.v1+json"

// Config says where the registry is. Credentials are values: the config
// layer resolves them from the environment.
type Config struct {
	URL      string
	Username string
	Password string
	// Timeout bounds each request, connection included.
	Timeout time.Duration
}

// SetDefaults fills in the timeout.
func (c *Config) SetDefaults() {
	if c.Timeout <= 0 {
		c.Timeout = DefaultTimeout
	}
}

// Validate checks the URL and that a password comes with a username.
func (c Config) Validate() error {
	u, err := url.Parse(c.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("schema registry url %q is not an http(s) URL such as http://localhost:8081", c.URL)
	}
	if c.Password != "" && c.Username == "" {
		return errors.New("schema registry password is set but username is empty; basic auth needs both")
	}
	if c.Timeout < 0 {
		return fmt.Errorf("schema registry timeout %s is negative", c.Timeout)
	}
	return nil
}

// MaxResponseBytes caps one answer of the registry: a schema with its
// references is well under it.
const MaxResponseBytes = 32 << 20

// Client is a Schema Registry client. It is safe for concurrent use.
type Client struct {
	base    string
	timeout time.Duration
	rc      *rest.Client
}

// New returns a client for cfg after applying defaults and validating it.
func New(cfg Config) (*Client, error) {
	cfg.SetDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.DialContext = (&net.Dialer{Timeout: cfg.Timeout, KeepAlive: 30 * time.Second}).DialContext
	tr.ResponseHeaderTimeout = cfg.Timeout
	base, err := rest.ParseBase(cfg.URL)
	if err != nil {
		return nil, fmt.Errorf("schema registry url %q is not an http(s) URL such as http://localhost:8081", cfg.URL)
	}
	var auth func(*http.Request) error
	if cfg.Username != "" {
		auth = rest.BasicAuth(cfg.Username, cfg.Password)
	}
	return &Client{
		base:    strings.TrimRight(cfg.URL, "/"),
		timeout: cfg.Timeout,
		rc: rest.New(base, rest.Options{Name: "schema registry", Timeout: cfg.Timeout, MaxResponseBytes: MaxResponseBytes,
			Accept: contentType + ", application/json", ContentType: contentType, Auth: auth, Transport: tr}),
	}, nil
}

// URL is the registry's base URL.
func (c *Client) URL() string { return c.base }

// Timeout is the bound on each request.
func (c *Client) Timeout() time.Duration { return c.timeout }

func (c *Client) transportErr(parent context.Context, method, u string, err error) error {
	if perr := parent.Err(); perr != nil {
		return fmt.Errorf("schema registry %s %s: %w", method, u, perr)
	}
	return &UnreachableError{URL: c.base, Endpoint: method + " " + u, Timeout: c.timeout, Cause: cause(err), Err: err}
}

// do sends one REST request and decodes a 2xx answer into out. path may
// carry a query ("?verbose=true").
func (c *Client) do(ctx context.Context, method, path string, body, out any) error {
	u := c.base + path
	p, rawQuery, _ := strings.Cut(path, "?")
	query, err := url.ParseQuery(rawQuery)
	if err != nil {
		return fmt.Errorf("schema registry %s %s: %w", method, u, err)
	}
	resp, err := c.rc.Do(ctx, method, p, query, body)
	var te *rest.TransportError
	if errors.As(err, &te) {
		return c.transportErr(ctx, method, u, te.Err)
	}
	if err != nil {
		return err
	}
	if !resp.OK() {
		ae := &APIError{Method: method, URL: u, Status: resp.Status, Code: resp.Status}
		var e struct {
			Code    int    `json:"error_code"`
			Message string `json:"message"`
		}
		if json.Unmarshal(resp.Body, &e) == nil && e.Code != 0 {
			ae.Code, ae.Message = e.Code, e.Message
		} else {
			ae.Message = strings.TrimSpace(fmt.Sprintf("%d %s", resp.Status, http.StatusText(resp.Status)) + " " + truncate(string(resp.Body), 200))
		}
		return ae
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(resp.Body, out); err != nil {
		return fmt.Errorf("schema registry %s %s: unexpected answer %q: %w", method, u, truncate(string(resp.Body), 200), err)
	}
	return nil
}

func truncate(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// subjectErr turns "subject not found" into an error naming the closest
// subjects the registry has.
func (c *Client) subjectErr(ctx context.Context, subject string, err error) error {
	if ErrorCode(err) != CodeSubjectNotFound {
		return err
	}
	nf := &SubjectNotFoundError{Subject: subject, URL: c.base, Err: err}
	if all, lerr := c.Subjects(ctx); lerr == nil {
		nf.Closest = []string{}
		if len(all) > 0 {
			nf.Closest = suggest.Closest(subject, all, 5)
		}
	}
	return nf
}

func subjectPath(subject string) string { return "/subjects/" + url.PathEscape(subject) }
