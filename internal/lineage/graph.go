package lineage

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/dataworkers/dw/internal/lineage/graphindex"

	"github.com/dataworkers/dw/internal/clock"
	"github.com/dataworkers/dw/internal/store"
)

// Graph is the context graph as one agent process sees it: the shared store
// plus a traversal index kept current with the store: after a write by
// any process (this one included) the next call applies the write's logged
// changes to the index (indexlog.go) or, when that cannot be done, loads
// it again. It is safe for concurrent use.
type Graph struct {
	db    *store.DB
	clock clock.Clock

	mu  sync.Mutex
	idx *graphindex.Index
	// facts is the facts version idx's names were read under.
	facts int64
	stats IndexStats
}

// IndexStats counts how a Graph kept its index current, for tests and
// the benchmarks' notes.
type IndexStats struct {
	// Loads read the whole index from the store.
	Loads int
	// Applied brought it up to date from the change log.
	Applied int
	// Relabeled kept it as it was after writes of facts it does not hold.
	Relabeled int
	// NamesKept brought it up to date keeping the ids, names and rows
	// answers had read, less those of the assets the writes changed.
	NamesKept int
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

// IndexStats says how the index has been kept current so far.
func (g *Graph) IndexStats() IndexStats {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.stats
}

// Index returns a traversal index no older than the store's graph version.
// The versions are read first, so a write racing a refresh makes the next
// call refresh again rather than leaving a stale index marked current.
func (g *Graph) Index(ctx context.Context) (*graphindex.Index, error) {
	idx, _, err := g.index(ctx)
	return idx, err
}

// index is Index that also says how long this call spent loading the
// index whole: zero when it was held, brought up to date from the change
// log, or loaded by another call while this one waited, so the first
// answer after a start (or after a change the log could not carry) can say
// what the load cost and a warm one says nothing.
func (g *Graph) index(ctx context.Context) (*graphindex.Index, time.Duration, error) {
	v, err := readVersions(ctx, g.db)
	if err != nil {
		return nil, 0, err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.idx != nil && g.idx.Version > v.version {
		// Another call brought the index past what this one read while it
		// waited for the lock: read the versions again rather than take
		// the index for one the store went back from (which reloads it).
		if v, err = readVersions(ctx, g.db); err != nil {
			return nil, 0, err
		}
	}
	if g.idx != nil && g.idx.Version == v.version {
		return g.idx, 0, nil
	}
	if g.idx != nil {
		start := time.Now()
		next, err := g.refresh(ctx, g.idx, v)
		switch {
		case err == nil:
			slog.Debug("lineage: index brought up to date", "version", next.Version, "topology", next.Topology,
				"pending", next.Pending(), "took", time.Since(start))
			g.idx, g.facts = next, v.facts
			return next, 0, nil
		case errors.Is(err, errLogGap) || errors.Is(err, errLogLarge) || errors.Is(err, errReload):
			slog.Debug("lineage: index loaded again", "reason", err)
		default:
			return nil, 0, err
		}
	}
	start := time.Now()
	idx, err := loadIndex(ctx, g.db, v)
	if err != nil {
		return nil, 0, err
	}
	took := time.Since(start)
	slog.Debug("lineage: index loaded", "version", idx.Version, "assets", idx.Len(), "edges", idx.EdgeCount(), "took", took)
	g.idx, g.facts = idx, v.facts
	g.stats.Loads++
	return idx, took, nil
}

// errReload: the held index cannot be brought up to date from the log.
var errReload = errors.New("the index log does not reach back to the held index")

// refresh brings cur up to the versions v without reading the graph
// whole: kept as it is when only facts it does not hold moved, else with
// the logged changes since its topology version applied.
func (g *Graph) refresh(ctx context.Context, cur *graphindex.Index, v versions) (*graphindex.Index, error) {
	switch {
	case cur.Topology == v.topology && v.facts != g.facts:
		g.stats.Relabeled++
		return cur.Relabel(v.version), nil
	case cur.Topology >= v.topology || cur.Topology < v.floor:
		// Neither version it holds moved (a write that bypassed the
		// Writer), the store went back (restored), or the log was pruned
		// or floored past it.
		return nil, errReload
	}
	// Applying a change costs about what loading an asset or edge does:
	// past an eighth of them a load is as quick and leaves no overlay.
	changes, factVersions, err := readChanges(ctx, g.db, cur.Topology, v.topology, max(1024, (cur.Assets()+cur.EdgeCount())/8))
	if err != nil {
		return nil, err
	}
	next := cur.Apply(v.version, v.topology, changes, indexCodes)
	// What answers read from the store is kept when every write since
	// named the assets whose facts it changed: one logged version per move
	// of the facts version (a write from an older binary, or one too large
	// to name its assets, moves it without).
	if next.SameNodes(cur) && v.facts-g.facts == factVersions {
		carryTable(cur, next, changes, v.facts != g.facts)
		g.stats.NamesKept++
	}
	g.stats.Applied++
	return next, nil
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

// loadIndex builds the traversal index of versions v.
func loadIndex(ctx context.Context, db *store.DB, v versions) (*graphindex.Index, error) {
	return graphindex.Load(ctx, db, v.version, v.topology, indexCodes)
}

// ReadIndex reads the store's graph versions and builds the traversal
// index whole.
func ReadIndex(ctx context.Context, db *store.DB) (*graphindex.Index, error) {
	v, err := readVersions(ctx, db)
	if err != nil {
		return nil, err
	}
	return loadIndex(ctx, db, v)
}
