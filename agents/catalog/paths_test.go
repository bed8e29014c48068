//go:build unix

package catalog

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A path argument naming a special file is refused promptly with an error
// that names the argument, and the server keeps serving.
func TestImportPathsRefuseSpecialFiles(t *testing.T) {
	cs := connect(t, testDeps(t))
	dir := t.TempDir()
	fifo := filepath.Join(dir, "manifest.json")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tool := range []string{"import_dbt_manifest", "import_openlineage_events"} {
		for _, path := range []string{"/dev/zero", fifo, dir} {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: map[string]any{"path": path}})
			cancel()
			if err != nil {
				t.Fatalf("%s %s: %v", tool, path, err)
			}
			if !res.IsError || !strings.HasPrefix(text(res), "argument 'path': ") || !strings.Contains(text(res), "only regular files") {
				t.Errorf("%s %s: %s", tool, path, text(res))
			}
		}
	}
	if _, err := os.Stat(fifo); err != nil {
		t.Fatal(err)
	}
}
