package storeconfig

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dataworkers/dw/internal/config"
	"github.com/dataworkers/dw/internal/store/storetest"
)

func TestOpenSQLiteCreatesDirectory(t *testing.T) {
	path := filepath.Join(t.TempDir(), "nested", "deeper", "dw.db")
	db, err := Open(context.Background(), &config.Config{Store: config.Store{Driver: "sqlite", Path: path}})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := os.Stat(path); err != nil {
		t.Errorf("store file: %v", err)
	}
	if info, _ := os.Stat(filepath.Dir(path)); info.Mode().Perm() != 0o700 {
		t.Errorf("directory mode %v, want 0700", info.Mode().Perm())
	}
}

func TestOpenPostgres(t *testing.T) {
	url := storetest.PostgresSchemaURL(t)
	t.Setenv("DW_TEST_STORE_PW", "unused-under-trust-auth")
	db, err := Open(context.Background(), &config.Config{Store: config.Store{Driver: "postgres", URL: url, PasswordEnv: "DW_TEST_STORE_PW"}})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if db.Dialect() != "postgres" || strings.Contains(db.Source(), "unused-under-trust-auth") {
		t.Errorf("dialect %s, source %s (must not show the password)", db.Dialect(), db.Source())
	}
}

func TestPostgresDSN(t *testing.T) {
	t.Setenv("PW", `s3cr'et@x`)
	got, err := PostgresDSN(config.Store{URL: "postgres://dw@db:5432/dw?sslmode=require", PasswordEnv: "PW"})
	if err != nil || got != "postgres://dw:s3cr%27et%40x@db:5432/dw?sslmode=require" {
		t.Errorf("URL form: %q, %v", got, err)
	}
	got, err = PostgresDSN(config.Store{URL: "host=db user=dw", PasswordEnv: "PW"})
	if err != nil || got != `host=db user=dw password='s3cr\'et@x'` {
		t.Errorf("key=value form: %q, %v", got, err)
	}
	if _, err := PostgresDSN(config.Store{URL: "postgres://dw@db/dw", PasswordEnv: "DW_UNSET_VAR"}); err == nil || !strings.Contains(err.Error(), "DW_UNSET_VAR") {
		t.Errorf("unset variable: %v", err)
	}
	if got, _ := PostgresDSN(config.Store{URL: "postgres://dw@db/dw"}); got != "postgres://dw@db/dw" {
		t.Errorf("no password_env: %q", got)
	}
	if _, err := Open(context.Background(), &config.Config{Store: config.Store{Driver: "mysql"}}); err == nil || !strings.Contains(err.Error(), "valid: sqlite, postgres") {
		t.Errorf("unknown driver: %v", err)
	}
}
