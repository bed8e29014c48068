// Package rest is the one HTTP JSON client core under the REST clients
// (Kafka Connect, Flink, the orchestrators, the Schema Registry, the
// OpenLineage forwarder). It owns what each of them used to hand-roll:
// joining paths to a base URL, credentials, a bound on each call, JSON in
// and out, a cap on how much of an answer is read, and typed errors that
// say which URL answered what. Each client keeps its own error types and
// messages on top; this package only reports what happened on the wire.
package rest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"
)

// DefaultMaxResponseBytes caps an answer when the client sets no cap: far
// above any real answer of these APIs, far below what would hurt the agent.
const DefaultMaxResponseBytes = 32 << 20

// DefaultTimeout bounds a call when the client sets no timeout.
const DefaultTimeout = 10 * time.Second

// Options shape a Client. The zero value is usable.
type Options struct {
	// Name prefixes this package's own errors ("connect", "flink").
	Name string
	// Timeout bounds each call, connecting and reading the answer
	// included; DefaultTimeout when <= 0. The caller's context may end it
	// sooner.
	Timeout time.Duration
	// MaxResponseBytes caps how much of an answer is read; a longer one is
	// a *TooLargeError, never silently cut. DefaultMaxResponseBytes when <= 0.
	MaxResponseBytes int64
	// Accept is the Accept header; "application/json" when empty.
	Accept string
	// ContentType is the Content-Type of request bodies; "application/json"
	// when empty.
	ContentType string
	// Auth adds credentials to each request; nil for none. It runs per
	// call, so it may read a secret that changes, and its error is the
	// call's error (nothing is sent).
	Auth func(*http.Request) error
	// Transport sends the requests; a clone of http.DefaultTransport when nil.
	Transport http.RoundTripper
}

// Client sends JSON requests to one base URL. It is safe for concurrent use.
type Client struct {
	name        string
	base        *url.URL
	hc          *http.Client
	timeout     time.Duration
	max         int64
	accept      string
	contentType string
	auth        func(*http.Request) error
}

// ParseBase checks that raw is an http or https URL with a host, and
// returns it without a trailing slash. Clients wrap the error in their
// own words (which setting, what a valid one looks like).
func ParseBase(raw string) (*url.URL, error) {
	u, err := url.Parse(strings.TrimRight(strings.TrimSpace(raw), "/"))
	if err != nil {
		return nil, err
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("scheme %q is not http or https", u.Scheme)
	}
	if u.Host == "" {
		return nil, errors.New("no host")
	}
	return u, nil
}

// New builds a client for base (see ParseBase); it does not call it.
func New(base *url.URL, o Options) *Client {
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.MaxResponseBytes <= 0 {
		o.MaxResponseBytes = DefaultMaxResponseBytes
	}
	if o.Accept == "" {
		o.Accept = "application/json"
	}
	if o.ContentType == "" {
		o.ContentType = "application/json"
	}
	if o.Transport == nil {
		o.Transport = http.DefaultTransport.(*http.Transport).Clone()
	}
	b := *base
	return &Client{name: o.Name, base: &b, hc: &http.Client{Transport: o.Transport}, timeout: o.Timeout,
		max: o.MaxResponseBytes, accept: o.Accept, contentType: o.ContentType, auth: o.Auth}
}

// BasicAuth authenticates with a user name and password; none when both
// are empty.
func BasicAuth(user, pass string) func(*http.Request) error {
	return func(r *http.Request) error {
		if user != "" || pass != "" {
			r.SetBasicAuth(user, pass)
		}
		return nil
	}
}

// BearerAuth authenticates with a bearer token; none when it is empty.
func BearerAuth(token string) func(*http.Request) error {
	return func(r *http.Request) error {
		if token != "" {
			r.Header.Set("Authorization", "Bearer "+token)
		}
		return nil
	}
}

// Base is the base URL.
func (c *Client) Base() *url.URL { u := *c.base; return &u }

// Timeout is the bound on each call.
func (c *Client) Timeout() time.Duration { return c.timeout }

// MaxResponseBytes is the cap on an answer.
func (c *Client) MaxResponseBytes() int64 { return c.max }

// Endpoint joins an already escaped path (such as "/connectors/" +
// url.PathEscape(name)) and a query to the base URL.
func (c *Client) Endpoint(path string, query url.Values) string {
	u := *c.base
	u.RawPath = c.base.EscapedPath() + path
	if p, err := url.PathUnescape(u.RawPath); err == nil {
		u.Path = p
	} else {
		u.Path = u.RawPath
	}
	if len(query) > 0 {
		u.RawQuery = query.Encode()
	} else {
		u.RawQuery = ""
	}
	return u.String()
}

