package warehouseproc

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dataworkers/dw/internal/config"
	"github.com/dataworkers/dw/internal/warehouse"
	"github.com/dataworkers/dw/internal/warehouse/duckdb/duckdbtest"
)

// TestChildForwardsTheEngineVerdict: ValidateQuery and Query through the
// warehouse child reach the locked DuckDB connection and come back as
// refusals (warehouse.ErrRefused, across the pipe) that carry no byte of
// the file the statement reached for.
func TestChildForwardsTheEngineVerdict(t *testing.T) {
	b := make([]byte, 12)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	marker := "MARKER" + hex.EncodeToString(b)
	dir := t.TempDir()
	secret := filepath.Join(dir, "secret.txt")
	if err := os.WriteFile(secret, []byte(marker+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "wh.duckdb")
	duckdbtest.File(t, path,
		`CREATE SCHEMA s`,
		`CREATE TABLE s.t AS SELECT range AS id FROM range(5)`,
		fmt.Sprintf(`CREATE VIEW s.leak AS SELECT content FROM read_text('%s')`, secret))
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	old := Command
	Command = func(string, string) (*exec.Cmd, error) {
		cmd := exec.Command(self, "-test.run=^$")
		cmd.Env = append(os.Environ(), childEnv+"=1")
		return cmd, nil
	}
	t.Cleanup(func() { Command = old })
	w, err := Open(context.Background(), agentConfig(t), &config.Warehouse{Name: "t", Kind: "duckdb", Path: path}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	ctx := context.Background()

	for sql, want := range map[string]string{
		"SELECT content AS value FROM read_text('" + secret + "')": "file and network access are disabled",
		"SELECT content AS value FROM s.leak":                      "file and network access are disabled",
		"SELECT * FROM glob('" + dir + "/*')":                      "file and network access are disabled",
		"SELECT 1 AS value; SELECT 2":                              "found 2 statements",
		"COPY s.t TO '" + filepath.Join(dir, "out.csv") + "'":      "only a single SELECT is accepted",
		"ATTACH '" + secret + "' AS x":                             "only a single SELECT is accepted",
		"SET enable_external_access = true":                        "statement type SET",
	} {
		verr := w.ValidateQuery(ctx, sql)
		_, qerr := w.Query(ctx, warehouse.Query{SQL: sql})
		for what, err := range map[string]error{"ValidateQuery": verr, "Query": qerr} {
			if !errors.Is(err, warehouse.ErrRefused) {
				t.Errorf("%s(%q) = %v; want a refusal", what, sql, err)
				continue
			}
			if strings.Contains(err.Error(), marker) {
				t.Errorf("%s(%q) carries the secret: %v", what, sql, err)
			}
		}
		if verr != nil && !strings.Contains(verr.Error(), want) {
			t.Errorf("ValidateQuery(%q) = %v; want %q", sql, verr, want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "out.csv")); err == nil {
		t.Error("COPY wrote its file")
	}
	if err := w.ValidateQuery(ctx, "SELECT count(*) AS value FROM s.t"); err != nil {
		t.Fatalf("a SELECT was refused: %v", err)
	}
	// An unknown table is the engine refusing the statement, named.
	if err := w.ValidateQuery(ctx, "SELECT * FROM s.nope"); !errors.Is(err, warehouse.ErrRefused) || !strings.Contains(err.Error(), "nope") {
		t.Errorf("unknown table: %v", err)
	}
}
