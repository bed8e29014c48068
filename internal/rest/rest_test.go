package rest

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

func client(t *testing.T, srv *httptest.Server, o Options) *Client {
	t.Helper()
	u, err := ParseBase(srv.URL + "/base/")
	if err != nil {
		t.Fatal(err)
	}
	if o.Name == "" {
		o.Name = "test"
	}
	return New(u, o)
}

// HostileBody streams up to size bytes of JSON-looking text, with or
// without a declared length, stopping when the client hangs up.
func hostileBody(size int64, declare bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if declare {
			w.Header().Set("Content-Length", strconv.FormatInt(size, 10))
		}
		chunk := []byte(strings.Repeat("[", 64<<10))
		for sent := int64(0); sent < size; sent += int64(len(chunk)) {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	}
}

// A server answering 1 GiB costs at most the cap: the answer is refused
// with a *TooLargeError, with or without a Content-Length, on any status.
func TestHugeAnswerIsRefusedWithinTheCap(t *testing.T) {
	for _, declare := range []bool{false, true} {
		t.Run("content-length="+strconv.FormatBool(declare), func(t *testing.T) {
			srv := httptest.NewServer(hostileBody(1<<30, declare))
			defer srv.Close()
			c := client(t, srv, Options{MaxResponseBytes: 1 << 20, Timeout: 20 * time.Second})
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			var out any
			err := c.JSON(context.Background(), http.MethodGet, "/x", nil, nil, &out)
			runtime.ReadMemStats(&after)
			var tl *TooLargeError
			if !errors.As(err, &tl) || tl.Limit != 1<<20 || !strings.Contains(err.Error(), "more than 1048576 bytes") {
				t.Fatalf("err %v; want a TooLargeError at 1 MiB", err)
			}
			if grew := after.TotalAlloc - before.TotalAlloc; grew > 64<<20 {
				t.Errorf("allocated %d bytes reading a hostile answer capped at 1 MiB", grew)
			}
		})
	}
}

// An answer of exactly the cap is read; one byte more is refused.
func TestCapBoundary(t *testing.T) {
	body := `"` + strings.Repeat("a", 98) + `"` // 100 bytes
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, body+strings.Repeat(" ", len(r.URL.Query().Get("pad"))))
	}))
	defer srv.Close()
	c := client(t, srv, Options{MaxResponseBytes: 100})
	var s string
	if err := c.JSON(context.Background(), http.MethodGet, "/x", nil, nil, &s); err != nil || len(s) != 98 {
		t.Fatalf("at the cap: %q, %v", s, err)
	}
	var tl *TooLargeError
	if err := c.JSON(context.Background(), http.MethodGet, "/x", url.Values{"pad": {"x"}}, nil, &s); !errors.As(err, &tl) {
		t.Fatalf("one byte over: %v", err)
	}
}

// Requests carry the JSON body, the headers and the credentials; paths are
// joined to the base with escapes kept.
func TestRequestShape(t *testing.T) {
	var got struct {
		method, path, rawPath, query, accept, ctype, auth, body string
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got.method, got.path, got.rawPath, got.query = r.Method, r.URL.Path, r.URL.EscapedPath(), r.URL.RawQuery
		got.accept, got.ctype, got.auth, got.body = r.Header.Get("Accept"), r.Header.Get("Content-Type"), r.Header.Get("Authorization"), string(b)
		_, _ = io.WriteString(w, `{"ok":true}`)
	}))
	defer srv.Close()
	c := client(t, srv, Options{Auth: BearerAuth("s3cret"), ContentType: "application/vnd.x+json"})
	var out struct{ OK bool }
	err := c.JSON(context.Background(), http.MethodPost, "/subjects/"+url.PathEscape("a/b c"), url.Values{"q": {"1 2"}}, map[string]int{"n": 1}, &out)
	if err != nil || !out.OK {
		t.Fatalf("%+v, %v", out, err)
	}
	if got.method != "POST" || got.path != "/base/subjects/a/b c" || got.rawPath != "/base/subjects/a%2Fb%20c" || got.query != "q=1+2" ||
		got.accept != "application/json" || got.ctype != "application/vnd.x+json" || got.auth != "Bearer s3cret" || got.body != `{"n":1}` {
		t.Errorf("request %+v", got)
	}
	// Raw bytes are sent as they are, and basic auth is set.
	c = client(t, srv, Options{Auth: BasicAuth("u", "p")})
	if err := c.JSON(context.Background(), http.MethodPost, "/raw", nil, []byte(`{"raw":1}`), nil); err != nil {
		t.Fatal(err)
	}
	if got.body != `{"raw":1}` || !strings.HasPrefix(got.auth, "Basic ") {
		t.Errorf("raw request %+v", got)
	}
	// An auth error sends nothing.
	got.path = ""
	c = client(t, srv, Options{Auth: func(*http.Request) error { return errors.New("token env DW_X is not set") }})
	if err := c.JSON(context.Background(), http.MethodGet, "/nothing", nil, nil, nil); err == nil || !strings.Contains(err.Error(), "DW_X") || got.path != "" {
		t.Errorf("auth error: %v, sent %q", err, got.path)
	}
}

