package incidents

import (
	"context"
	"errors"

	"github.com/dataworkers/dw/internal/lineage"
)

// LineageGraph adapts the context graph in the store to Graph. Walks answer
// under every name an asset is known by (its canonical id and its aliases,
// such as duckdb://usage.usage_hourly for duckdb://demo.usage.usage_hourly),
// so symptoms and changes recorded under any of them meet. An asset the
// graph does not know reaches nothing and has no recorded readers: lineage
// is often incomplete, and a diagnosis should still rank what it can.
//
// Given the configured warehouses' names, it is also an AssetNamer, so
// incidents record and find assets under one id whatever the spelling.
func LineageGraph(g *lineage.Graph, names ...*lineage.Names) Graph {
	if len(names) > 0 && names[0] != nil {
		return namedLineageGraph{lineageGraph{g}, names[0]}
	}
	return lineageGraph{g}
}

type lineageGraph struct{ g *lineage.Graph }

type namedLineageGraph struct {
	lineageGraph
	names *lineage.Names
}

func (l namedLineageGraph) Identify(ctx context.Context, ref string) (lineage.Identity, error) {
	return lineage.Identities{Graph: l.g, Names: l.names}.Of(ctx, ref)
}

func (l lineageGraph) Upstream(ctx context.Context, start []string, maxDepth int) (map[string]Hop, error) {
	return convertHops(l.g.Upstream(ctx, start, maxDepth))
}

func (l lineageGraph) Downstream(ctx context.Context, start []string, maxDepth int) (map[string]Hop, error) {
	return convertHops(l.g.Downstream(ctx, start, maxDepth))
}

// lineageScope is the reach of an upstream walk with its answer, so
// Contains is a lookup by name and the field walk reads the node set.
type lineageScope struct {
	hops  map[string]Hop
	reach *lineage.Reach
}

func (s lineageScope) Contains(asset string) bool {
	_, ok := s.hops[asset]
	return ok
}

func (l lineageGraph) UpstreamScope(ctx context.Context, start []string, maxDepth int) (map[string]Hop, Scope, error) {
	in, reach, err := l.g.UpstreamReach(ctx, start, maxDepth)
	hops, err := convertHops(in, err)
	if err != nil {
		return nil, nil, err
	}
	return hops, lineageScope{hops, reach}, nil
}

func (l lineageGraph) FieldReaders(ctx context.Context, asset string, fields []string, maxDepth int, within Scope) ([]FieldReader, error) {
	var reach *lineage.Reach
	if s, ok := within.(lineageScope); ok {
		reach = s.reach
	}
	rs, err := l.g.FieldReadersWithin(ctx, asset, fields, maxDepth, reach)
	if errors.Is(err, lineage.ErrUnknownAsset) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	out := make([]FieldReader, len(rs))
	for i, r := range rs {
		out[i] = FieldReader{Reader: r.Reader, Field: r.Field, From: r.From, Evidence: r.Evidence}
	}
	return out, nil
}

func convertHops(in map[string]lineage.Hop, err error) (map[string]Hop, error) {
	if err != nil {
		return nil, err
	}
	out := make(map[string]Hop, len(in))
	for k, h := range in {
		out[k] = Hop{Distance: h.Distance, Next: h.Next}
	}
	return out, nil
}
