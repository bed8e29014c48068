//go:build unix

package fileinput

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestRefusesWhatIsNotARegularFile(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	zeroLink := filepath.Join(dir, "manifest.json")
	if err := os.Symlink("/dev/zero", zeroLink); err != nil {
		t.Fatal(err)
	}
	sparse := filepath.Join(dir, "sparse.json")
	f, err := os.Create(sparse)
	if err != nil {
		t.Fatal(err)
	}
	// 1 TiB of holes: only the size check stands between it and memory.
	if err := f.Truncate(1 << 40); err != nil {
		t.Fatal(err)
	}
	f.Close()
	for _, c := range []struct {
		name, path, want string
	}{
		{"/dev/zero", "/dev/zero", "character device"},
		{"FIFO with no writer", fifo, "named pipe"},
		{"directory", dir, "directory"},
		{"symlink to /dev/zero", zeroLink, "character device"},
		{"sparse 1 TiB file", sparse, "at most 1048576"},
		{"nonexistent", filepath.Join(dir, "nope.json"), "no file at"},
		{"empty path", "", "empty"},
	} {
		t.Run(c.name, func(t *testing.T) {
			done := make(chan error, 1)
			go func() {
				_, err := ReadRegular(context.Background(), "path", c.path, 1<<20)
				done <- err
			}()
			select {
			case err := <-done:
				if err == nil || !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "argument 'path': ") {
					t.Errorf("err = %v, want it to name the argument and say %q", err, c.want)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("hung")
			}
		})
	}
}

func TestReadsARegularFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.json")
	want := strings.Repeat(`{"k":1}`, 500000) // several chunks
	if err := os.WriteFile(path, []byte(want), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := ReadRegular(context.Background(), "path", path, int64(len(want)))
	if err != nil || string(got) != want {
		t.Fatalf("read %d bytes, err %v", len(got), err)
	}
	if _, err := ReadRegular(context.Background(), "path", path, int64(len(want)-1)); err == nil {
		t.Error("file one byte over the cap was read")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := ReadRegular(ctx, "path", path, 1<<30); err == nil {
		t.Error("read with a cancelled context")
	}
}

func TestMaxBytesFromEnv(t *testing.T) {
	for v, want := range map[string]int64{"": DefaultMaxBytes, "1000": 1000, "-5": DefaultMaxBytes, "big": DefaultMaxBytes} {
		t.Setenv("DW_MAX_FILE_BYTES", v)
		if got := MaxBytes(); got != want {
			t.Errorf("%q: %d, want %d", v, got, want)
		}
	}
}
