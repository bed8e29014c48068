package kafka

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/dataworkers/dw/internal/store"
)

// Held keeps one cluster's judging window of stored samples in memory
// between calls, so a call reads only the rows stored since the last one
// (by id) instead of the whole window again. It stays true to the store
// because RecordRound only ever adds samples or expires them by age, and
// Held drops by age too. A process holds one per store and cluster
// (HeldFor); a Monitor without one reads the window from the store.
//
// On PostgreSQL two writers may commit ids out of order, so a sample
// another process wrote at the same moment can be missed by the held
// window; it stays in the store, and the judgement is made over the
// samples held, this process's own rounds among them.
type Held struct {
	mu      sync.Mutex
	db      *store.DB
	cluster string
	loaded  bool
	from    time.Time // oldest time the window covers
	lastID  int64
	samples map[PartitionKey][]Sample
}

var held sync.Map // heldKey -> *Held

type heldKey struct {
	db      *store.DB
	cluster string
}

// HeldFor returns the process's held window of cluster's samples in db.
func HeldFor(db *store.DB, cluster string) *Held {
	k := heldKey{db, cluster}
	if h, ok := held.Load(k); ok {
		return h.(*Held)
	}
	h, _ := held.LoadOrStore(k, &Held{db: db, cluster: cluster})
	return h.(*Held)
}

// Window returns the samples of groups taken in [from, to], oldest first
// per partition, after reading the rows stored since the last call.
func (h *Held) Window(ctx context.Context, groups []string, from, to time.Time) (map[PartitionKey][]Sample, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.loaded || from.Before(h.from) {
		if err := h.reload(ctx, from); err != nil {
			return nil, err
		}
	} else if err := h.update(ctx); err != nil {
		return nil, err
	}
	// Drop what fell out of the window, for every partition held.
	h.from = from
	for k, s := range h.samples {
		i := 0
		for i < len(s) && s[i].At.Before(from) {
			i++
		}
		switch {
		case i == len(s):
			delete(h.samples, k)
		case i > 0:
			h.samples[k] = slices.Clone(s[i:])
		}
	}
	want := make(map[string]bool, len(groups))
	for _, g := range groups {
		want[g] = true
	}
	out := map[PartitionKey][]Sample{}
	for k, s := range h.samples {
		if !want[k.Group] {
			continue
		}
		n := len(s)
		for n > 0 && s[n-1].At.After(to) {
			n--
		}
		if n > 0 {
			out[k] = slices.Clone(s[:n])
		}
	}
	return out, nil
}

func (h *Held) reload(ctx context.Context, from time.Time) error {
	h.samples = map[PartitionKey][]Sample{}
	h.lastID = 0
	if err := h.read(ctx, "cluster = ? AND at_ms >= ?", h.cluster, store.Millis(from)); err != nil {
		return err
	}
	h.loaded, h.from = true, from
	return nil
}

func (h *Held) update(ctx context.Context) error {
	return h.read(ctx, "cluster = ? AND id > ?", h.cluster, h.lastID)
}

// read adds the rows matching where, keeping each partition's samples in
// time order without duplicates.
func (h *Held) read(ctx context.Context, where string, args ...any) error {
	rows, err := h.db.QueryContext(ctx, `SELECT id, group_name, topic, partition_num, at_ms, committed_offset, end_offset, lag
		FROM kafka_lag_samples WHERE `+where+` ORDER BY id`, args...)
	if err != nil {
		return fmt.Errorf("kafka: load lag samples: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id, ms int64
		var k PartitionKey
		var s Sample
		if err := rows.Scan(&id, &k.Group, &k.Topic, &k.Partition, &ms, &s.Committed, &s.End, &s.Lag); err != nil {
			return fmt.Errorf("kafka: load lag samples: %w", err)
		}
		h.lastID = max(h.lastID, id)
		s.At = store.FromMillis(ms)
		h.samples[k] = insertSample(h.samples[k], s)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("kafka: load lag samples: %w", err)
	}
	return nil
}

// insertSample puts s into h (time order), replacing a sample at the same
// moment. Rows arrive almost always newest last, so this is an append.
func insertSample(h []Sample, s Sample) []Sample {
	i := len(h)
	for i > 0 && h[i-1].At.After(s.At) {
		i--
	}
	if i > 0 && h[i-1].At.Equal(s.At) {
		h[i-1] = s
		return h
	}
	return slices.Insert(h, i, s)
}
