//go:build unix

package config

import (
	"os"
	"path/filepath"
	"testing"
)

// TestPrivateFiles: after PrivateFiles, what the process creates with the
// usual modes (0644 files, 0755 directories, as DuckDB and os.MkdirAll
// callers do) is readable by its user alone.
func TestPrivateFiles(t *testing.T) {
	PrivateFiles()
	dir := filepath.Join(t.TempDir(), "home", "nested")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "demo.duckdb")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]os.FileMode{dir: 0o700, filepath.Dir(dir): 0o700, file: 0o600} {
		fi, err := os.Stat(path)
		if err != nil || fi.Mode().Perm() != want {
			t.Errorf("%s: mode %v (%v), want %04o", path, fi.Mode().Perm(), err, want)
		}
	}
}
