package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/dataworkers/dw/internal/changelog"
	"github.com/dataworkers/dw/internal/storeconfig"
)

// TestChangesShowPrintsTheWholeChange: a change of 300 assets, listed in
// tool answers by its first few and the total, is printed whole by dw
// changes show, as text and as JSON; an unknown id fails.
func TestChangesShowPrintsTheWholeChange(t *testing.T) {
	eachStore(t, func(t *testing.T, h *harness) {
		ctx := context.Background()
		db, err := storeconfig.Open(ctx, h.cfg())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		assets := make([]string, 300)
		for i := range assets {
			assets[i] = fmt.Sprintf("dbt://model.billing.m%03d", i)
		}
		log := &changelog.Log{DB: db, Clock: h.clk}
		res, err := log.RecordChange(ctx, changelog.RecordChangeParams{At: h.clk.Now().Add(-time.Hour), Kind: "deploy", System: "dbt",
			Assets: assets, Fields: []changelog.FieldChange{{Name: "amount", How: "removed"}}, Summary: "a wide deploy"})
		if err != nil {
			t.Fatal(err)
		}
		if c := res.Change.Bounded(); len(c.Assets) >= 300 || c.AssetsTotal != 300 {
			t.Fatalf("an answer lists %d assets of %d", len(c.Assets), c.AssetsTotal)
		}
		arg := fmt.Sprintf("CHANGE-%d", res.Change.ID)
		out, errOut, code := h.dw("bob", "changes", "show", arg)
		if code != 0 {
			t.Fatalf("changes show: exit %d\n%s%s", code, out, errOut)
		}
		if !strings.Contains(out, "assets (300):") || !strings.Contains(out, assets[299]) || !strings.Contains(out, "removed amount") {
			t.Errorf("changes show does not print the whole change:\n%.600s", out)
		}
		out, _, code = h.dw("bob", "changes", "show", arg, "--json")
		var c changelog.Change
		if err := json.Unmarshal([]byte(out), &c); code != 0 || err != nil || len(c.Assets) != 300 || c.AssetsTotal != 0 {
			t.Errorf("changes show --json: exit %d, %v, %d assets (total %d)", code, err, len(c.Assets), c.AssetsTotal)
		}
		if out, errOut, code := h.dw("bob", "changes", "show", "CHANGE-999999"); code == 0 || !strings.Contains(errOut, "no change 999999") {
			t.Errorf("an unknown change: exit %d\n%s%s", code, out, errOut)
		}
	})
}
