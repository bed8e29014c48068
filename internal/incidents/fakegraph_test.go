package incidents

import (
	"context"
	"testing"
	"time"

	"github.com/dataworkers/dw/internal/changelog"

	"github.com/dataworkers/dw/internal/clock"
	"github.com/dataworkers/dw/internal/store"
)

// memGraph is an in-memory Graph over adjacency maps, with column lineage
// per edge: a mapping {from, ""} means the target reads from; an edge with
// no mappings carries field names unchanged.
type memGraph struct {
	out, in  map[string][]string
	cols     map[[2]string][]colMapping
	evidence map[[2]string]string // (reader, field) -> how the read is known
	// walked lists the assets FieldReaders was asked to walk from, in order.
	walked []string
}

type colMapping struct{ from, to string }

func newMemGraph() *memGraph {
	return &memGraph{out: map[string][]string{}, in: map[string][]string{}, cols: map[[2]string][]colMapping{},
		evidence: map[[2]string]string{}}
}

// chain links assets a -> b -> c ...
func (g *memGraph) chain(assets ...string) *memGraph {
	for i := 1; i < len(assets); i++ {
		g.edge(assets[i-1], assets[i])
	}
	return g
}

func (g *memGraph) edge(from, to string, cols ...colMapping) {
	g.out[from] = append(g.out[from], to)
	g.in[to] = append(g.in[to], from)
	if len(cols) > 0 {
		g.cols[[2]string{from, to}] = cols
	}
}

func (g *memGraph) reads(from, job, field, evidence string) {
	k := [2]string{from, job}
	if _, linked := g.cols[k]; !linked {
		g.out[from] = append(g.out[from], job)
		g.in[job] = append(g.in[job], from)
	}
	g.cols[k] = append(g.cols[k], colMapping{field, ""})
	g.evidence[[2]string{job, field}] = evidence
}

func bfs(start []string, adj map[string][]string, maxDepth int) map[string]Hop {
	out := map[string]Hop{}
	var frontier []string
	for _, s := range start {
		if _, ok := out[s]; !ok {
			out[s] = Hop{}
			frontier = append(frontier, s)
		}
	}
	for d := 1; d <= maxDepth && len(frontier) > 0; d++ {
		var next []string
		for _, cur := range frontier {
			for _, n := range adj[cur] {
				if _, ok := out[n]; !ok {
					out[n] = Hop{Distance: d, Next: cur}
					next = append(next, n)
				}
			}
		}
		frontier = next
	}
	return out
}

func (g *memGraph) Upstream(_ context.Context, start []string, maxDepth int) (map[string]Hop, error) {
	return bfs(start, g.in, maxDepth), nil
}

func (g *memGraph) Downstream(_ context.Context, start []string, maxDepth int) (map[string]Hop, error) {
	return bfs(start, g.out, maxDepth), nil
}

// memScope is an upstream answer as a Scope.
type memScope map[string]Hop

func (s memScope) Contains(asset string) bool {
	_, ok := s[asset]
	return ok
}

func (g *memGraph) UpstreamScope(ctx context.Context, start []string, maxDepth int) (map[string]Hop, Scope, error) {
	up, err := g.Upstream(ctx, start, maxDepth)
	return up, memScope(up), err
}

func (g *memGraph) FieldReaders(_ context.Context, asset string, fields []string, maxDepth int, within Scope) ([]FieldReader, error) {
	g.walked = append(g.walked, asset)
	if within != nil && !within.Contains(asset) {
		return nil, nil
	}
	type state struct {
		asset string
		// name at this asset -> name as the change called it
		names map[string]string
	}
	start := map[string]string{}
	for _, f := range fields {
		start[f] = f
	}
	var out []FieldReader
	frontier := []state{{asset, start}}
	seen := map[string]bool{asset: true}
	for d := 0; d < maxDepth && len(frontier) > 0; d++ {
		var next []state
		for _, st := range frontier {
			for _, to := range g.out[st.asset] {
				if within != nil && !within.Contains(to) {
					continue
				}
				maps, hasCols := g.cols[[2]string{st.asset, to}]
				carried := map[string]string{}
				if !hasCols {
					carried = st.names
				}
				for _, m := range maps {
					orig, ok := st.names[m.from]
					if !ok {
						continue
					}
					if m.to == "" {
						out = append(out, FieldReader{Reader: to, Field: orig, From: st.asset, Evidence: g.evidence[[2]string{to, m.from}]})
					} else {
						carried[m.to] = orig
					}
				}
				if len(carried) > 0 && !seen[to] {
					seen[to] = true
					next = append(next, state{to, carried})
				}
			}
		}
		frontier = next
	}
	return out, nil
}

// tue is the stories' Tuesday.
func tue(h, m int) time.Time { return time.Date(2026, 10, 13, h, m, 0, 0, time.UTC) }

func newService(t testing.TB, db *store.DB, now time.Time, g Graph) (*Service, *clock.Fake) {
	t.Helper()
	clk := clock.NewFake(now)
	s := &Service{DB: db, Clock: clk}
	if g != nil {
		s.Graph = g
	}
	return s, clk
}

func mustRecord(t testing.TB, s *Service, p changelog.RecordChangeParams) changelog.Change {
	t.Helper()
	r, err := (&changelog.Log{DB: s.DB, Clock: s.Clock}).RecordChange(context.Background(), p)
	if err != nil {
		t.Fatalf("record change %q: %v", p.Summary, err)
	}
	return r.Change
}

func mustReport(t testing.TB, s *Service, syms ...Symptom) *ReportResult {
	t.Helper()
	r, err := s.ReportSymptoms(context.Background(), ReportParams{Symptoms: syms})
	if err != nil {
		t.Fatalf("report symptoms: %v", err)
	}
	return r
}

func schemaV12() changelog.RecordChangeParams {
	return changelog.RecordChangeParams{
		Key: "schema-registry:api-usage-value:12", At: tue(14, 5), Kind: "schema_version", System: "schema-registry",
		Assets: []string{"schema://api-usage-value"},
		Fields: []changelog.FieldChange{{Name: "response_bytes", How: changelog.FieldRemoved}, {Name: "response_kib", How: changelog.FieldAdded}},
		Actor:  "gateway-team", Source: "dw-schema", Summary: "version 12 of schema://api-usage-value",
		Details: map[string]string{"version": "12", "compatibility": "BACKWARD"},
	}
}