// Error answers carry the status and a trimmed body; non-JSON success is
// a DecodeError quoting the start of the answer.
func TestErrors(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/base/bad" {
			w.WriteHeader(http.StatusBadGateway)
			_, _ = io.WriteString(w, "  "+strings.Repeat("é", 1000)+"  ")
			return
		}
		_, _ = io.WriteString(w, "<html>not json</html>")
	}))
	defer srv.Close()
	c := client(t, srv, Options{})
	var e *Error
	err := c.JSON(context.Background(), http.MethodGet, "/bad", nil, nil, nil)
	if !errors.As(err, &e) || e.Status != 502 || len(e.Body) > maxErrorBody+len("…") || !strings.HasSuffix(e.Body, "…") || !strings.HasPrefix(e.Body, "é") {
		t.Fatalf("err %v", err)
	}
	var de *DecodeError
	var out map[string]any
	if err := c.JSON(context.Background(), http.MethodGet, "/html", nil, nil, &out); !errors.As(err, &de) || de.Body != "<html>not json</html>" {
		t.Fatalf("decode: %v", err)
	}
}

// A silent server is a TransportError that says it timed out; an
// unreachable one says it cannot be reached; a cancelled caller ends the
// call at once.
func TestTransportErrors(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	c := client(t, srv, Options{Timeout: 200 * time.Millisecond})
	start := time.Now()
	var te *TransportError
	err := c.JSON(context.Background(), http.MethodGet, "/slow", nil, nil, nil)
	if !errors.As(err, &te) || !te.TimedOut || !strings.Contains(err.Error(), "within 200ms") || time.Since(start) > 3*time.Second {
		t.Fatalf("slow: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := c.JSON(ctx, http.MethodGet, "/slow", nil, nil, nil); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
	u, _ := ParseBase("http://127.0.0.1:1")
	err = New(u, Options{Name: "x"}).JSON(context.Background(), http.MethodGet, "/", nil, nil, nil)
	if !errors.As(err, &te) || te.TimedOut || !strings.Contains(err.Error(), "cannot reach http://127.0.0.1:1/") {
		t.Errorf("unreachable: %v", err)
	}
}

func TestParseBase(t *testing.T) {
	for _, bad := range []string{"", "localhost:8083", "ftp://h", "http://", "http://h\x00", "file:///etc/passwd"} {
		if _, err := ParseBase(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	u, err := ParseBase(" https://h:1/p/ ")
	if err != nil || u.String() != "https://h:1/p" {
		t.Errorf("%v, %v", u, err)
	}
}

// A third-party client reading whole answers through CapTransport gets a
// *TooLargeError after the cap; an answer within it reads as it is.
func TestCapTransport(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/small" {
			_, _ = io.WriteString(w, strings.Repeat("x", 100))
			return
		}
		hostileBody(1<<30, r.URL.Path == "/declared")(w, r)
	}))
	defer srv.Close()
	hc := &http.Client{Transport: CapTransport(http.DefaultTransport, "third", 100)}
	read := func(path string) ([]byte, error) {
		resp, err := hc.Get(srv.URL + path)
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		return io.ReadAll(resp.Body)
	}
	if b, err := read("/small"); err != nil || len(b) != 100 {
		t.Fatalf("within the cap: %d bytes, %v", len(b), err)
	}
	for _, path := range []string{"/streamed", "/declared"} {
		b, err := read(path)
		var tl *TooLargeError
		if !errors.As(err, &tl) || len(b) > 100 {
			t.Errorf("%s: %d bytes, %v", path, len(b), err)
		}
	}
	// Through a Client, the cap of the transport is reported as such.
	u, _ := ParseBase(srv.URL)
	c := New(u, Options{Name: "x", Transport: CapTransport(http.DefaultTransport, "x", 100), MaxResponseBytes: 1 << 20})
	var tl *TooLargeError
	if _, err := c.Do(context.Background(), http.MethodGet, "/streamed", nil, nil); !errors.As(err, &tl) {
		t.Errorf("client over a capped transport: %v", err)
	}
}
