package graphindex

import (
	"context"
	"slices"
	"testing"
)

// A walk's metas are its own reached nodes' in order, on an array a
// released walk handed on: a bigger walk released before a smaller one
// leaves nothing of its own behind, and a walk in hand is not written by
// another taken meanwhile.
func TestReachedMetasOnReusedArrays(t *testing.T) {
	ctx := context.Background()
	// 0→1→2→3→4 and 5→6, each node with a meta of its own.
	src, dst := []int32{0, 1, 2, 3, 5}, []int32{1, 2, 3, 4, 6}
	ix := FromEdges(7, src, dst, make([]uint8, len(src)))
	for i := range ix.meta {
		ix.meta[i] = NodeMeta{Owner: int32(i), Domain: int32(10 + i), Kind: uint8(i % 5), Flags: uint8(i)}
	}
	lim := Limits{MaxDepth: 100, MaxNodes: 100}
	want := func(w *Walk) []NodeMeta {
		var out []NodeMeta
		for _, n := range w.Order[w.Starts:] {
			out = append(out, ix.meta[n])
		}
		return out
	}
	for round := 0; round < 3; round++ {
		big := ix.BFS(ctx, []int32{0}, false, lim)
		if got := ix.ReachedMetas(big); len(got) != 4 || !slices.Equal(got, want(big)) {
			t.Fatalf("round %d: from node 0, metas %v, want %v", round, got, want(big))
		}
		ix.Release(big)
		small := ix.BFS(ctx, []int32{5}, false, lim)
		other := ix.BFS(ctx, []int32{2}, false, lim)
		gotSmall := ix.ReachedMetas(small)
		gotOther := ix.ReachedMetas(other)
		if !slices.Equal(gotSmall, []NodeMeta{ix.meta[6]}) || !slices.Equal(gotOther, want(other)) || len(gotOther) != 2 {
			t.Fatalf("round %d: from node 5 %v, from node 2 %v (want %v)", round, gotSmall, gotOther, want(other))
		}
		ix.Release(small)
		ix.Release(other)
	}
}