// Response is an answer of any status, read in full (within the cap).
type Response struct {
	Method string
	URL    string
	Status int
	Header http.Header
	Body   []byte
}

// OK reports whether the status is 2xx.
func (r *Response) OK() bool { return r.Status >= 200 && r.Status <= 299 }

// Error is the *Error for this answer (for a non-2xx one).
func (r *Response) Error(name string) *Error {
	return &Error{Name: name, Method: r.Method, URL: r.URL, Status: r.Status, Body: Trim(r.Body, maxErrorBody)}
}

// Do sends one request and reads the whole answer, whatever its status.
// body is sent as is when it is []byte or json.RawMessage, JSON-encoded
// otherwise, and not at all when nil. No answer is a *TransportError; an
// answer over the cap is a *TooLargeError.
func (c *Client) Do(ctx context.Context, method, path string, query url.Values, body any) (*Response, error) {
	return c.DoURL(ctx, method, c.Endpoint(path, query), body)
}

// DoURL is Do for a whole URL the caller built (normally with Endpoint),
// for clients that name the URL before they send.
func (c *Client) DoURL(ctx context.Context, method, target string, body any) (*Response, error) {
	var rd io.Reader
	if body != nil {
		var b []byte
		switch v := body.(type) {
		case []byte:
			b = v
		case json.RawMessage:
			b = v
		default:
			var err error
			if b, err = json.Marshal(body); err != nil {
				return nil, fmt.Errorf("%s: encode request for %s %s: %w", c.name, method, target, err)
			}
		}
		rd = bytes.NewReader(b)
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, target, rd)
	if err != nil {
		return nil, fmt.Errorf("%s: build request %s %s: %w", c.name, method, target, err)
	}
	req.Header.Set("Accept", c.accept)
	if body != nil {
		req.Header.Set("Content-Type", c.contentType)
	}
	if c.auth != nil {
		if err := c.auth(req); err != nil {
			return nil, fmt.Errorf("%s: %w", c.name, err)
		}
	}
	resp, err := c.hc.Do(req)
	if tl := (*TooLargeError)(nil); errors.As(err, &tl) {
		return nil, tl // declared too long, by a CapTransport underneath
	}
	if err != nil {
		return nil, c.transportErr(method, target, err)
	}
	defer resp.Body.Close()
	out := &Response{Method: method, URL: target, Status: resp.StatusCode, Header: resp.Header}
	// Refuse a declared length over the cap before reading anything; read
	// one byte past the cap otherwise, so a longer answer is an error
	// rather than a truncated body that happens to fail to decode.
	if resp.ContentLength > c.max {
		return nil, &TooLargeError{Name: c.name, Method: method, URL: target, Status: resp.StatusCode, Limit: c.max}
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, c.max+1))
	var tl *TooLargeError
	if errors.As(err, &tl) {
		return nil, tl // from a CapTransport underneath
	}
	if err != nil {
		return nil, c.transportErr(method, target, err)
	}
	if int64(len(data)) > c.max {
		return nil, &TooLargeError{Name: c.name, Method: method, URL: target, Status: resp.StatusCode, Limit: c.max}
	}
	out.Body = data
	return out, nil
}

func (c *Client) transportErr(method, target string, err error) *TransportError {
	return NewTransportError(c.name, method, target, c.timeout, err)
}

// NewTransportError is the error of a call to target that got no answer,
// timed out when err is a network timeout or a passed deadline: for
// clients that reach a server through another library (an SDK) and
// should fail as the REST clients do.
func NewTransportError(name, method, target string, timeout time.Duration, err error) *TransportError {
	var ne net.Error
	timedOut := errors.As(err, &ne) && ne.Timeout() || errors.Is(err, context.DeadlineExceeded)
	return &TransportError{Name: name, Method: method, URL: target, Timeout: timeout, TimedOut: timedOut, Err: err}
}

// JSON sends in (nil for no body) and decodes a 2xx answer into out (nil
// to ignore it). A non-2xx answer is a *Error with the trimmed body.
func (c *Client) JSON(ctx context.Context, method, path string, query url.Values, in, out any) error {
	resp, err := c.Do(ctx, method, path, query, in)
	if err != nil {
		return err
	}
	if !resp.OK() {
		return resp.Error(c.name)
	}
	return c.Decode(resp, out)
}

