package snowflake

import (
	"context"
	"fmt"
	"net"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/dataworkers/dw/internal/config"
	"github.com/dataworkers/dw/internal/warehouse"
	"github.com/dataworkers/dw/internal/warehouse/snowflake/snowflaketest"
)

// TestOpenSectionMapsEveryKey: each Snowflake key of a dw.yaml section
// reaches the driver's configuration (dw.yaml's warehouse is Snowflake's
// compute warehouse), and a section of another kind opens nothing.
func TestOpenSectionMapsEveryKey(t *testing.T) {
	t.Setenv("DW_TEST_SECTION_PW", "secret")
	wc := &config.Warehouse{Name: "sf", Kind: "snowflake", Account: "acme-xy12345", User: "dw_reader", PasswordEnv: "DW_TEST_SECTION_PW",
		Role: "READER", Database: "ANALYTICS", Schema: "MARTS", Compute: "REPORTING_WH", Timeout: 42 * time.Second}
	w, err := OpenSection(context.Background(), wc)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	got := w.(*Warehouse).cfg
	want := Config{Name: "sf", Account: "acme-xy12345", User: "dw_reader", Warehouse: "REPORTING_WH", Role: "READER", Database: "ANALYTICS",
		Schema: "MARTS", PasswordEnv: "DW_TEST_SECTION_PW", Timeout: 42 * time.Second}
	if got != want {
		t.Fatalf("driver configuration %+v; want %+v", got, want)
	}
	for _, kind := range []string{"duckdb", "bigquery", ""} {
		if w, err := OpenSection(context.Background(), &config.Warehouse{Name: "x", Kind: kind}); err == nil || w != nil {
			t.Fatalf("kind %q: %v, %v; want an error and no warehouse", kind, w, err)
		}
	}
}

// TestOpenSectionEndpoint: a section's endpoint is where the driver logs
// in and sends its statements (here the Snowflake fake on loopback, over
// http, which only loopback is allowed); one the driver would misread or
// that sends the credential in the clear opens nothing.
func TestOpenSectionEndpoint(t *testing.T) {
	f := snowflaketest.New(t)
	f.Results["SELECT 42"] = fortyTwo
	host, port := f.Addr()
	t.Setenv("DW_TEST_SECTION_PW", "secret")
	wc := &config.Warehouse{Name: "sf", Kind: "snowflake", Account: "acme-xy12345", User: "dw_reader", PasswordEnv: "DW_TEST_SECTION_PW",
		Database: "ANALYTICS", Endpoint: fmt.Sprintf("http://%s:%d", host, port)}
	w, err := OpenSection(context.Background(), wc)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if got := w.(*Warehouse).cfg; got.Host != host || got.Port != port || got.Protocol != "http" {
		t.Fatalf("driver endpoint %s://%s:%d; want http://%s:%d", got.Protocol, got.Host, got.Port, host, port)
	}
	res, err := w.Query(context.Background(), warehouse.Query{SQL: "SELECT 42 AS n", Agent: "dw-quality", Tool: "list_tables"})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Rows) != 1 || res.Rows[0][0] != "42" || len(f.Queries()) != 1 {
		t.Fatalf("rows %v after %d statements at the endpoint; want 42 after one", res.Rows, len(f.Queries()))
	}
	data, _ := f.Login()["data"].(map[string]any)
	if data["LOGIN_NAME"] != "dw_reader" {
		t.Errorf("the endpoint saw login %v; want dw_reader", data["LOGIN_NAME"])
	}
	// An IPv6 endpoint, where the machine has IPv6 loopback: the driver
	// writes host+":"+port, so the brackets must reach it.
	if ln, err := net.Listen("tcp6", "[::1]:0"); err == nil {
		srv := httptest.NewUnstartedServer(f)
		srv.Listener.Close()
		srv.Listener = ln
		srv.Start()
		defer srv.Close()
		v6 := *wc
		v6.Endpoint = fmt.Sprintf("http://[::1]:%d", ln.Addr().(*net.TCPAddr).Port)
		w, err := OpenSection(context.Background(), &v6)
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		if _, err := w.Query(context.Background(), warehouse.Query{SQL: "SELECT 42 AS n", Agent: "dw-quality", Tool: "list_tables"}); err != nil {
			t.Fatalf("through %s: %v", v6.Endpoint, err)
		}
	}
	for _, bad := range []string{"http://sf-proxy.corp.example", "https://acme.snowflakecomputing.com/x", "sf-proxy:443"} {
		wc := *wc
		wc.Endpoint = bad
		if w, err := OpenSection(context.Background(), &wc); err == nil || w != nil {
			t.Errorf("endpoint %q: %v, %v; want an error and no warehouse", bad, w, err)
		}
	}
}
