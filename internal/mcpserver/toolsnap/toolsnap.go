// Package toolsnap keeps a snapshot of every tool's tools/list entry next
// to the agent that serves it, so a changed name, description or schema
// fails a test until someone regenerates the snapshot on purpose
// (UPDATE_TOOLSNAPS=true go test ./agents/...). Clients and prompts depend
// on these schemas; a silent change breaks them.
package toolsnap

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// Check compares the tool's JSON with dir/<name>.snap, writing it when
// UPDATE_TOOLSNAPS is true or the snapshot does not exist yet.
func Check(dir, name string, tool any) error {
	got, err := json.MarshalIndent(tool, "", "  ")
	if err != nil {
		return err
	}
	got = append(got, '\n')
	path := filepath.Join(dir, name+".snap")
	want, err := os.ReadFile(path)
	if os.Getenv("UPDATE_TOOLSNAPS") == "true" || errors.Is(err, os.ErrNotExist) {
		if os.Getenv("CI") != "" && errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("tool %s has no snapshot at %s; run UPDATE_TOOLSNAPS=true go test ./agents/... and commit it", name, path)
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		return os.WriteFile(path, got, 0o644)
	}
	if err != nil {
		return err
	}
	if !bytes.Equal(bytes.TrimSpace(got), bytes.TrimSpace(want)) {
		return fmt.Errorf("tool %s differs from its snapshot %s; if the change is intended, run UPDATE_TOOLSNAPS=true go test ./agents/... and commit the snapshot\n--- got\n%s", name, path, got)
	}
	return nil
}
