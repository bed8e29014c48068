package orchestrate

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/dataworkers/dw/internal/config"
	"github.com/dataworkers/dw/internal/rest"
)

// DefaultTimeout bounds one call to an orchestrator when the config sets none.
const DefaultTimeout = 30 * time.Second

// MaxResponseBytes caps one answer of an orchestrator.
const MaxResponseBytes = 16 << 20

// APIError is an error answer from an orchestrator.
type APIError struct {
	System System
	Method string
	URL    string
	Status int
	// Message is the system's own explanation, when it gave one.
	Message string
}

// Error says which URL answered what.
func (e *APIError) Error() string {
	msg := e.Message
	if msg == "" {
		msg = http.StatusText(e.Status)
	}
	return fmt.Sprintf("%s: %s %s answered %d: %s", e.System, e.Method, e.URL, e.Status, msg)
}

// restClient is the HTTP plumbing shared by the Dagster, Airflow and dbt
// Cloud runners.
type restClient struct {
	system System
	base   *url.URL
	rc     *rest.Client
	// auth adds credentials; it reads them from the environment per call so
	// a variable set after start-up is picked up and a missing one is named.
	auth func(*http.Request) error
	// message pulls the system's explanation out of an error body.
	message func(body []byte) string
}

func newRESTClient(system System, svc *config.Service, defaultURL string) (*restClient, error) {
	raw := strings.TrimRight(strings.TrimSpace(svc.URL), "/")
	if raw == "" {
		raw = defaultURL
	}
	if raw == "" {
		return nil, fmt.Errorf("%s: orchestrators.%s.url is not set", system, system)
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("%s: url %q is not valid; want http(s)://host[:port]", system, raw)
	}
	timeout := svc.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	c := &restClient{system: system, base: u,
		auth: func(*http.Request) error { return nil }, message: func([]byte) string { return "" }}
	// The runners set auth after construction; the core asks for it per call.
	c.rc = rest.New(u, rest.Options{Name: string(system), Timeout: timeout, MaxResponseBytes: MaxResponseBytes,
		Auth: func(r *http.Request) error { return c.auth(r) }})
	return c, nil
}

// basicAuth authenticates with a user name and password read from the
// environment variables the config names, when it names them.
func basicAuth(svc *config.Service, system System) func(*http.Request) error {
	return func(r *http.Request) error {
		if svc.UsernameEnv == "" && svc.PasswordEnv == "" {
			return nil
		}
		user, err := config.Secret(svc.UsernameEnv, fmt.Sprintf("orchestrators.%s.username_env", system))
		if err != nil {
			return err
		}
		pass, err := config.Secret(svc.PasswordEnv, fmt.Sprintf("orchestrators.%s.password_env", system))
		if err != nil {
			return err
		}
		r.SetBasicAuth(user, pass)
		return nil
	}
}

// urlOf joins path segments, each escaped with url.PathEscape, and a
// query to the base URL: a segment taken from a request (a DAG id, a job
// id, a run id an answer gave) is one segment whatever it holds, so a
// '/', '?', '#' or '%' in it can never reach another endpoint. A last
// segment "" ends the path with a slash. "." and ".." are not escaped by
// PathEscape and are refused by each system's target rule instead.
func (c *restClient) urlOf(query url.Values, segments ...string) string {
	esc := make([]string, len(segments))
	for i, s := range segments {
		esc[i] = url.PathEscape(s)
	}
	return c.url("/"+strings.Join(esc, "/"), query)
}

// url joins a fixed path (no request values in it: those go through
// urlOf) and a query to the base URL.
func (c *restClient) url(path string, query url.Values) string {
	s := strings.TrimRight(c.base.String(), "/") + path
	if len(query) > 0 {
		s += "?" + query.Encode()
	}
	return s
}

// do sends one request and returns the status and body. A call that got
// no answer is a *rest.TransportError (named by the system): whether a
// trigger took effect is then unknown, which is why every Trigger is
// idempotent on its key. An answer over MaxResponseBytes is a
// *rest.TooLargeError; status codes are the caller's to judge.
func (c *restClient) do(ctx context.Context, method, target string, body any) (int, []byte, error) {
	resp, err := c.rc.DoURL(ctx, method, target, body)
	if err != nil {
		return 0, nil, err
	}
	return resp.Status, resp.Body, nil
}

// apiError builds the error for a non-success answer.
func (c *restClient) apiError(method, target string, status int, body []byte) *APIError {
	msg := c.message(body)
	if msg == "" {
		msg = rest.Trim(body, 300)
	}
	return &APIError{System: c.system, Method: method, URL: target, Status: status, Message: msg}
}

// decode reads a JSON answer, naming the URL when it is not what was expected.
func (c *restClient) decode(target string, body []byte, out any) error {
	if err := json.Unmarshal(body, out); err != nil {
		return fmt.Errorf("%s: %s answered something that is not the expected JSON: %w", c.system, target, err)
	}
	return nil
}
