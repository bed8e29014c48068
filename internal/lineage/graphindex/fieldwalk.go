package graphindex

import "sort"

// FieldRead is one read found by a field walk, in node numbers.
type FieldRead struct {
	Reader, From int32
	Field        string // as the caller named it
	ReadAs       string // the (lower-cased) name the reader reads it under
	To           string // "" for a read, "*" for a filter or join key
	Dist         int32
}

// FieldReads walks from start carrying field names (lower-cased name at the
// node -> the caller's name). A node is expanded again when its set of
// names grows, so a field reaching a node by two paths is followed under
// both names; sets only grow, so cycles end.
//
// within, when not nil, confines the walk to the nodes it marks (a
// diagnosis passes the symptoms' upstream): nothing outside is expanded or
// reported, so the walk costs what can reach the symptoms, not everything
// downstream of start. A reader inside reached only through a node
// outside is not found; a diagnosis asks only for paths to the symptoms,
// and every node on such a path within its depth is inside.
func (ix *Index) FieldReads(start int32, fields map[string]string, maxDepth int, within []bool) []FieldRead {
	type state struct {
		names map[string]string
		dist  int32
	}
	states := map[int32]*state{start: {names: fields}}
	queue := []int32{start}
	queued := map[int32]bool{start: true}
	type readKey struct {
		reader int32
		field  string
	}
	seen := map[readKey]bool{}
	var out []FieldRead
	for len(queue) > 0 {
		u := queue[0]
		queue = queue[1:]
		queued[u] = false
		su := states[u]
		if int(su.dist) >= maxDepth {
			continue
		}
		outs, _ := ix.Out(u)
		for _, v := range outs {
			if within != nil && !within[v] {
				continue
			}
			carried := map[string]string{}
			maps, hasCols := ix.colsOf(u, v)
			if !hasCols {
				for k, orig := range su.names {
					carried[k] = orig
				}
			}
			for _, m := range maps {
				orig, ok := su.names[m.from]
				if !ok {
					continue
				}
				switch m.to {
				case "", "*":
					key := readKey{v, orig}
					if !seen[key] {
						seen[key] = true
						out = append(out, FieldRead{Reader: v, From: u, Field: orig, ReadAs: m.from, To: m.to, Dist: su.dist + 1})
					}
					if m.to == "" {
						// The job's own outputs refer to what it read by
						// the input's name.
						carried[m.from] = orig
					}
				default:
					carried[m.to] = orig
				}
			}
			if len(carried) == 0 {
				continue
			}
			sv, ok := states[v]
			grew := false
			if !ok {
				sv = &state{names: map[string]string{}, dist: su.dist + 1}
				states[v] = sv
				grew = true
			}
			for k, orig := range carried {
				if _, has := sv.names[k]; !has {
					sv.names[k] = orig
					grew = true
				}
			}
			if grew && !queued[v] {
				queued[v] = true
				queue = append(queue, v)
			}
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Dist < out[j].Dist })
	return out
}
