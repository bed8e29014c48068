//go:build unix

package fileinput

import (
	"context"
	"fmt"
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

// TestErrorsNeverQuoteTheFile: a path can name a private key or a
// credentials file, and the error goes to the model. A file that is not a
// JSON document is refused with its size and kind, never its bytes.
func TestErrorsNeverQuoteTheFile(t *testing.T) {
	dir := t.TempDir()
	secret := "AKIAIOSFODNN7EXAMPLE wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
	cases := []struct {
		name, content, want string
		read                func(context.Context, string, string, int64) ([]byte, error)
	}{
		{"binary with a secret-like start", "\x00\x01" + secret + "\xff\xfe", "binary data", ReadRegular},
		{"binary as JSON", "\x7fELF" + secret, "binary data", ReadJSON},
		{"gzip", "\x1f\x8b\x08\x00" + secret, "application/x-gzip", ReadJSON},
		{"invalid UTF-8", "{\"k\":\"" + secret + "\xc3\x28\"}", "binary data", ReadJSON},
		{"credentials file", "[default]\naws_access_key_id=" + secret + "\n", "not valid JSON", ReadJSON},
		{"private key", "-----BEGIN OPENSSH PRIVATE KEY-----\n" + secret + "\n", "not valid JSON", ReadJSON},
		{"truncated JSON", `{"metadata": {"token": "` + secret, "not valid JSON", ReadJSON},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(dir, fmt.Sprintf("f%d.json", i))
			if err := os.WriteFile(path, []byte(c.content), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := c.read(context.Background(), "path", path, 1<<20)
			if err == nil {
				t.Fatal("accepted")
			}
			msg := strings.TrimPrefix(err.Error(), "argument 'path': "+path)
			if !strings.Contains(msg, c.want) || !strings.Contains(msg, fmt.Sprint(len(c.content))) {
				t.Errorf("error %q does not say %q and the size %d", msg, c.want, len(c.content))
			}
			// No run of the file's bytes, however short, and no quoted
			// character or escape.
			for j := 0; j+3 <= len(c.content); j++ {
				if w := c.content[j : j+3]; strings.Contains(msg, w) && strings.Trim(w, " \n") == w && !commonWord(w) {
					t.Errorf("error quotes the file (%q): %s", w, msg)
					break
				}
			}
			for _, q := range []string{`'`, `"`, `\x`, `\u`, "\x00"} {
				if strings.Contains(msg, q) {
					t.Errorf("error quotes something (%q): %s", q, msg)
				}
			}
		})
	}
	// A JSON document and newline-delimited values are read.
	for i, ok := range []string{`{"a":[1,2]}`, "\xef\xbb\xbf{\"a\":1}", "{\"a\":1}\n{\"b\":2}\n", `[{"a":1}]`, `"text"`} {
		path := filepath.Join(dir, fmt.Sprintf("ok%d.json", i))
		if err := os.WriteFile(path, []byte(ok), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := ReadJSON(context.Background(), "path", path, 1<<20); err != nil {
			t.Errorf("%q refused: %v", ok, err)
		}
	}
}

// commonWord: three letters the error's own words may share with a file.
func commonWord(w string) bool {
	for _, s := range []string{"JSON", "binary", "data", "application", "valid", "bytes", "the", "path", "file", "text", "document", "give", "complete", "syntax", "breaks", "line", "gzip", "octet", "stream", "content", "looks", "like", "YAML", "not", "is"} {
		if strings.Contains(s, w) {
			return true
		}
	}
	return false
}
