package kafka

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/dataworkers/dw/internal/store"
)

// Retention bounds what RecordRound keeps, so the store and every read of
// it stay the same size however many rounds are recorded.
type Retention struct {
	// Step downsamples: a partition keeps at most one sample per
	// step-long bucket (aligned to the epoch), the first recorded in it;
	// a later round in the same bucket stores nothing for the partitions
	// the bucket already has. DefaultStep when zero.
	Step time.Duration
	// Span expires: samples older than Span before the round are deleted,
	// for the whole cluster. DefaultSpan when zero.
	Span time.Duration
}

// DefaultStep gives a DefaultWindow ten samples, Burrow's ten rounds, however
// often the tool is called; DefaultSpan keeps six windows, enough to say
// how long a stopped group has been stopped.
const (
	DefaultStep = DefaultWindow / 10
	DefaultSpan = 6 * DefaultWindow
)

func (r Retention) orDefault() Retention {
	if r.Step <= 0 {
		r.Step = DefaultStep
	}
	if r.Span <= 0 {
		r.Span = DefaultSpan
	}
	return r
}

// Rows per INSERT (6 parameters each) and names per IN list: well under
// PostgreSQL's 65,535 parameters and SQLite's 32,766.
const (
	insertChunk = 500
	inChunk     = 500
)

// RecordRound stores one sample per partition of the round (partitions
// whose lag could not be read are skipped) unless the partition already
// has a sample in the round's downsampling bucket, then expires the
// cluster's samples older than the retention span, in one transaction.
// Stored samples are thus only ever added or expired, never rewritten,
// which is what lets a process hold the window (Held) and read only the
// rows added since. Each statement touches only the rows in its time range
// (an index on cluster and time), never the whole history. Recording the
// same round twice is harmless.
func RecordRound(ctx context.Context, db *store.DB, cluster string, round *LagRound, ret Retention) error {
	if cluster == "" {
		return errors.New("kafka: record samples: cluster name is empty")
	}
	ret = ret.orDefault()
	type row struct {
		g, t string
		p    int32
		s    Sample
	}
	var rows []row
	for _, g := range round.Groups {
		for _, p := range g.Partitions {
			if p.Error != "" || p.Lag < 0 {
				continue
			}
			rows = append(rows, row{g.Group, p.Topic, p.Partition, Sample{At: round.At, Committed: p.Committed, End: p.End, Lag: p.Lag}})
		}
	}
	if len(rows) == 0 {
		return nil
	}
	at := store.Millis(round.At)
	lo, hi := bucketOf(at, ret.Step)
	return db.InTx(ctx, func(tx *store.Tx) error {
		for start := 0; start < len(rows); start += insertChunk {
			chunk := rows[start:min(start+insertChunk, len(rows))]
			var b strings.Builder
			b.WriteString("WITH v (group_name, topic, partition_num, committed_offset, end_offset, lag) AS (VALUES ")
			args := make([]any, 0, len(chunk)*6+5)
			for i, r := range chunk {
				if i > 0 {
					b.WriteString(", ")
				}
				// Typed, so PostgreSQL does not read the VALUES as text.
				b.WriteString("(CAST(? AS TEXT), CAST(? AS TEXT), CAST(? AS INTEGER), CAST(? AS BIGINT), CAST(? AS BIGINT), CAST(? AS BIGINT))")
				args = append(args, r.g, r.t, r.p, r.s.Committed, r.s.End, r.s.Lag)
			}
			b.WriteString(`) INSERT INTO kafka_lag_samples (cluster, group_name, topic, partition_num, at_ms, committed_offset, end_offset, lag)
				SELECT ?, v.group_name, v.topic, v.partition_num, ?, v.committed_offset, v.end_offset, v.lag FROM v
				WHERE NOT EXISTS (SELECT 1 FROM kafka_lag_samples s WHERE s.cluster = ? AND s.group_name = v.group_name
					AND s.topic = v.topic AND s.partition_num = v.partition_num AND s.at_ms >= ? AND s.at_ms < ?)
				ON CONFLICT (cluster, group_name, topic, partition_num, at_ms) DO NOTHING`)
			args = append(args, cluster, at, cluster, lo, hi)
			if _, err := tx.ExecContext(ctx, b.String(), args...); err != nil {
				return fmt.Errorf("kafka: record lag samples: %w", err)
			}
		}
		if _, err := tx.ExecContext(ctx, "DELETE FROM kafka_lag_samples WHERE cluster = ? AND at_ms < ?", cluster, at-ret.Span.Milliseconds()); err != nil {
			return fmt.Errorf("kafka: expire lag samples: %w", err)
		}
		return nil
	})
}

// bucketOf is the step-long bucket [lo, hi) holding the time ms.
func bucketOf(ms int64, step time.Duration) (lo, hi int64) {
	st := max(step.Milliseconds(), 1)
	lo = ms - ((ms%st)+st)%st
	return lo, lo + st
}

// fewGroups is where LoadWindow switches from naming the groups in the
// query (each group's rows through the key index) to reading the cluster's
// window by time and keeping the wanted groups.
const fewGroups = 20

