package graphindex

import "maps"

// cowShards is how many maps a cowMap splits its keys over.
const cowShards = 256

type shardKey interface{ ~int32 | ~int64 | ~uint64 }

// cowMap is a map an index derived by Apply shares with the one it came
// from: deriving copies the shard table (cowShards pointers) and a change
// copies only the shard it writes, so applying one change costs the same
// however large the overlay has grown, and no index another walk reads is
// ever written. The zero value is empty.
type cowMap[K shardKey, V any] struct {
	shards [cowShards]map[K]V
	// owned marks the shards this derivation has copied, which it may
	// write in place; derive clears it.
	owned [cowShards]bool
	n     int
}

func shardOf[K shardKey](k K) int { return int(uint64(k) % cowShards) }

func (m *cowMap[K, V]) get(k K) (V, bool) {
	v, ok := m.shards[shardOf(k)][k]
	return v, ok
}

func (m *cowMap[K, V]) has(k K) bool {
	_, ok := m.shards[shardOf(k)][k]
	return ok
}

func (m *cowMap[K, V]) set(k K, v V) {
	i := shardOf(k)
	if !m.owned[i] {
		m.shards[i] = maps.Clone(m.shards[i])
		if m.shards[i] == nil {
			m.shards[i] = map[K]V{}
		}
		m.owned[i] = true
	}
	if _, had := m.shards[i][k]; !had {
		m.n++
	}
	m.shards[i][k] = v
}

func (m *cowMap[K, V]) len() int { return m.n }

// derive is m as the next index starts it: sharing every shard.
func (m *cowMap[K, V]) derive() cowMap[K, V] {
	c := *m
	c.owned = [cowShards]bool{}
	return c
}

// all calls fn for every entry.
func (m *cowMap[K, V]) all(fn func(K, V)) {
	for _, s := range m.shards {
		for k, v := range s {
			fn(k, v)
		}
	}
}
