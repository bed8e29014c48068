// Package fileinput reads a file named by a tool argument. A path comes
// from a model, so it may name anything: /dev/zero (endless), a FIFO (blocks
// forever on open and read), a directory, a symlink to either, or a file
// far bigger than memory. Only regular files are read, up to a size cap and
// within a deadline.
package fileinput

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strconv"
	"time"
)

// DefaultMaxBytes is the size cap when DW_MAX_FILE_BYTES is unset: the
// largest public dbt manifests are tens of MiB.
const DefaultMaxBytes = 256 << 20

// DefaultTimeout bounds one read (a file on a hung network mount).
const DefaultTimeout = 30 * time.Second

// MaxBytes is the cap set by DW_MAX_FILE_BYTES (a whole number of bytes),
// else DefaultMaxBytes. An unusable value falls back to the default: the
// cap must never be lifted by a typo.
func MaxBytes() int64 {
	if v := os.Getenv("DW_MAX_FILE_BYTES"); v != "" {
		if n, err := strconv.ParseInt(v, 10, 64); err == nil && n > 0 {
			return n
		}
	}
	return DefaultMaxBytes
}

// ReadRegular reads the regular file at path, named by the tool argument
// arg in errors. It refuses anything that is not a regular file after
// symlinks are followed, checking the opened descriptor (not the path, which
// could be swapped between a check and the open), refuses files over max
// bytes, and gives up after DefaultTimeout or when ctx ends.
func ReadRegular(ctx context.Context, arg, path string, max int64) ([]byte, error) {
	if path == "" {
		return nil, fmt.Errorf("argument '%s': empty; give the path of a regular file on this machine", arg)
	}
	// Non-blocking open: opening a FIFO with no writer would otherwise
	// wait forever before any check could run.
	f, err := openNonBlocking(path)
	if err != nil {
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return nil, fmt.Errorf("argument '%s': no file at %s; give the path of a regular file on this machine", arg, path)
		case errors.Is(err, fs.ErrPermission):
			return nil, fmt.Errorf("argument '%s': %s cannot be read by this agent (permission denied)", arg, path)
		}
		return nil, fmt.Errorf("argument '%s': cannot open %s: %w", arg, path, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("argument '%s': cannot stat %s: %w", arg, path, err)
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("argument '%s': %s is %s; only regular files are read", arg, path, kind(st.Mode()))
	}
	if st.Size() > max {
		return nil, fmt.Errorf("argument '%s': %s is %d bytes; at most %d are read (DW_MAX_FILE_BYTES)", arg, path, st.Size(), max)
	}
	ctx, cancel := context.WithTimeout(ctx, DefaultTimeout)
	defer cancel()
	// Read in chunks, checking the deadline between them; a regular file's
	// read returns promptly, and the cap holds even if the file grows.
	buf := make([]byte, 0, st.Size()+1)
	chunk := make([]byte, 1<<20)
	for {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("argument '%s': reading %s took too long (limit %v): %w", arg, path, DefaultTimeout, err)
		}
		n, err := f.Read(chunk)
		buf = append(buf, chunk[:n]...)
		if int64(len(buf)) > max {
			return nil, fmt.Errorf("argument '%s': %s grew past %d bytes while being read; at most %d are read (DW_MAX_FILE_BYTES)", arg, path, max, max)
		}
		if errors.Is(err, io.EOF) {
			return buf, nil
		}
		if err != nil {
			return nil, fmt.Errorf("argument '%s': reading %s: %w", arg, path, err)
		}
	}
}

func kind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe (FIFO)"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a block device"
	}
	return "not a regular file"
}
