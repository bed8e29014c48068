package lineagetest

import (
	"bytes"
	"fmt"
	"os"
	"time"
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
