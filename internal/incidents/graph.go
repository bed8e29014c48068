package incidents

import "context"

// Graph is what incidents needs from the context graph. It is small on
// purpose: diagnosis asks two questions of lineage (how far upstream of the
// symptoms is a changed asset, and which jobs read the fields a change
// touched), and joining or history asks which assets are near each other.
// internal/lineage is adapted to it; tests use an in-memory graph.
type Graph interface {
	// Upstream walks edges against their direction from the start assets,
	// at most maxDepth hops, and returns every asset reached (the start
	// assets included, at distance 0). One walk answers "is this changed
	// asset upstream, how far, by which path" for every candidate change.
	Upstream(ctx context.Context, start []string, maxDepth int) (map[string]Hop, error)
	// Downstream is Upstream along the edges' direction.
	Downstream(ctx context.Context, start []string, maxDepth int) (map[string]Hop, error)
	// UpstreamScope is Upstream that also returns what it reached as a
	// Scope, for confining field-reader walks to it.
	UpstreamScope(ctx context.Context, start []string, maxDepth int) (map[string]Hop, Scope, error)
	// FieldReaders lists the jobs and models downstream of asset, at most
	// maxDepth hops, that read any of fields (following column lineage where
	// it renames a field, and carrying the name unchanged across edges
	// without column lineage, such as a schema subject to its topic). With
	// a scope (from this graph's UpstreamScope), the walk passes only
	// through assets in it and reports only readers in it: diagnosis asks
	// which jobs on the way to the symptoms read a field, and walking
	// everything downstream of each changed asset made its cost follow the
	// window rather than what can be a cause. A nil scope confines nothing.
	FieldReaders(ctx context.Context, asset string, fields []string, maxDepth int, within Scope) ([]FieldReader, error)
}

// Scope is a set of assets made by a Graph's UpstreamScope; a graph reads
// only the scopes it made.
type Scope interface {
	// Contains reports whether the asset (by any name the walk answered
	// under) is in the set.
	Contains(asset string) bool
}

// Hop places an asset reached by a walk.
type Hop struct {
	// Distance is the number of edges from the nearest start asset.
	Distance int `json:"distance"`
	// Next is the neighbour one hop closer to the start ("" at a start
	// asset); following Next repeatedly yields a shortest path.
	Next string `json:"next,omitempty"`
}

// FieldReader is a job or model that reads a field.
type FieldReader struct {
	// Reader is the reading job or model's asset id.
	Reader string `json:"reader" jsonschema:"asset id of the job or model that reads the field"`
	// Field is the field as the change named it.
	Field string `json:"field" jsonschema:"the field read, as the change named it"`
	// From is the asset the reader reads the field from.
	From string `json:"from" jsonschema:"asset the reader reads the field from"`
	// Evidence says how the read is known, e.g. "recorded SQL: SUM(response_bytes)".
	Evidence string `json:"evidence,omitempty" jsonschema:"how the read is known, e.g. recorded SQL or column lineage from dbt"`
}

// pathFrom follows Next pointers from asset to a start asset.
func pathFrom(hops map[string]Hop, asset string) []string {
	path := []string{asset}
	seen := map[string]bool{asset: true}
	for cur := asset; ; {
		h, ok := hops[cur]
		if !ok || h.Next == "" || seen[h.Next] {
			return path
		}
		cur = h.Next
		seen[cur] = true
		path = append(path, cur)
	}
}
