package lineage_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/dataworkers/dw/internal/clock"
	"github.com/dataworkers/dw/internal/lineage"
	"github.com/dataworkers/dw/internal/packload"
	"github.com/dataworkers/dw/internal/store/storetest"
)

func TestZZScratch(t *testing.T) {
	for _, pack := range []string{"billing", "loyalty"} {
	db := storetest.SQLite(t)
	now := time.Date(2026, 3, 10, 15, 5, 0, 0, time.UTC)
	clk := clock.NewFake(now)
	p, _, err := packload.Read(pack, now)
	if err != nil { t.Fatal(err) }
	ctx := context.Background()
	if _, err := packload.LoadStore(ctx, db, clk, p, "demo"); err != nil { t.Fatal(err) }
	rows, _ := db.QueryContext(ctx, "SELECT id, kind, owner, domain, sql_text FROM lineage_assets ORDER BY id")
	var ids []string
	for rows.Next() { var id, k, o, d, s string; rows.Scan(&id, &k, &o, &d, &s); ids = append(ids, id); fmt.Printf("ASSET %s %s owner=%s domain=%s sql=%d\n", id, k, o, d, len(s)) }
	rows.Close()
	rows, _ = db.QueryContext(ctx, "SELECT alias, weak, asset_seq FROM lineage_aliases ORDER BY asset_seq")
	for rows.Next() { var a string; var w, s int; rows.Scan(&a, &w, &s); fmt.Printf("ALIAS %s weak=%d seq=%d\n", a, w, s) }
	rows.Close()
	g := lineage.New(db, clk)
	for _, id := range ids {
		r, err := g.GetLineage(ctx, lineage.LineageParams{Asset: id})
		if err != nil { t.Fatal(err) }
		for _, n := range r.Downstream { fmt.Printf("EDGE %s -> %s %s cols=%v src=%v\n", id, n.Asset.ID, n.Edge.Kind, n.Edge.Columns, n.Edge.Sources) }
	}
	}
}
