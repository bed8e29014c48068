package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestDefaultUsesDataDirectory(t *testing.T) {
	home := t.TempDir()
	t.Setenv("DW_HOME", home)
	t.Setenv("DW_CONFIG", "")
	t.Chdir(t.TempDir()) // no ./dw.yaml here
	c, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	if !c.EmbeddedDefault() {
		t.Error("no file should mean the embedded default")
	}
	if c.Store.Driver != "sqlite" || c.Store.Path != filepath.Join(home, "dw.db") {
		t.Errorf("store = %+v", c.Store)
	}
	if len(c.Warehouses) != 1 || c.Warehouses[0].Kind != "duckdb" || c.Warehouses[0].Path != filepath.Join(home, "demo.duckdb") {
		t.Errorf("warehouses = %+v", c.Warehouses)
	}
}

func TestParseFull(t *testing.T) {
	t.Setenv("DW_HOME", "")
	src := `
home: /tmp/dwtest
store:
  driver: postgres
  url: postgres://dw@db:5432/dw
  password_env: DW_PG_PASSWORD
warehouses:
  - name: analytics
    kind: snowflake
    account: acme-xy123
    user: DW_AGENT
    password_env: SNOWFLAKE_PASSWORD
    warehouse: CHECKS_XS
people:
  - id: sam
    name: Sam Okafor
    slack_id: U01SAM
    os_users: [sam]
  - id: bea
    name: Bea Lindqvist
domains:
  - name: streaming
    assets: ["kafka://*", "schema://*"]
    autonomy: L3
    owners: [sam]
    copy: [bea]
    approval_expiry: 90m
`
	c, err := Parse("dw.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	d := c.Domains[0]
	if d.Autonomy != "L3" || d.ApprovalExpiry != 90*time.Minute || len(d.Approvers) != 1 || d.Approvers[0] != "sam" {
		t.Errorf("domain = %+v", d)
	}
	if p, ok := c.PersonForOSUser("sam"); !ok || p.ID != "sam" {
		t.Errorf("os user mapping: %v %v", p, ok)
	}
	if c.Warehouses[0].Compute != "CHECKS_XS" {
		t.Errorf("warehouse = %+v", c.Warehouses[0])
	}
}

func TestMalformedNamesFileLineAndKey(t *testing.T) {
	cases := []struct {
		name, src, want string
	}{
		{"unknown key", "store:\n  driver: sqlite\n  pth: x\n", "dw.yaml"},
		{"bad level", "people:\n  - id: sam\ndomains:\n  - name: billing\n    owners: [sam]\n    autonomy: L9\n", "dw.yaml:6: domains[0].autonomy: unknown level \"L9\"; valid: L0, L1, L2, L3, L4"},
		{"unknown owner", "people:\n  - id: sam\ndomains:\n  - name: billing\n    owners: [pat]\n", "domains[0].owners[0]: unknown person \"pat\"; defined: sam"},
		{"bad driver", "store:\n  driver: mysql\n", "dw.yaml:2: store.driver: unknown driver \"mysql\"; valid: sqlite, postgres"},
		{"bad kind", "warehouses:\n  - name: w\n    kind: redshift\n", "dw.yaml:3: warehouses[0].kind: unknown kind \"redshift\""},
		{"password in url", "store:\n  driver: postgres\n  url: postgres://dw:hunter2@db/dw\n", "store.url: holds a password"},
		{"bad yaml", "store: [\n", "dw.yaml"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("dw.yaml", []byte(tc.src))
			if err == nil {
				t.Fatal("accepted")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q\nwant it to contain %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "hunter2") {
				t.Errorf("error prints a secret: %q", err)
			}
		})
	}
	// The unknown key is named with its line.
	_, err := Parse("dw.yaml", []byte("store:\n  driver: sqlite\n  pth: x\n"))
	if !strings.Contains(err.Error(), "pth") || !strings.Contains(err.Error(), "3") {
		t.Errorf("unknown key error %q should name pth and line 3", err)
	}
}

func TestSecretNamesTheVariable(t *testing.T) {
	os.Unsetenv("DW_TEST_NOPE")
	_, err := Secret("DW_TEST_NOPE", "warehouses[0].password_env")
	if err == nil || !strings.Contains(err.Error(), "DW_TEST_NOPE") || !strings.Contains(err.Error(), "warehouses[0].password_env") {
		t.Errorf("err = %v", err)
	}
	t.Setenv("DW_TEST_YES", "s3cret")
	if v, err := Secret("DW_TEST_YES", "x"); err != nil || v != "s3cret" {
		t.Errorf("got %q %v", v, err)
	}
}

