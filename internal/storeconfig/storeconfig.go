// Package storeconfig opens the store a configuration names, so every
// binary (the agents, dw) reaches the same state the same way.
package storeconfig

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/dataworkers/dw/internal/config"
	"github.com/dataworkers/dw/internal/store"
)

// Open opens the configured store: the SQLite file (creating its
// directory, private to the user, on first use) or PostgreSQL with the
// password read from the environment variable the config names.
func Open(ctx context.Context, cfg *config.Config) (*store.DB, error) {
	switch cfg.Store.Driver {
	case "", "sqlite":
		path := cfg.Store.Path
		if path == "" {
			return nil, fmt.Errorf("store.path is empty: name the SQLite file or set DW_HOME")
		}
		if err := prepareSQLite(path); err != nil {
			return nil, err
		}
		return store.OpenSQLite(ctx, path)
	case "postgres":
		dsn, err := PostgresDSN(cfg.Store)
		if err != nil {
			return nil, err
		}
		return store.OpenPostgres(ctx, dsn)
	default:
		return nil, fmt.Errorf("store.driver %q is unknown; valid: sqlite, postgres", cfg.Store.Driver)
	}
}

// PostgresDSN is the connection string with the password from the
// environment. Without password_env the URL is used as is (trust, peer or
// PGPASSWORD authentication).
func PostgresDSN(s config.Store) (string, error) {
	if s.URL == "" {
		return "", fmt.Errorf("store.url is empty: postgres needs a URL such as postgres://dw@db:5432/dw")
	}
	if s.PasswordEnv == "" {
		return s.URL, nil
	}
	pw, err := config.Secret(s.PasswordEnv, "store.password_env")
	if err != nil {
		return "", err
	}
	if strings.HasPrefix(s.URL, "postgres://") || strings.HasPrefix(s.URL, "postgresql://") {
		u, err := url.Parse(s.URL)
		if err != nil {
			return "", fmt.Errorf("store.url is not a valid URL: %w", err)
		}
		user := ""
		if u.User != nil {
			user = u.User.Username()
		}
		u.User = url.UserPassword(user, pw)
		return u.String(), nil
	}
	// A key=value connection string: quote the value as libpq expects.
	quoted := strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(pw)
	return s.URL + " password='" + quoted + "'", nil
}

// prepareSQLite creates the store's directory (0700) and file (0600) so
// that nobody else on the machine can read proposals, decisions or the
// receipts, and warns about an existing store other users can read: it was
// made by an older version or by hand, and only the owner can fix it.
func prepareSQLite(path string) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create the store's directory: %w", err)
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	switch {
	case err == nil:
		// An empty file is an empty SQLite database; SQLite creates the
		// -wal and -shm files with the database file's permissions.
		return f.Close()
	case !errors.Is(err, fs.ErrExist):
		return fmt.Errorf("create the store %s: %w", path, err)
	}
	warnIfShared(path, "store")
	warnIfShared(path+"-wal", "store's write-ahead log")
	return nil
}

// warnIfShared logs when other users may read what is at path.
func warnIfShared(path, what string) {
	fi, err := os.Stat(path)
	if err != nil {
		return
	}
	perm := fi.Mode().Perm()
	if perm&0o077 == 0 {
		return
	}
	fix := "chmod 600 " + path
	slog.Warn(fmt.Sprintf("the %s is readable by other users on this machine (mode %04o): they can read proposals, decisions and receipts; run: %s", what, perm, fix),
		"path", path)
}
