package lineage

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/dataworkers/dw/internal/lineage/graphindex"

	"github.com/dataworkers/dw/internal/page"
)

// Trace directions.
const (
	DirectionUp   = "up"
	DirectionDown = "down"
	DirectionBoth = "both"
)

const (
	defaultTraceDepth = 10
	defaultMaxPaths   = 20
	MaxTracePaths     = 100
)

// TraceParams asks for the paths through an asset across platforms.
type TraceParams struct {
	Asset     string `json:"asset" jsonschema:"asset id or unambiguous bare name to trace from"`
	Direction string `json:"direction,omitempty" jsonschema:"up (where the data comes from), down (where it goes) or both (default)"`
	MaxDepth  int    `json:"max_depth,omitempty" jsonschema:"hops to follow each way (default 10)"`
	MaxAssets int    `json:"max_assets,omitempty" jsonschema:"stop after reaching this many assets each way (default 10000)"`
	MaxPaths  int    `json:"max_paths,omitempty" jsonschema:"paths listed each way, longest first: 1 to 100 (default 20)"`
	Timeout   string `json:"timeout,omitempty" jsonschema:"time budget as a duration, e.g. 2s (default 5s)"`
	Limit     int    `json:"limit,omitempty" jsonschema:"assets (nodes) listed per page, upstream first: 1 to 500 (default 50)"`
	Cursor    string `json:"cursor,omitempty" jsonschema:"next_cursor from the previous answer, for the next page of nodes; omit for the first page"`
}

// TraceNode is an asset on a trace.
type TraceNode struct {
	ID       string `json:"id" jsonschema:"asset id"`
	Kind     Kind   `json:"kind" jsonschema:"asset kind"`
	Platform string `json:"platform" jsonschema:"platform"`
	Title    string `json:"title,omitempty" jsonschema:"display name"`
	Owner    string `json:"owner,omitempty" jsonschema:"owner"`
	Distance int    `json:"distance" jsonschema:"hops from the traced asset: negative upstream, positive downstream"`
}

// TraceEdge is an edge between two assets on a trace.
type TraceEdge struct {
	From string   `json:"from" jsonschema:"upstream asset id"`
	To   string   `json:"to" jsonschema:"downstream asset id"`
	Kind EdgeKind `json:"kind" jsonschema:"edge kind"`
}

// TracePath is one chain of assets, upstream first.
type TracePath struct {
	Assets          []string `json:"assets" jsonschema:"asset ids in the order data flows; on a path of more than 10 assets, the first 5 and the last 5"`
	Length          int      `json:"length" jsonschema:"assets on the whole path"`
	Elided          int      `json:"elided,omitempty" jsonschema:"assets left out between the first and last 5 listed"`
	Platforms       []string `json:"platforms" jsonschema:"the platforms crossed, in order, without repeats in a row (the first 5 and last 5 when more)"`
	PlatformsElided int      `json:"platforms_elided,omitempty" jsonschema:"platforms left out between the first and last 5 listed"`
}

// TraceResult is the lineage around an asset, across platforms.
type TraceResult struct {
	Asset           string      `json:"asset" jsonschema:"the traced asset's id"`
	Direction       string      `json:"direction" jsonschema:"up, down or both"`
	Nodes           []TraceNode `json:"nodes" jsonschema:"this page of the assets reached, upstream first"`
	NodesTotal      int         `json:"nodes_total" jsonschema:"assets reached in all, across pages"`
	NextCursor      string      `json:"next_cursor,omitempty" jsonschema:"pass as cursor for the next page of nodes; absent on the last page"`
	Edges           []TraceEdge `json:"edges" jsonschema:"edges among the assets on this page (at most twice limit)"`
	EdgesTotal      int         `json:"edges_total" jsonschema:"edges among all the assets reached"`
	Upstream        []TracePath `json:"upstream,omitempty" jsonschema:"paths from the furthest sources to the asset, most cross-platform and longest first (at most max_paths)"`
	UpstreamTotal   int         `json:"upstream_total" jsonschema:"upstream paths in all; more than listed when max_paths cut the list"`
	Downstream      []TracePath `json:"downstream,omitempty" jsonschema:"paths from the asset to the furthest consumers, most cross-platform and longest first (at most max_paths)"`
	DownstreamTotal int         `json:"downstream_total" jsonschema:"downstream paths in all; more than listed when max_paths cut the list"`
	Platforms       []string    `json:"platforms" jsonschema:"every platform on the trace"`
	Partial         bool        `json:"partial" jsonschema:"true when a budget stopped the walk"`
	Budget          string      `json:"budget,omitempty" jsonschema:"the budget that stopped it: depth, size or time"`
	GraphVersion    int64       `json:"graph_version" jsonschema:"graph version the answer was computed on"`
	Summary         string      `json:"summary" jsonschema:"short text for a person"`
}

