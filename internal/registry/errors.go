package registry

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"syscall"
	"time"
)

// Schema Registry error codes this package and its callers act on.
const (
	CodeSubjectNotFound        = 40401
	CodeVersionNotFound        = 40402
	CodeSchemaNotFound         = 40403
	CodeSubjectLevelNotSet     = 40408
	CodeIncompatible           = 409
	CodeInvalidSchema          = 42201
	CodeInvalidVersion         = 42202
	CodeInvalidCompatibilityLv = 42203
)

// APIError is an error answer from the registry: the endpoint, the HTTP
// status and the registry's own error_code and message.
type APIError struct {
	Method  string
	URL     string
	Status  int
	Code    int
	Message string
}

// Error names the endpoint and the registry's code and message.
func (e *APIError) Error() string {
	return fmt.Sprintf("schema registry %s %s: error %d: %s", e.Method, e.URL, e.Code, e.Message)
}

// UnreachableError means no answer came from the registry: refused,
// unresolvable, or silent past the timeout. Callers fall back to a local
// verdict and must say the registry was not reached.
type UnreachableError struct {
	URL      string // the registry's base URL
	Endpoint string // method and URL of the request that failed
	Timeout  time.Duration
	Cause    string // short cause: "connection refused", "timed out", …
	Err      error
}

// Error names the registry, the timeout, the cause and the request.
func (e *UnreachableError) Error() string {
	return fmt.Sprintf("schema registry %s not reached within %s: %s (%s)", e.URL, e.Timeout, e.Cause, e.Endpoint)
}

// Unwrap gives the transport error.
func (e *UnreachableError) Unwrap() error { return e.Err }

// SubjectNotFoundError is an unknown subject with the registry's subjects
// that are closest to it by name.
type SubjectNotFoundError struct {
	Subject string
	URL     string
	Closest []string
	Err     error
}

// Error names the subject and the closest existing ones.
func (e *SubjectNotFoundError) Error() string {
	switch {
	case e.Closest == nil:
		return fmt.Sprintf("unknown subject %q in schema registry %s", e.Subject, e.URL)
	case len(e.Closest) == 0:
		return fmt.Sprintf("unknown subject %q in schema registry %s; the registry has no subjects", e.Subject, e.URL)
	}
	return fmt.Sprintf("unknown subject %q in schema registry %s; closest: %s", e.Subject, e.URL, strings.Join(e.Closest, ", "))
}

// Unwrap gives the registry's 40401 error.
func (e *SubjectNotFoundError) Unwrap() error { return e.Err }

// ErrorCode returns the registry's error_code carried by err, or 0.
func ErrorCode(err error) int {
	var ae *APIError
	if errors.As(err, &ae) {
		return ae.Code
	}
	return 0
}

// IsUnreachable reports whether err means the registry gave no answer.
func IsUnreachable(err error) bool {
	var ue *UnreachableError
	return errors.As(err, &ue)
}

// cause names why a request got no answer, in a few words.
func cause(err error) string {
	var dns *net.DNSError
	var ne net.Error
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, syscall.ECONNRESET):
		return "connection reset"
	case errors.As(err, &dns):
		return "cannot resolve host " + dns.Name
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return "timed out"
	}
	for {
		next := errors.Unwrap(err)
		if next == nil {
			return err.Error()
		}
		err = next
	}
}
