package deps

import (
	"context"
	"sync"

	"github.com/dataworkers/dw/internal/lineage"
	"github.com/dataworkers/dw/internal/store"
)

// held is what Deps keeps between tool calls besides the store: the
// context graph and the clients to external systems. It has its own lock
// so a slow client build never waits on the store's.
type held struct {
	mu      sync.Mutex
	graph   *lineage.Graph
	clients map[string]any
}

// Graph returns the context graph, one per agent process for the life of
// its store. Holding it is what makes a blast radius cost a traversal: its
// traversal index is loaded on the first call and kept, and every later
// call only reads the store's graph versions (one primary-key SELECT on a
// one-row table, lineage_version) to see whether any process has written
// the graph since. When one did, the index applies the changes that write
// logged (lineage_index_log) instead of loading again; see
// internal/lineage/indexlog.go.
func (d *Deps) Graph(ctx context.Context) (*lineage.Graph, error) {
	db, err := d.Store(ctx)
	if err != nil {
		return nil, err
	}
	return d.graphOn(db), nil
}

// graphOn returns the held graph over db, replacing it when the store was
// reopened (a closed store's graph is never used again).
func (d *Deps) graphOn(db *store.DB) *lineage.Graph {
	d.held.mu.Lock()
	defer d.held.mu.Unlock()
	if d.held.graph == nil || d.held.graph.DB() != db {
		d.held.graph = lineage.New(db, d.Clock)
	}
	return d.held.graph
}