// Decode reads a JSON answer into out (nothing when out is nil), naming
// the URL and the start of the answer when it is not JSON of that shape.
func (c *Client) Decode(resp *Response, out any) error {
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(resp.Body, out); err != nil {
		return &DecodeError{Name: c.name, Method: resp.Method, URL: resp.URL, Body: Trim(resp.Body, maxErrorBody), Err: err}
	}
	return nil
}

// maxErrorBody bounds how much of an answer an error quotes.
const maxErrorBody = 300

// Trim is body as text, trimmed of space and cut to at most n bytes (on a
// rune boundary) with "…" when longer, so an error never quotes a
// megabyte.
func Trim(body []byte, n int) string {
	s := strings.TrimSpace(string(body))
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// TransportError is a call that got no answer: the server was unreachable,
// or did not answer (or finish answering) within the timeout.
type TransportError struct {
	Name     string
	Method   string
	URL      string
	Timeout  time.Duration
	TimedOut bool
	Err      error
}

// Error names the URL and the timeout so the reader knows where to look.
func (e *TransportError) Error() string {
	if e.TimedOut {
		return fmt.Sprintf("%s: %s %s got no answer within %s: %v", e.Name, e.Method, e.URL, e.Timeout, e.Err)
	}
	return fmt.Sprintf("%s: cannot reach %s (%s, timeout %s): %v", e.Name, e.URL, e.Method, e.Timeout, e.Err)
}

// Unwrap returns the network error.
func (e *TransportError) Unwrap() error { return e.Err }

// TooLargeError is an answer longer than the client's cap: it was not
// read further, so nothing of it is used.
type TooLargeError struct {
	Name   string
	Method string
	URL    string
	Status int
	Limit  int64
}

// Error names the URL and the cap.
func (e *TooLargeError) Error() string {
	return fmt.Sprintf("%s: %s %s answered more than %d bytes (status %d); refusing to read it, the server is misbehaving or this is not the API expected",
		e.Name, e.Method, e.URL, e.Limit, e.Status)
}

// Error is a non-2xx answer: the status and the start of the body.
type Error struct {
	Name   string
	Method string
	URL    string
	Status int
	Body   string
}

// Error says which URL answered what.
func (e *Error) Error() string {
	msg := e.Body
	if msg == "" {
		msg = http.StatusText(e.Status)
	}
	return fmt.Sprintf("%s: %s %s answered %d: %s", e.Name, e.Method, e.URL, e.Status, msg)
}

// DecodeError is a 2xx answer that is not JSON of the expected shape.
type DecodeError struct {
	Name   string
	Method string
	URL    string
	Body   string
	Err    error
}

// Error names the URL and quotes the start of the answer.
func (e *DecodeError) Error() string {
	return fmt.Sprintf("%s: %s %s answered something that is not the expected JSON (%v): %q", e.Name, e.Method, e.URL, e.Err, e.Body)
}

// Unwrap returns the JSON error.
func (e *DecodeError) Unwrap() error { return e.Err }

// CapTransport wraps rt so that reading more than max bytes of any
// answer's body fails with a *TooLargeError. It bounds third-party
// clients that read whole answers themselves.
func CapTransport(rt http.RoundTripper, name string, max int64) http.RoundTripper {
	return capTransport{rt: rt, name: name, max: max}
}

type capTransport struct {
	rt   http.RoundTripper
	name string
	max  int64
}

// RoundTrip sends r and caps the answer's body.
func (t capTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := t.rt.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	tl := &TooLargeError{Name: t.name, Method: r.Method, URL: r.URL.String(), Status: resp.StatusCode, Limit: t.max}
	if resp.ContentLength > t.max {
		resp.Body.Close()
		return nil, tl
	}
	resp.Body = &cappedBody{rc: resp.Body, left: t.max, err: tl}
	return resp, nil
}

type cappedBody struct {
	rc   io.ReadCloser
	left int64
	err  *TooLargeError
}

func (b *cappedBody) Read(p []byte) (int, error) {
	if b.left < 0 {
		return 0, b.err
	}
	if int64(len(p)) > b.left+1 {
		p = p[:b.left+1]
	}
	n, err := b.rc.Read(p)
	b.left -= int64(n)
	if b.left < 0 {
		// The byte past the cap is withheld: what was read stays within it.
		return n - 1, b.err
	}
	return n, err
}

func (b *cappedBody) Close() error { return b.rc.Close() }
