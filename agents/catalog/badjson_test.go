package catalog

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A manifest file that is not JSON is refused with where its syntax
// breaks (byte and line), never with its characters:
// the import reads the file without a JSON pass of its own, so this is
// the error it falls back on when its parse fails.
func TestImportManifestFileNotJSON(t *testing.T) {
	cs := connect(t, testDeps(t))
	secret := "AKIAIOSFODNN7EXAMPLE"
	doc := "{\"metadata\": {\"dbt_schema_version\": \"https://schemas.getdbt.com/dbt/manifest/v12.json\", \"adapter_type\": \"duckdb\"},\n" +
		"\"nodes\": {},\n\"sources\": " + secret + "}\n"
	path := filepath.Join(t.TempDir(), "manifest.json")
	if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "import_dbt_manifest", Arguments: map[string]any{"path": path}})
	if err != nil {
		t.Fatal(err)
	}
	msg := text(res)
	if !res.IsError {
		t.Fatalf("a file that is not JSON was imported: %s", msg)
	}
	var off, size, line int
	rest, ok := strings.CutPrefix(msg, "argument 'path': "+path+" is not valid JSON: ")
	if !ok {
		t.Fatalf("error %q is not fileinput's bad-JSON error", msg)
	}
	if _, err := fmt.Sscanf(rest, "the syntax breaks at byte %d of %d (line %d)", &off, &size, &line); err != nil {
		t.Fatalf("error %q: %v", msg, err)
	}
	if want := strings.Index(doc, secret) + 1; off != want || size != len(doc) || line != 3 {
		t.Errorf("breaks at byte %d of %d, line %d; want byte %d of %d, line 3", off, size, line, want, len(doc))
	}
	if strings.Contains(msg, secret[:4]) {
		t.Errorf("error quotes the file: %s", msg)
	}
}