// Trace follows an asset's lineage up, down or both ways across platforms
// (a Kafka topic, the Flink job reading it, the table it lands in, the dbt
// models on top, the dashboards and reverse-ETL syncs reading those) and
// returns the assets, the edges between them and the longest paths.
func (g *Graph) Trace(ctx context.Context, p TraceParams) (*TraceResult, error) {
	dir := strings.ToLower(strings.TrimSpace(p.Direction))
	if dir == "" {
		dir = DirectionBoth
	}
	if dir != DirectionUp && dir != DirectionDown && dir != DirectionBoth {
		return nil, fmt.Errorf("direction %q is not valid; use up, down or both", p.Direction)
	}
	lim, err := traversalLimits(p.MaxDepth, p.MaxAssets, p.Timeout, defaultTraceDepth)
	if err != nil {
		return nil, err
	}
	maxPaths := defaultMaxPaths
	switch {
	case p.MaxPaths < 0 || p.MaxPaths > MaxTracePaths:
		return nil, fmt.Errorf("max_paths %d is out of range; use 1 to %d (0 means the default %d)", p.MaxPaths, MaxTracePaths, defaultMaxPaths)
	case p.MaxPaths > 0:
		maxPaths = p.MaxPaths
	}
	idx, start, r, _, err := g.start(ctx, p.Asset)
	if err != nil {
		return nil, err
	}
	pg, err := page.Params{Limit: p.Limit, Cursor: p.Cursor}.Resolve("trace_cross_platform_lineage", r.id, dir,
		fmt.Sprint(p.MaxDepth, p.MaxAssets, p.Timeout, idx.Version))
	if err != nil {
		return nil, err
	}
	res := &TraceResult{Asset: r.id, Direction: dir, GraphVersion: idx.Version,
		Nodes: []TraceNode{}, Edges: []TraceEdge{}, Platforms: []string{}}
	var up, down *graphindex.Walk
	if dir != DirectionDown {
		up = idx.BFS(ctx, []int32{start}, true, lim)
	}
	if dir != DirectionUp {
		down = idx.BFS(ctx, []int32{start}, false, lim)
	}
	// The answer keeps ids and counts, never the walks' arrays.
	defer func() { idx.Release(up); idx.Release(down) }()
	for _, w := range []*graphindex.Walk{up, down} {
		if w != nil && w.Budget != "" {
			res.Partial, res.Budget = true, w.Budget
		}
	}
	// Every node on the trace, with its signed distance.
	dist := map[int32]int{start: 0}
	order := []int32{start}
	if up != nil {
		for p := up.Starts; p < len(up.Order); p++ {
			dist[up.Order[p]] = -int(up.Distance(int32(p)))
			order = append(order, up.Order[p])
		}
	}
	if down != nil {
		for p := down.Starts; p < len(down.Order); p++ {
			if _, seen := dist[down.Order[p]]; !seen {
				order = append(order, down.Order[p])
			}
			dist[down.Order[p]] = int(down.Distance(int32(p)))
		}
	}
	seqs := make([]int64, len(order))
	for i, n := range order {
		seqs[i] = idx.Seq(n)
	}
	rows, err := loadListRows(ctx, g.db, seqs)
	if err != nil {
		return nil, err
	}
	idOf := func(n int32) string {
		if r, ok := rows[idx.Seq(n)]; ok {
			return r.ID
		}
		return fmt.Sprintf("#%d", idx.Seq(n))
	}
	platformOf := func(n int32) string {
		if r, ok := rows[idx.Seq(n)]; ok {
			return r.Platform
		}
		return ""
	}
	platforms := map[string]bool{}
	for _, n := range order {
		r, ok := rows[idx.Seq(n)]
		if !ok {
			continue
		}
		res.Nodes = append(res.Nodes, TraceNode{ID: r.ID, Kind: r.Kind, Platform: r.Platform, Title: r.Title, Owner: r.Owner, Distance: dist[n]})
		platforms[r.Platform] = true
	}
	sort.SliceStable(res.Nodes, func(i, j int) bool {
		if res.Nodes[i].Distance != res.Nodes[j].Distance {
			return res.Nodes[i].Distance < res.Nodes[j].Distance
		}
		return res.Nodes[i].ID < res.Nodes[j].ID
	})
	for pl := range platforms {
		res.Platforms = append(res.Platforms, pl)
	}
	sort.Strings(res.Platforms)
	up0, down0 := 0, 0
	for _, n := range res.Nodes {
		switch {
		case n.Distance < 0:
			up0++
		case n.Distance > 0:
			down0++
		}
	}
	// Offset-paged over a fixed snapshot: the cursor's scope holds the
	// graph version, so a cursor outlives no lineage write.
	var info page.Info
	res.Nodes, info = page.Slice(pg, res.Nodes)
	res.NodesTotal, res.NextCursor = info.Total, info.NextCursor
	onPage := make(map[string]bool, len(res.Nodes))
	for _, n := range res.Nodes {
		onPage[n.ID] = true
	}
	for _, u := range order {
		outs, kinds := idx.Out(u)
		for e, v := range outs {
			if _, ok := dist[v]; !ok {
				continue
			}
			res.EdgesTotal++
			if from, to := idOf(u), idOf(v); onPage[from] && onPage[to] && len(res.Edges) < 2*pg.Limit {
				res.Edges = append(res.Edges, TraceEdge{From: from, To: to, Kind: EdgeKinds[kinds[e]]})
			}
		}
	}
	if up != nil {
		res.Upstream, res.UpstreamTotal = tracePaths(up, true, maxPaths, idOf, platformOf)
	}
	if down != nil {
		res.Downstream, res.DownstreamTotal = tracePaths(down, false, maxPaths, idOf, platformOf)
	}
	res.Summary = traceSummary(res, up0, down0)
	return res, nil
}

