package kafka

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/dataworkers/dw/internal/store"
)

// DefaultKeepSamples is how many samples per partition RecordRound keeps:
// enough for a window of a few hours at one round a minute.
const DefaultKeepSamples = 100

// Rows per INSERT and names per IN list: well under PostgreSQL's 65,535
// parameters and SQLite's 32,766.
const (
	insertChunk = 500
	inChunk     = 500
)

// RecordRound stores one sample per partition of the round (partitions
// whose lag could not be read are skipped) and prunes every touched
// partition to its newest keep samples, in one transaction. Recording the
// same round twice is harmless.
func RecordRound(ctx context.Context, db *store.DB, cluster string, round *LagRound, keep int) error {
	if cluster == "" {
		return errors.New("kafka: record samples: cluster name is empty")
	}
	if keep <= 0 {
		keep = DefaultKeepSamples
	}
	type row struct {
		g, t string
		p    int32
		s    Sample
	}
	var rows []row
	var groups []string
	for _, g := range round.Groups {
		n := 0
		for _, p := range g.Partitions {
			if p.Error != "" || p.Lag < 0 {
				continue
			}
			rows = append(rows, row{g.Group, p.Topic, p.Partition, Sample{At: round.At, Committed: p.Committed, End: p.End, Lag: p.Lag}})
			n++
		}
		if n > 0 {
			groups = append(groups, g.Group)
		}
	}
	if len(rows) == 0 {
		return nil
	}
	at := store.Millis(round.At)
	return db.InTx(ctx, func(tx *store.Tx) error {
		for start := 0; start < len(rows); start += insertChunk {
			chunk := rows[start:min(start+insertChunk, len(rows))]
			var b strings.Builder
			b.WriteString("INSERT INTO kafka_lag_samples (cluster, group_name, topic, partition_num, at_ms, committed_offset, end_offset, lag) VALUES ")
			args := make([]any, 0, len(chunk)*8)
			for i, r := range chunk {
				if i > 0 {
					b.WriteString(", ")
				}
				b.WriteString("(?, ?, ?, ?, ?, ?, ?, ?)")
				args = append(args, cluster, r.g, r.t, r.p, at, r.s.Committed, r.s.End, r.s.Lag)
			}
			b.WriteString(` ON CONFLICT (cluster, group_name, topic, partition_num, at_ms) DO UPDATE SET
				committed_offset = excluded.committed_offset, end_offset = excluded.end_offset, lag = excluded.lag`)
			if _, err := tx.ExecContext(ctx, b.String(), args...); err != nil {
				return fmt.Errorf("kafka: record lag samples: %w", err)
			}
		}
		for start := 0; start < len(groups); start += inChunk {
			chunk := groups[start:min(start+inChunk, len(groups))]
			args := []any{cluster}
			for _, g := range chunk {
				args = append(args, g)
			}
			args = append(args, keep)
			q := `DELETE FROM kafka_lag_samples WHERE id IN (
				SELECT id FROM (
					SELECT id, ROW_NUMBER() OVER (PARTITION BY group_name, topic, partition_num ORDER BY at_ms DESC) AS rn
					FROM kafka_lag_samples WHERE cluster = ? AND group_name IN (` + bindVars(len(chunk)) + `)
				) ranked WHERE rn > ?)`
			if _, err := tx.ExecContext(ctx, q, args...); err != nil {
				return fmt.Errorf("kafka: prune lag samples: %w", err)
			}
		}
		return nil
	})
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
