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