// maxPathAssets bounds the assets listed on one path: a chain can be
// thousands of hops long (max_depth allows 10000), and its two ends say
// where data starts and lands. A longer path keeps its first and last
// halves and says how many were left out between them.
const maxPathAssets = 10

// tracePaths lists paths from the start to the ends of a walk (nodes with
// nothing further to follow), most cross-platform and longest first, at
// most maxPaths of them, and returns how many there are in all. Paths are
// ranked on counts kept per node in one pass (a node's platform changes
// follow from its parent's, which BFS order puts first), so only the
// listed paths are ever spelled out: the walk's ends may number millions.
func tracePaths(w *graphindex.Walk, up bool, maxPaths int, idOf, platformOf func(int32) string) ([]TracePath, int) {
	hasChild := make([]bool, len(w.Order))
	changes := make([]int32, len(w.Order)) // platform changes from the start to each node
	parents := w.Parents()
	for p := w.Starts; p < len(w.Order); p++ {
		par := parents[p]
		hasChild[par] = true
		changes[p] = changes[par]
		if platformOf(w.Order[p]) != platformOf(w.Order[par]) {
			changes[p]++
		}
	}
	var ends []int32
	for p := w.Starts; p < len(w.Order); p++ {
		if !hasChild[p] {
			ends = append(ends, int32(p))
		}
	}
	sort.SliceStable(ends, func(i, j int) bool {
		a, b := ends[i], ends[j]
		if changes[a] != changes[b] {
			return changes[a] > changes[b]
		}
		if da, db := w.Distance(a), w.Distance(b); da != db {
			return da > db
		}
		return idOf(w.Order[a]) < idOf(w.Order[b])
	})
	total := len(ends)
	out := make([]TracePath, 0, min(total, maxPaths))
	for _, p := range ends[:min(total, maxPaths)] {
		nodes := w.Path(p)
		if up {
			for i, j := 0, len(nodes)-1; i < j; i, j = i+1, j-1 {
				nodes[i], nodes[j] = nodes[j], nodes[i]
			}
		}
		tp := TracePath{Length: len(nodes)}
		var platforms []string
		for _, n := range nodes {
			if pl := platformOf(n); len(platforms) == 0 || platforms[len(platforms)-1] != pl {
				platforms = append(platforms, pl)
			}
		}
		tp.Platforms, tp.PlatformsElided = ends2(platforms, maxPathAssets)
		if len(nodes) > maxPathAssets {
			nodes = append(nodes[:maxPathAssets/2:maxPathAssets/2], nodes[len(nodes)-maxPathAssets/2:]...)
			tp.Elided = tp.Length - maxPathAssets
		}
		for _, n := range nodes {
			tp.Assets = append(tp.Assets, idOf(n))
		}
		out = append(out, tp)
	}
	return out, total
}

// ends2 keeps the first and last halves of a list longer than n, and says
// how many it left out.
func ends2(list []string, n int) ([]string, int) {
	if len(list) <= n {
		return list, 0
	}
	return append(list[:n/2:n/2], list[len(list)-n/2:]...), len(list) - n
}

// pathLine is a path for a person: its assets with any left-out middle said.
func pathLine(tp TracePath) string {
	if tp.Elided == 0 {
		return strings.Join(tp.Assets, " -> ")
	}
	h := len(tp.Assets) / 2
	return fmt.Sprintf("%s -> … %d more … -> %s", strings.Join(tp.Assets[:h], " -> "), tp.Elided, strings.Join(tp.Assets[h:], " -> "))
}

func traceSummary(r *TraceResult, up, down int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %d asset(s) upstream, %d downstream, across %s.", r.Asset, up, down, strings.Join(r.Platforms, ", "))
	if len(r.Upstream) > 0 && len(r.Upstream[0].Assets) > 1 {
		fmt.Fprintf(&b, " Longest upstream: %s.", pathLine(r.Upstream[0]))
	}
	if len(r.Downstream) > 0 && len(r.Downstream[0].Assets) > 1 {
		fmt.Fprintf(&b, " Longest downstream: %s.", pathLine(r.Downstream[0]))
	}
	if len(r.Upstream) < r.UpstreamTotal || len(r.Downstream) < r.DownstreamTotal {
		fmt.Fprintf(&b, " Paths listed: %d of %d upstream, %d of %d downstream (max_paths).", len(r.Upstream), r.UpstreamTotal, len(r.Downstream), r.DownstreamTotal)
	}
	if r.Partial {
		fmt.Fprintf(&b, " PARTIAL: the %s budget stopped the walk.", r.Budget)
	}
	return b.String()
}
