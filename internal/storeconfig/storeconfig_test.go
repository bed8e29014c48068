package storeconfig

import (
	"context"
	"log/slog"
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

// TestStoreIsPrivate: a new store is created 0600 in a 0700 directory,
// whatever the umask, and opening a store others can read warns on stderr
// (slog) naming the fix.
func TestStoreIsPrivate(t *testing.T) {
	cases := []struct {
		name     string
		existing os.FileMode // 0: no file before Open
		dirMode  os.FileMode
		wantWarn []string
	}{
		{name: "new store", dirMode: 0},
		{name: "existing private store", existing: 0o600, dirMode: 0o700},
		{name: "existing world-readable store", existing: 0o644, dirMode: 0o700, wantWarn: []string{"store is readable by other users", "chmod 600"}},
		{name: "existing private store in a listable directory", existing: 0o600, dirMode: 0o755},
		{name: "existing group-readable store", existing: 0o640, dirMode: 0o700, wantWarn: []string{"store is readable by other users", "mode 0640"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "home")
			path := filepath.Join(dir, "dw.db")
			if c.dirMode != 0 {
				if err := os.MkdirAll(dir, c.dirMode); err != nil {
					t.Fatal(err)
				}
				if err := os.Chmod(dir, c.dirMode); err != nil {
					t.Fatal(err)
				}
			}
			if c.existing != 0 {
				if err := os.WriteFile(path, nil, c.existing); err != nil {
					t.Fatal(err)
				}
				if err := os.Chmod(path, c.existing); err != nil {
					t.Fatal(err)
				}
			}
			var logs strings.Builder
			prev := slog.Default()
			slog.SetDefault(slog.New(slog.NewTextHandler(&logs, nil)))
			defer slog.SetDefault(prev)
			db, err := Open(context.Background(), &config.Config{Store: config.Store{Driver: "sqlite", Path: path}})
			if err != nil {
				t.Fatal(err)
			}
			db.Close()
			if c.existing == 0 {
				if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
					t.Errorf("new store mode %04o, want 0600", fi.Mode().Perm())
				}
				if fi, _ := os.Stat(dir); fi.Mode().Perm() != 0o700 {
					t.Errorf("new directory mode %04o, want 0700", fi.Mode().Perm())
				}
				if fi, err := os.Stat(path + "-wal"); err == nil && fi.Mode().Perm()&0o077 != 0 {
					t.Errorf("write-ahead log mode %04o, want private", fi.Mode().Perm())
				}
			}
			for _, w := range c.wantWarn {
				if !strings.Contains(logs.String(), w) {
					t.Errorf("log lacks %q:\n%s", w, logs.String())
				}
			}
			if len(c.wantWarn) == 0 && strings.Contains(logs.String(), "readable by other users") {
				t.Errorf("unexpected warning:\n%s", logs.String())
			}
		})
	}
}
