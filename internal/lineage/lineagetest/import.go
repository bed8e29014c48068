package lineagetest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/dataworkers/dw/internal/store"
)

// DBTManifest is a dbt manifest of n models, model i depending on up to
// three earlier models (i-1, i-7, i-31), and those edges as 0-based pairs
// (from, to): issue 18's import row is DBTManifest(100000), 100k assets
// and about 300k edges. ingest's import benchmark and the end-to-end one
// (internal/benchmcp) import the same document.
func DBTManifest(n int) ([]byte, [][2]int32) {
	var b bytes.Buffer
	b.WriteString(`{"metadata": {"dbt_schema_version": "https://schemas.getdbt.com/dbt/manifest/v12.json", "adapter_type": "duckdb", "project_name": "bench"}, "sources": {}, "nodes": {`)
	var edges [][2]int32
	for i := 0; i < n; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"model.bench.m%d": {"unique_id": "model.bench.m%d", "resource_type": "model", "name": "m%d", "database": "db", "schema": "s", "alias": "m%d", "depends_on": {"nodes": [`, i, i, i, i)
		for k, d := range []int{1, 7, 31} {
			if i-d < 0 {
				break
			}
			if k > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `"model.bench.m%d"`, i-d)
			edges = append(edges, [2]int32{int32(i - d), int32(i)})
		}
		b.WriteString(`]}}`)
	}
	b.WriteString(`}}`)
	return b.Bytes(), edges
}

// WALMiB is the size of the SQLite database path's write-ahead log now.
func WALMiB(path string) float64 {
	st, err := os.Stat(path + "-wal")
	if err != nil {
		return 0
	}
	return float64(st.Size()) / (1 << 20)
}

// PeakWAL samples the size of path's write-ahead log every 5 ms until the
// returned func is called, which returns the largest seen: the log is
// reused from its start after a checkpoint, and a size limit would
// truncate it, so its size at the end need not be its peak.
func PeakWAL(path string) func() float64 {
	stop := make(chan struct{})
	peak := make(chan float64)
	go func() {
		var m float64
		t := time.NewTicker(5 * time.Millisecond)
		defer t.Stop()
		for {
			m = max(m, WALMiB(path))
			select {
			case <-stop:
				peak <- max(m, WALMiB(path))
				return
			case <-t.C:
			}
		}
	}()
	return func() float64 {
		close(stop)
		return <-peak
	}
}

// BulkAliases inserts count names, spread over assets 1..n, in one
// transaction with a prepared multi-row INSERT: with BulkLoad, the floor
// an import is measured against writes as many names as it registered.
func BulkAliases(tb testing.TB, db *store.DB, count, n int) {
	tb.Helper()
	ctx := context.Background()
	tx, err := db.SQL().BeginTx(ctx, nil)
	if err != nil {
		tb.Fatal(err)
	}
	defer tx.Rollback()
	const rows = 500
	ph := func(k int) string {
		var sb strings.Builder
		for r := 0; r < k; r++ {
			if r > 0 {
				sb.WriteByte(',')
			}
			if db.Dialect() == store.Postgres {
				fmt.Fprintf(&sb, "($%d,$%d,0)", 2*r+1, 2*r+2)
			} else {
				sb.WriteString("(?,?,0)")
			}
		}
		return sb.String()
	}
	const q = "INSERT INTO lineage_aliases (alias, asset_seq, weak) VALUES "
	full, err := tx.PrepareContext(ctx, q+ph(rows))
	if err != nil {
		tb.Fatal(err)
	}
	args := make([]any, 0, 2*rows)
	for i := 0; i < count; i++ {
		args = append(args, fmt.Sprintf("bench-alias-%d", i), i%n+1)
		if len(args) == 2*rows {
			if _, err := full.ExecContext(ctx, args...); err != nil {
				tb.Fatal(err)
			}
			args = args[:0]
		}
	}
	if len(args) > 0 {
		if _, err := tx.ExecContext(ctx, q+ph(len(args)/2), args...); err != nil {
			tb.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		tb.Fatal(err)
	}
}
