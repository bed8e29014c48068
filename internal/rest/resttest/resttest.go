// Package resttest is a hostile server for the REST clients' tests: one
// that answers far more than any client may read.
package resttest

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"

	"github.com/dataworkers/dw/internal/rest"
)

// GiB is the size of the hostile answer: enough to kill the process if a
// client read it whole.
const GiB = 1 << 30

// HugeServer answers every request with status and 1 GiB of JSON-looking
// bytes, without a Content-Length, stopping when the client hangs up.
func HugeServer(t testing.TB, status int) *httptest.Server {
	t.Helper()
	chunk := []byte(strings.Repeat(`{"a":[`, 16<<10))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		for sent := 0; sent < GiB; sent += len(chunk) {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// RequireBounded runs call against a hostile server and fails the test
// unless it returns a *rest.TooLargeError (found with errors.As, so a
// client may wrap it) having allocated at most maxAlloc bytes.
func RequireBounded(t testing.TB, maxAlloc uint64, call func() error) {
	t.Helper()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	err := call()
	runtime.ReadMemStats(&after)
	var tl *rest.TooLargeError
	if !errors.As(err, &tl) {
		t.Fatalf("a 1 GiB answer gave %v; want it refused as too large", err)
	}
	grew := after.TotalAlloc - before.TotalAlloc
	t.Logf("a 1 GiB answer was refused at %d MiB, allocating %d MiB", tl.Limit>>20, grew>>20)
	if grew > maxAlloc {
		t.Errorf("allocated %d MiB reading a hostile answer; want at most %d MiB", grew>>20, maxAlloc>>20)
	}
}

// RequireBoundedError is RequireBounded for a client that may report the
// refused answer in its own words: any error will do, within maxAlloc.
func RequireBoundedError(t testing.TB, maxAlloc uint64, call func() error) {
	t.Helper()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	err := call()
	runtime.ReadMemStats(&after)
	if err == nil {
		t.Fatal("a 1 GiB answer was accepted")
	}
	if grew := after.TotalAlloc - before.TotalAlloc; grew > maxAlloc {
		t.Errorf("allocated %d MiB reading a hostile answer; want at most %d MiB", grew>>20, maxAlloc>>20)
	}
}