// TestSnowflakeEndpoint: a Snowflake section's endpoint reaches the driver
// as scheme, host and port, and anything the driver would drop or that
// would send the credential in the clear is refused at the endpoint key,
// with what is valid.
func TestSnowflakeEndpoint(t *testing.T) {
	ok := []struct {
		endpoint, protocol, host string
		port                     int
	}{
		{"", "", "", 0},
		// The driver would take port 0 for 443 whatever the scheme, so
		// each scheme's own port is given.
		{"https://acme.privatelink.snowflakecomputing.com", "https", "acme.privatelink.snowflakecomputing.com", 443},
		{"https://sf-proxy.corp.example:8443/", "https", "sf-proxy.corp.example", 8443},
		{"http://127.0.0.1:50123", "http", "127.0.0.1", 50123},
		{"http://localhost:8080", "http", "localhost", 8080},
		{"http://localhost", "http", "localhost", 80},
		// The driver writes host+":"+port: an IPv6 address keeps its brackets.
		{"http://[::1]:9000", "http", "[::1]", 9000},
		{"https://[2001:db8::7]", "https", "[2001:db8::7]", 443},
		{"https://acme.snowflakecomputing.com:", "https", "acme.snowflakecomputing.com", 443}, // an empty port is the scheme's
	}
	for _, tc := range ok {
		w := Warehouse{Name: "sf", Kind: "snowflake", Account: "acme", User: "u", PasswordEnv: "P", Endpoint: tc.endpoint}
		protocol, host, port, err := w.SnowflakeEndpoint()
		if err != nil || protocol != tc.protocol || host != tc.host || port != tc.port {
			t.Errorf("%q: %q %q %d %v; want %q %q %d", tc.endpoint, protocol, host, port, err, tc.protocol, tc.host, tc.port)
		}
		c := &Config{Warehouses: []Warehouse{w}}
		if errs := c.validate(); len(errs) != 0 {
			t.Errorf("%q: refused: %v", tc.endpoint, errs)
		}
	}
	for _, bad := range []string{
		"http://sf-proxy.corp.example",      // the password in the clear
		"http://10.0.0.8:8080",              // not loopback either
		"http://localhost.evil.example",     // a name is not resolved, and this one is not localhost
		"ftp://acme.snowflakecomputing.com", // not a scheme the driver speaks
		"acme.snowflakecomputing.com",       // no scheme
		"https://acme.snowflakecomputing.com/session/v1",
		"https://acme.snowflakecomputing.com?warehouse=x",
		"https://user:hunter2@acme.snowflakecomputing.com",
		"https://dw:hunter2@acme example",    // not a URL, with a password in it
		"https://dw:hunter2%zz@acme.example", // a bad escape in the password
		"https://dw:hunter2@[::1",            // an unclosed address
		"dw:hunter2@acme.snowflakecomputing.com",
		"http://[::1%25lo]:9000", // a zone: refused with the rest of http's non-loopback

		"https://acme.snowflakecomputing.com:0",
		"https://acme.snowflakecomputing.com:70000",
		"https://acme.snowflakecomputing.com:https",
		"https://",
		"https://acme\x00.snowflakecomputing.com",
		"mailto:dw@example.com",
		strings.Repeat("https://a", 10000),
	} {
		w := Warehouse{Name: "sf", Kind: "snowflake", Account: "acme", User: "u", PasswordEnv: "P", Endpoint: bad}
		if protocol, host, port, err := w.SnowflakeEndpoint(); err == nil {
			t.Errorf("%q accepted as %q %q %d", bad, protocol, host, port)
			continue
		}
		c := &Config{Warehouses: []Warehouse{w}}
		errs := c.validate()
		if len(errs) != 1 || errs[0].path != "$.warehouses[0].endpoint" {
			t.Errorf("%q: errors %v; want one at $.warehouses[0].endpoint", bad, errs)
		}
		if strings.Contains(bad, "hunter2") && strings.Contains(errs[0].msg, "hunter2") {
			t.Errorf("the error repeats the password: %q", errs[0].msg)
		}
	}
}
