package baseline

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/dataworkers/dw/internal/store"
)

// Series names one metric history: which asset, which metric, which
// dimension of it (a column, a key) and what each point covers.
type Series struct {
	Asset     string `json:"asset" jsonschema:"asset id, e.g. duckdb://usage.usage_hourly"`
	Metric    string `json:"metric" jsonschema:"metric name, e.g. null_rate or row_count"`
	Dimension string `json:"dimension,omitempty" jsonschema:"what the metric is about, e.g. a column name"`
	// Grain is what one point covers: "hour" or "day" for bucketed
	// values, "" for snapshots taken at an observation time.
	Grain string `json:"grain,omitempty" jsonschema:"hour or day for bucketed points; empty for snapshots"`
}

// String names the series for messages.
func (s Series) String() string {
	var b strings.Builder
	b.WriteString(s.Asset + " " + s.Metric)
	if s.Dimension != "" {
		b.WriteString("(" + s.Dimension + ")")
	}
	if s.Grain != "" {
		b.WriteString(" per " + s.Grain)
	}
	return b.String()
}

// Sample is one point of one series, ready to record.
type Sample struct {
	Series
	Point
}

// Record stores samples observed at observed. A sample for a bucket
// already stored replaces it: re-checking today's hours updates them.
// Pass a transaction to make a check's points appear all at once.
func Record(ctx context.Context, q store.Querier, observed time.Time, samples ...Sample) error {
	const perStatement = 100
	for start := 0; start < len(samples); start += perStatement {
		chunk := samples[start:min(start+perStatement, len(samples))]
		var sb strings.Builder
		sb.WriteString("INSERT INTO metric_points (asset, metric, dimension, grain, bucket_ms, value, observed_ms) VALUES ")
		args := make([]any, 0, 7*len(chunk))
		for i, s := range chunk {
			if i > 0 {
				sb.WriteString(", ")
			}
			sb.WriteString("(?, ?, ?, ?, ?, ?, ?)")
			args = append(args, s.Asset, s.Metric, s.Dimension, s.Grain, store.Millis(s.At), s.Value, store.Millis(observed))
		}
		sb.WriteString(` ON CONFLICT (asset, metric, dimension, grain, bucket_ms)
			DO UPDATE SET value = excluded.value, observed_ms = excluded.observed_ms`)
		if _, err := q.ExecContext(ctx, sb.String(), args...); err != nil {
			return fmt.Errorf("record %d metric points: %w", len(chunk), err)
		}
	}
	return nil
}

// Load returns a series' points with from <= At < to, oldest first.
func Load(ctx context.Context, q store.Querier, s Series, from, to time.Time) ([]Point, error) {
	rows, err := q.QueryContext(ctx, `SELECT bucket_ms, value FROM metric_points
		WHERE asset = ? AND metric = ? AND dimension = ? AND grain = ? AND bucket_ms >= ? AND bucket_ms < ?
		ORDER BY bucket_ms`, s.Asset, s.Metric, s.Dimension, s.Grain, store.Millis(from), store.Millis(to))
	if err != nil {
		return nil, fmt.Errorf("load %s: %w", s, err)
	}
	defer rows.Close()
	var out []Point
	for rows.Next() {
		var ms int64
		var p Point
		if err := rows.Scan(&ms, &p.Value); err != nil {
			return nil, err
		}
		p.At = store.FromMillis(ms)
		out = append(out, p)
	}
	return out, rows.Err()
}

// LoadAsset returns every series of an asset with points in [from, to), in
// one query: a check judges dozens of metrics of one table at once.
func LoadAsset(ctx context.Context, q store.Querier, asset string, from, to time.Time) (map[Series][]Point, error) {
	rows, err := q.QueryContext(ctx, `SELECT metric, dimension, grain, bucket_ms, value FROM metric_points
		WHERE asset = ? AND bucket_ms >= ? AND bucket_ms < ?
		ORDER BY bucket_ms`, asset, store.Millis(from), store.Millis(to))
	if err != nil {
		return nil, fmt.Errorf("load history of %s: %w", asset, err)
	}
	defer rows.Close()
	out := map[Series][]Point{}
	for rows.Next() {
		s := Series{Asset: asset}
		var ms int64
		var v float64
		if err := rows.Scan(&s.Metric, &s.Dimension, &s.Grain, &ms, &v); err != nil {
			return nil, err
		}
		out[s] = append(out[s], Point{At: store.FromMillis(ms), Value: v})
	}
	return out, rows.Err()
}

// ListSeries lists the series recorded for an asset, for "unknown metric;
// closest: …" messages and history browsing.
func ListSeries(ctx context.Context, q store.Querier, asset string) ([]Series, error) {
	rows, err := q.QueryContext(ctx, `SELECT DISTINCT metric, dimension, grain FROM metric_points WHERE asset = ?`, asset)
	if err != nil {
		return nil, fmt.Errorf("list series of %s: %w", asset, err)
	}
	defer rows.Close()
	var out []Series
	for rows.Next() {
		s := Series{Asset: asset}
		if err := rows.Scan(&s.Metric, &s.Dimension, &s.Grain); err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out, rows.Err()
}

// Recorded returns the buckets of a series with a point in [from, to)
// observed at or after since: what an earlier run of a backfill already
// stored, so a re-run continues rather than starts over.
func Recorded(ctx context.Context, q store.Querier, s Series, from, to, since time.Time) (map[time.Time]bool, error) {
	rows, err := q.QueryContext(ctx, `SELECT bucket_ms FROM metric_points
		WHERE asset = ? AND metric = ? AND dimension = ? AND grain = ? AND bucket_ms >= ? AND bucket_ms < ? AND observed_ms >= ?`,
		s.Asset, s.Metric, s.Dimension, s.Grain, store.Millis(from), store.Millis(to), store.Millis(since))
	if err != nil {
		return nil, fmt.Errorf("recorded points of %s: %w", s, err)
	}
	defer rows.Close()
	out := map[time.Time]bool{}
	for rows.Next() {
		var ms int64
		if err := rows.Scan(&ms); err != nil {
			return nil, err
		}
		out[store.FromMillis(ms)] = true
	}
	return out, rows.Err()
}
