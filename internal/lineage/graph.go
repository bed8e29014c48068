package lineage

import (
	"context"
	"github.com/dataworkers/dw/internal/lineage/graphindex"
	"log/slog"
	"sync"
	"time"

	"github.com/dataworkers/dw/internal/clock"
	"github.com/dataworkers/dw/internal/store"
)

// Graph is the context graph as one agent process sees it: the shared store
// plus a traversal index that is reloaded whenever another process (or
// this one) has changed the graph since it was built. It is safe for
// concurrent use.
type Graph struct {
	db    *store.DB
	clock clock.Clock

	mu  sync.Mutex
	idx *graphindex.Index
}

// New returns the graph kept in db. The clock dates ingested facts and
// computes schedules' next runs.
func New(db *store.DB, c clock.Clock) *Graph {
	if c == nil {
		c = clock.System{}
	}
	return &Graph{db: db, clock: c}
}

// DB is the store the graph lives in.
func (g *Graph) DB() *store.DB { return g.db }

// Index returns a traversal index no older than the store's graph version,
// loading a fresh one when the version has moved. Loading reads the version
// first, so a write racing the load makes the next call reload again rather
// than leaving a stale index marked current.
func (g *Graph) Index(ctx context.Context) (*graphindex.Index, error) {
	idx, _, err := g.index(ctx)
	return idx, err
}

// index is Index that also says how long this call spent loading the
// index: zero when it was held (or another call loaded it while this one
// waited), so the first answer after a start or a graph change can say
// what the load cost and a warm one says nothing.
func (g *Graph) index(ctx context.Context) (*graphindex.Index, time.Duration, error) {
	v, _, err := GraphVersion(ctx, g.db)
	if err != nil {
		return nil, 0, err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.idx != nil && g.idx.Version == v {
		return g.idx, 0, nil
	}
	start := time.Now()
	idx, err := loadIndex(ctx, g.db, v)
	if err != nil {
		return nil, 0, err
	}
	took := time.Since(start)
	slog.Debug("lineage: index loaded", "version", idx.Version, "assets", idx.Len(), "edges", idx.EdgeCount(), "took", took)
	g.idx = idx
	return idx, took, nil
}

// indexCodes are the kind codes the index keeps: positions in Kinds and
// EdgeKinds, a stored kind unknown to this version counting as a dataset
// (the last kind) and an unknown edge kind as feeds.
var indexCodes = func() graphindex.Codes {
	c := graphindex.Codes{FallbackKind: uint8(len(Kinds) - 1)}
	for _, k := range Kinds {
		c.Kinds = append(c.Kinds, string(k))
	}
	for i, k := range EdgeKinds {
		c.EdgeKinds = append(c.EdgeKinds, string(k))
		if k == EdgeFeeds {
			c.FallbackEdge = uint8(i)
		}
	}
	return c
}()

// loadIndex builds the traversal index of graph version v.
func loadIndex(ctx context.Context, db *store.DB, v int64) (*graphindex.Index, error) {
	return graphindex.Load(ctx, db, v, indexCodes)
}

// ReadIndex reads the store's graph version and builds its traversal index.
func ReadIndex(ctx context.Context, db *store.DB) (*graphindex.Index, error) {
	v, _, err := GraphVersion(ctx, db)
	if err != nil {
		return nil, err
	}
	return loadIndex(ctx, db, v)
}
