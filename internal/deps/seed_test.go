package deps

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dataworkers/dw/internal/config"
	"github.com/dataworkers/dw/internal/store"
	"github.com/dataworkers/dw/internal/storeconfig"
)

// TestMain doubles as `dw demo seed`: with DW_TEST_SEED_CHILD set this test
// binary marks the embedded default's store seeded (ok) or fails (fail),
// counting its runs in a file, as the agents' seeding child would.
func TestMain(m *testing.M) {
	switch os.Getenv("DW_TEST_SEED_CHILD") {
	case "":
		os.Exit(m.Run())
	case "fail":
		fmt.Println("this line must not reach the MCP stream")
		os.Exit(3)
	}
	f, _ := os.OpenFile(os.Getenv("DW_TEST_SEED_COUNT"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	f.WriteString("x")
	f.Close()
	cfg, err := config.Load()
	if err == nil {
		var db *store.DB
		if db, err = storeconfig.Open(context.Background(), cfg); err == nil {
			err = store.PutSetting(context.Background(), db, EmbeddedSeededKey, "test", time.Now())
			db.Close()
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(0)
}

func seedChild(t *testing.T, mode, count string) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	old := Sibling
	Sibling = func(args ...string) (*exec.Cmd, error) {
		if strings.Join(args, " ") != "demo seed" {
			t.Errorf("ran dw %v, want dw demo seed", args)
		}
		cmd := exec.Command(self, "-test.run=^$")
		cmd.Env = append(os.Environ(), "DW_TEST_SEED_CHILD="+mode, "DW_TEST_SEED_COUNT="+count)
		return cmd, nil
	}
	t.Cleanup(func() { Sibling = old })
}

// TestSeedWithDW: on the embedded default the first store open runs dw
// demo seed and finds the store marked; a later open (another agent) does
// not run it again; a failing dw is reported as such and the store is not
// kept open; a configured store is never seeded.
func TestSeedWithDW(t *testing.T) {
	ctx := context.Background()
	home := t.TempDir()
	t.Setenv("DW_HOME", home)
	t.Setenv("DW_CONFIG", "")
	t.Chdir(t.TempDir()) // no ./dw.yaml
	cfg, err := config.Load()
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.EmbeddedDefault() {
		t.Fatal("expected the embedded default")
	}
	runs := filepath.Join(t.TempDir(), "runs")
	count := func() int { b, _ := os.ReadFile(runs); return len(b) }

	seedChild(t, "fail", runs)
	d := New("dw-test", cfg, nil, nil)
	d.SeedStore = SeedWithDW
	if _, err := d.Store(ctx); err == nil || !strings.Contains(err.Error(), "dw demo seed") {
		t.Fatalf("a failing dw demo seed: %v", err)
	}

	seedChild(t, "ok", runs)
	for i := range 2 {
		d := New("dw-test", cfg, nil, nil)
		d.SeedStore = SeedWithDW
		db, err := d.Store(ctx)
		if err != nil {
			t.Fatalf("agent %d: %v", i, err)
		}
		if _, _, ok, err := store.GetSetting(ctx, db, EmbeddedSeededKey); err != nil || !ok {
			t.Fatalf("agent %d: store not marked seeded (%v)", i, err)
		}
		d.Close()
	}
	if n := count(); n != 1 {
		t.Fatalf("dw demo seed ran %d times for two agents, want 1", n)
	}

	conf, err := config.Parse("dw.yaml", []byte("home: "+t.TempDir()+"\n"))
	if err != nil {
		t.Fatal(err)
	}
	d = New("dw-test", conf, nil, nil)
	d.SeedStore = SeedWithDW
	if _, err := d.Store(ctx); err != nil {
		t.Fatal(err)
	}
	d.Close()
	if n := count(); n != 1 {
		t.Fatalf("a configured store was seeded (runs %d)", n)
	}
}
