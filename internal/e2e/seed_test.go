package e2e

import (
	"context"
	"encoding/json"
	"path/filepath"
	"sync"
	"testing"

	"github.com/dataworkers/dw/internal/store"
)

// TestEmbeddedDefaultSeededByDW: with no dw.yaml, three agents started at
// once on one empty data directory find the scenario packs on their first
// call, though no agent links them: the first to open the store runs
// `dw demo seed` beside it and the others wait on its lock; the packs are
// loaded once.
func TestEmbeddedDefaultSeededByDW(t *testing.T) {
	home := t.TempDir()
	env := map[string]string{"DW_HOME": home, "DW_CLOCK": "2026-03-10T15:05:00Z"}
	names := []string{"dw-context-catalog", "dw-schema", "dw-context-catalog"}
	procs := make([]*agentProc, len(names))
	for i, n := range names {
		procs[i] = spawn(t, n, env)
	}
	var wg sync.WaitGroup
	results := make([]string, len(procs))
	for i, p := range procs {
		wg.Go(func() {
			tool, args := "search_assets", map[string]any{"query": "usage_hourly"}
			if p.name == "dw-schema" {
				tool, args = "assess_impact", map[string]any{"asset": "duckdb://usage.usage_hourly"}
			}
			res := p.call(t, tool, args)
			if res.IsError {
				t.Errorf("%s %s on the embedded default: %s\nstderr:\n%s", p.name, tool, text(res), p.stderr)
				return
			}
			raw, _ := json.Marshal(res.StructuredContent)
			results[i] = string(raw)
		})
	}
	wg.Wait()
	for i, p := range procs {
		if p.name != "dw-context-catalog" || results[i] == "" {
			continue
		}
		var out struct {
			Total int `json:"total"`
		}
		if err := json.Unmarshal([]byte(results[i]), &out); err != nil || out.Total == 0 {
			t.Errorf("%s found no usage_hourly in the seeded graph: %s (%v)", p.name, results[i], err)
		}
	}
	db, err := store.OpenSQLite(context.Background(), filepath.Join(home, "dw.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	v, _, ok, err := store.GetSetting(context.Background(), db, "embedded_default_seeded")
	if err != nil || !ok || v == "" {
		t.Fatalf("the store is not marked seeded: %q %v %v", v, ok, err)
	}
}
