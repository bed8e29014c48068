package deps

import (
	"slices"
	"sync"
)

// heldClient is one cached client: its own lock, so building a slow one
// (a Kafka client dials a broker first) holds up only callers of that
// client, not the graph or the others.
type heldClient struct {
	mu sync.Mutex
	v  any
	ok bool
}

// Cached returns the value held under key, building it with build on the
// first call. A failed build is not kept: a system that comes up later,
// or a secret set later, is picked up by the next call. Values with a
// Close() method are closed by Deps.Close. Typed accessors over it are in
// internal/deps/clients, so agents that talk to no external system do not
// link the client libraries.
func Cached[T any](d *Deps, key string, build func() (T, error)) (T, error) {
	d.held.mu.Lock()
	if d.held.clients == nil {
		d.held.clients = map[string]any{}
	}
	e, _ := d.held.clients[key].(*heldClient)
	if e == nil {
		e = &heldClient{}
		d.held.clients[key] = e
	}
	d.held.mu.Unlock()

	e.mu.Lock()
	defer e.mu.Unlock()
	if e.ok {
		return e.v.(T), nil
	}
	v, err := build()
	if err != nil {
		var zero T
		return zero, err
	}
	e.v, e.ok = v, true
	return v, nil
}

// closeClients closes every held client that has a Close method, in a
// stable order, and forgets them.
func (d *Deps) closeClients() {
	d.held.mu.Lock()
	clients := d.held.clients
	d.held.clients = nil
	d.held.mu.Unlock()
	keys := make([]string, 0, len(clients))
	for k := range clients {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		e := clients[k].(*heldClient)
		e.mu.Lock()
		switch c := e.v.(type) {
		case interface{ Close() }:
			c.Close()
		case interface{ Close() error }:
			_ = c.Close()
		}
		e.mu.Unlock()
	}
}
