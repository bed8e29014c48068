package benchmcp

import "github.com/dataworkers/dw/internal/lineage/lineagetest"

// The synthetic context graph, its loader and the floor BFS are
// lineagetest's, which lineage's own benchmarks use too, so the numbers
// both report are over the same graph.

// Graph is the synthetic graph (lineagetest.Graph).
type Graph = lineagetest.Graph

// NewGraph generates the graph of n assets deterministically.
func NewGraph(n int) *Graph { return lineagetest.NewGraph(n) }

// BFS is the floor: the plainest breadth-first search from start.
func BFS(adj [][]int32, start int32) int { return lineagetest.FloorBFS(adj, start) }
