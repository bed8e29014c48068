package orchestrate

import (
	"context"
	"encoding/json"
	"errors"
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

// TransportError is a call that got no answer: the system was unreachable
// or did not answer in time. Whether a trigger took effect is then
// unknown, which is why every Trigger is idempotent on its key.
type TransportError struct {
	System  System
	Method  string
	URL     string
	Timeout time.Duration
	// TimedOut is true when the system was reached but did not answer in time.
	TimedOut bool
	Err      error
}

// Error names the URL and the timeout so the reader knows where to look.
func (e *TransportError) Error() string {
	if e.TimedOut {
		return fmt.Sprintf("%s: %s %s got no answer within the %s timeout: %v", e.System, e.Method, e.URL, e.Timeout, e.Err)
	}
	return fmt.Sprintf("%s: cannot reach %s (%s, timeout %s): %v", e.System, e.URL, e.Method, e.Timeout, e.Err)
}

// Unwrap returns the underlying network error.
func (e *TransportError) Unwrap() error { return e.Err }

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
	system  System
	base    *url.URL
	rc      *rest.Client
	timeout time.Duration
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
	c := &restClient{system: system, base: u, timeout: timeout,
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

// url joins a path (already escaped where needed) and a query to the
// base URL.
func (c *restClient) url(path string, query url.Values) string {
	s := strings.TrimRight(c.base.String(), "/") + path
	if len(query) > 0 {
		s += "?" + query.Encode()
	}
	return s
}

// do sends one request and returns the status and body. Transport
// failures become *TransportError; an answer over MaxResponseBytes is a
// *rest.TooLargeError; status codes are the caller's to judge.
func (c *restClient) do(ctx context.Context, method, target string, body any) (int, []byte, error) {
	resp, err := c.rc.DoURL(ctx, method, target, body)
	var te *rest.TransportError
	if errors.As(err, &te) {
		return 0, nil, &TransportError{System: c.system, Method: method, URL: target, Timeout: c.timeout, TimedOut: te.TimedOut, Err: te.Err}
	}
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