// LoadWindow returns the stored samples of the given groups taken in
// [from, to], oldest first per partition. It reads only that window.
func LoadWindow(ctx context.Context, q store.Querier, cluster string, groups []string, from, to time.Time) (map[PartitionKey][]Sample, error) {
	out := map[PartitionKey][]Sample{}
	lo, hi := store.Millis(from), store.Millis(to)
	if len(groups) > fewGroups {
		want := make(map[string]bool, len(groups))
		for _, g := range groups {
			want[g] = true
		}
		err := scanSamples(ctx, q, out, func(k PartitionKey) bool { return want[k.Group] },
			`SELECT group_name, topic, partition_num, at_ms, committed_offset, end_offset, lag
			FROM kafka_lag_samples WHERE cluster = ? AND at_ms >= ? AND at_ms <= ? ORDER BY at_ms`, cluster, lo, hi)
		return out, err
	}
	args := []any{cluster, lo, hi}
	for _, g := range groups {
		args = append(args, g)
	}
	if len(groups) == 0 {
		return out, nil
	}
	err := scanSamples(ctx, q, out, nil, `SELECT group_name, topic, partition_num, at_ms, committed_offset, end_offset, lag
		FROM kafka_lag_samples WHERE cluster = ? AND at_ms >= ? AND at_ms <= ? AND group_name IN (`+bindVars(len(groups))+`)
		ORDER BY at_ms`, args...)
	return out, err
}

// LoadBefore returns the stored samples of the given partitions taken
// before t, oldest first per partition: the history behind a window, for
// partitions whose committed offset did not move in it.
func LoadBefore(ctx context.Context, q store.Querier, cluster string, keys map[PartitionKey]bool, t time.Time) (map[PartitionKey][]Sample, error) {
	out := map[PartitionKey][]Sample{}
	seen := map[string]bool{}
	var groups []string
	for k := range keys {
		if !seen[k.Group] {
			seen[k.Group] = true
			groups = append(groups, k.Group)
		}
	}
	for start := 0; start < len(groups); start += inChunk {
		chunk := groups[start:min(start+inChunk, len(groups))]
		args := []any{cluster, store.Millis(t)}
		for _, g := range chunk {
			args = append(args, g)
		}
		err := scanSamples(ctx, q, out, func(k PartitionKey) bool { return keys[k] },
			`SELECT group_name, topic, partition_num, at_ms, committed_offset, end_offset, lag
			FROM kafka_lag_samples WHERE cluster = ? AND at_ms < ? AND group_name IN (`+bindVars(len(chunk))+`)
			ORDER BY at_ms`, args...)
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// scanSamples appends the rows of query (group, topic, partition, at_ms,
// committed, end, lag, ordered by time) that keep accepts to out.
func scanSamples(ctx context.Context, q store.Querier, out map[PartitionKey][]Sample, keep func(PartitionKey) bool, query string, args ...any) error {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return fmt.Errorf("kafka: load lag samples: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var k PartitionKey
		var ms int64
		var s Sample
		if err := rows.Scan(&k.Group, &k.Topic, &k.Partition, &ms, &s.Committed, &s.End, &s.Lag); err != nil {
			return fmt.Errorf("kafka: load lag samples: %w", err)
		}
		if keep != nil && !keep(k) {
			continue
		}
		s.At = store.FromMillis(ms)
		out[k] = append(out[k], s)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("kafka: load lag samples: %w", err)
	}
	return nil
}

// LoadSamples returns the stored samples of the given groups, oldest first
// per partition.
func LoadSamples(ctx context.Context, q store.Querier, cluster string, groups []string) (map[PartitionKey][]Sample, error) {
	out := map[PartitionKey][]Sample{}
	for start := 0; start < len(groups); start += inChunk {
		chunk := groups[start:min(start+inChunk, len(groups))]
		args := []any{cluster}
		for _, g := range chunk {
			args = append(args, g)
		}
		rows, err := q.QueryContext(ctx, `SELECT group_name, topic, partition_num, at_ms, committed_offset, end_offset, lag
			FROM kafka_lag_samples WHERE cluster = ? AND group_name IN (`+bindVars(len(chunk))+`)
			ORDER BY group_name, topic, partition_num, at_ms`, args...)
		if err != nil {
			return nil, fmt.Errorf("kafka: load lag samples: %w", err)
		}
		for rows.Next() {
			var k PartitionKey
			var ms int64
			var s Sample
			if err := rows.Scan(&k.Group, &k.Topic, &k.Partition, &ms, &s.Committed, &s.End, &s.Lag); err != nil {
				rows.Close()
				return nil, fmt.Errorf("kafka: load lag samples: %w", err)
			}
			s.At = store.FromMillis(ms)
			out[k] = append(out[k], s)
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return nil, fmt.Errorf("kafka: load lag samples: %w", err)
		}
	}
	return out, nil
}

// bindVars is n comma-separated "?" for an IN list.
func bindVars(n int) string {
	return strings.TrimSuffix(strings.Repeat("?, ", n), ", ")
}
