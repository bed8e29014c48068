// Package fileinput reads a file named by a tool argument. A path comes
// from a model, so it may name anything: /dev/zero (endless), a FIFO (blocks
// forever on open and read), a directory, a symlink to either, or a file
// far bigger than memory. Only regular files are read, up to a size cap and
// within a deadline.
package fileinput

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
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

// ReadRegular reads the regular text file at path, named by the tool argument
// arg in errors. It refuses anything that is not a regular file after
// symlinks are followed, checking the opened descriptor (not the path, which
// could be swapped between a check and the open), refuses files over max
// bytes, and gives up after DefaultTimeout or when ctx ends. Every file a
// tool reads is a text document (JSON or YAML), so a binary file is refused
// too, with its size and the kind its content looks like.
//
// No error quotes the file: a path can name any file this agent may read
// (a private key, a credentials file), and the error goes to the model and
// the client's transcript.
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
			if err := checkText(arg, path, buf); err != nil {
				return nil, err
			}
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

// ReadJSON is ReadRegular for a JSON document: one value, or several one
// after another (newline-delimited). A file that is not JSON is refused
// with where it stops being JSON (a byte offset and line), never with its
// characters, which the JSON parser's own errors would quote.
func ReadJSON(ctx context.Context, arg, path string, max int64) ([]byte, error) {
	data, err := ReadRegular(ctx, arg, path, max)
	if err != nil {
		return nil, err
	}
	if err := CheckJSON(arg, path, data); err != nil {
		return nil, err
	}
	return data, nil
}

// checkText refuses content that is not text: invalid UTF-8, or a control
// character no JSON or YAML document holds (NUL and the other C0 controls
// but tab, newline, carriage return and form feed).
func checkText(arg, path string, data []byte) error {
	bad := !utf8.Valid(data)
	for _, b := range data {
		if bad {
			break
		}
		bad = b < 0x20 && b != '\t' && b != '\n' && b != '\r' && b != '\f' || b == 0x7f
	}
	if !bad {
		return nil
	}
	return fmt.Errorf("argument '%s': %s is not a JSON or YAML document: it is %d bytes of binary data (its content looks like %s); give the path of a text file",
		arg, path, len(data), sniff(data))
}

// sniff names the kind of binary content (application/zip, image/png, …)
// from its leading bytes, without quoting any of them.
func sniff(data []byte) string {
	kind, _, _ := strings.Cut(http.DetectContentType(data), ";")
	if kind == "text/plain" || kind == "" {
		return "application/octet-stream"
	}
	return kind
}

// CheckJSON checks data (read from path, named by the tool argument arg)
// is one JSON value or a sequence of them, with ReadJSON's error: where
// the syntax breaks, never the file's characters. A reader that parses the
// document anyway can read it with ReadRegular and call this only when its
// parse fails, sparing a pass over a good document.
func CheckJSON(arg, path string, data []byte) error {
	body := bytes.TrimPrefix(data, []byte("\xef\xbb\xbf")) // a BOM some editors write
	if json.Valid(body) {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	for {
		var skip struct{}
		err := dec.Decode(&skip)
		if errors.Is(err, io.EOF) {
			return nil
		}
		var se *json.SyntaxError
		if errors.As(err, &se) {
			off := int(dec.InputOffset())
			if se.Offset > 0 {
				off = int(se.Offset)
			}
			if off > len(body) {
				off = len(body)
			}
			line := 1 + bytes.Count(body[:off], []byte("\n"))
			return fmt.Errorf("argument '%s': %s is not valid JSON: the syntax breaks at byte %d of %d (line %d); give the path of a complete JSON document",
				arg, path, off, len(body), line)
		}
		if err != nil && !isTypeError(err) {
			return fmt.Errorf("argument '%s': %s is not valid JSON (%d bytes); give the path of a complete JSON document", arg, path, len(body))
		}
	}
}

// isTypeError: a value that is not an object decodes into struct{} with a
// type error, which still means it was valid JSON.
func isTypeError(err error) bool {
	var te *json.UnmarshalTypeError
	return errors.As(err, &te)
}
