// Package childtest runs a warehouse child's test binary as the child
// itself, so the tests of cmd/dw-warehouse-<kind> start it as an agent
// does, through warehouseproc's proxy. Tests only.
package childtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/dataworkers/dw/internal/config"
	"github.com/dataworkers/dw/internal/warehouse"
	"github.com/dataworkers/dw/internal/warehouseproc"
)

const (
	// asChild makes the test binary run the child's main (Main).
	asChild = "DW_TEST_AS_WAREHOUSE_CHILD"
	// Pids names a file each child started appends its pid to.
	Pids = "DW_TEST_WAREHOUSE_CHILD_PIDS"
)

// Main is the test binary's TestMain: as a child it runs main and exits
// (recording its pid where Pids says), else it runs the tests.
func Main(m *testing.M, main func()) {
	if os.Getenv(asChild) != "" {
		if name := os.Getenv(Pids); name != "" {
			if f, err := os.OpenFile(name, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600); err == nil {
				fmt.Fprintln(f, os.Getpid())
				f.Close()
			}
		}
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// Open points the agents' Command at this test binary as the child, for
// every kind (so a test can hand the child a warehouse of another kind),
// and returns the proxy for the warehouse wc of cfg, closed when the test
// ends.
func Open(t *testing.T, cfg *config.Config, wc *config.Warehouse) warehouse.Warehouse {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	old := warehouseproc.Command
	warehouseproc.Command = func(string, string) (*exec.Cmd, error) {
		cmd := exec.Command(self)
		cmd.Env = append(os.Environ(), asChild+"=1")
		return cmd, nil
	}
	t.Cleanup(func() { warehouseproc.Command = old })
	w, err := warehouseproc.Open(context.Background(), cfg, wc, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	return w
}

// Usage checks that the child given an argument exits 2 with its usage
// line on stderr and nothing on stdout (the agent's protocol stream).
func Usage(t *testing.T, kind string) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self, "serve")
	cmd.Env = append(os.Environ(), asChild+"=1")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 2 {
		t.Fatalf("with an argument: %v; want exit status 2", err)
	}
	if stdout.Len() != 0 || !strings.HasPrefix(stderr.String(), "usage: "+warehouseproc.ChildPrefix+kind+" ") {
		t.Fatalf("stdout %q, stderr %q; want nothing on stdout and the usage on stderr", stdout.String(), stderr.String())
	}
}

// RefusesOtherKinds checks that the child of kind, handed a warehouse of
// every other kind, answers an error naming both kinds on every call and
// opens nothing: an agent never sends one (it picks the child by kind),
// so the child does not trust that it did not.
func RefusesOtherKinds(t *testing.T, kind string) {
	t.Helper()
	for _, other := range warehouseproc.Kinds() {
		if other == kind {
			continue
		}
		dir := t.TempDir()
		cfg := &config.Config{Source: dir + "/dw.yaml", Home: dir}
		wc := &config.Warehouse{Name: "wh", Kind: other, Path: dir + "/x.duckdb", Project: "p", Account: "a", User: "u", PasswordEnv: "DW_TEST_UNSET"}
		w := Open(t, cfg, wc)
		for i := 0; i < 2; i++ {
			_, err := w.ListTables(context.Background())
			if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("of kind %q", other)) || !strings.Contains(err.Error(), kind+" warehouses only") {
				t.Fatalf("the %s child given a %s warehouse, call %d: %v; want an error naming both kinds", kind, other, i, err)
			}
		}
		if entries, _ := os.ReadDir(dir); len(entries) != 0 {
			t.Fatalf("the %s child given a %s warehouse left %d files in its directory; want none", kind, other, len(entries))
		}
	}
}
