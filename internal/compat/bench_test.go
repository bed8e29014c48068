package compat

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hamba/avro/v2"
)

// history builds n versions of a 30-field record, each adding one optional
// field, so every version is BACKWARD compatible with all earlier ones.
func history(n int) []Version {
	out := make([]Version, n)
	for i := range out {
		fields := []string{}
		for f := 0; f < 30+i; f++ {
			typ := `"string"`
			if f >= 30 {
				typ = `["null","long"],"default":null`
			}
			fields = append(fields, fmt.Sprintf(`{"name":"f%d","type":%s}`, f, typ))
		}
		out[i] = Version{Version: i + 1, Schema: Schema{Text: `{"type":"record","name":"R","namespace":"b","fields":[` + strings.Join(fields, ",") + `]}`}}
	}
	return out
}

// BenchmarkCheckFullTransitive reports how many times a full verdict table
// against 50 versions costs compared with only parsing those schemas with
// hamba (the floor any offline check pays).
func BenchmarkCheckFullTransitive(b *testing.B) {
	h := history(51)
	prev, next := h[:50], h[50].Schema
	baseline := func() time.Duration {
		start := time.Now()
		for _, v := range h {
			if _, err := avro.ParseWithCache(v.Text, "", &avro.SchemaCache{}); err != nil {
				b.Fatal(err)
			}
		}
		return time.Since(start)
	}
	var base, ours time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		base += baseline()
		start := time.Now()
		v, err := Check(Avro, next, prev, FullTransitive)
		ours += time.Since(start)
		if err != nil || !v.At(BackwardTransitive).Compatible {
			b.Fatalf("%v %+v", err, v)
		}
	}
	b.ReportMetric(float64(ours)/float64(base), "x_parse_only")
}
