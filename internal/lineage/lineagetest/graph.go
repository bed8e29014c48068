package lineagetest

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"strings"

	"github.com/dataworkers/dw/internal/store"
)

// Graph is a synthetic context graph for benchmarks: N assets named
// bench://a<i+1>, three edges out of each, inside components of about
// 10.65% of N, so a blast radius from a1 reaches about a tenth of the
// graph (100k of 1M assets, as in issue 18's table).
type Graph struct {
	N     int
	Edges [][2]int32 // 0-based node numbers
}

// NewGraph generates the graph deterministically.
func NewGraph(n int) *Graph {
	comp := max(n*1065/10000, 4)
	rng := rand.New(rand.NewPCG(7, 11))
	edges := make([][2]int32, 0, 3*n)
	for i := 0; i < n; i++ {
		base := i / comp * comp
		size := min(comp, n-base)
		var picked [3]int32
		for k := 0; k < 3 && k < size-1; k++ {
			for {
				j := int32(base + rng.IntN(size))
				if int(j) == i || (k > 0 && picked[0] == j) || (k > 1 && picked[1] == j) {
					continue
				}
				picked[k] = j
				edges = append(edges, [2]int32{int32(i), j})
				break
			}
		}
	}
	return &Graph{N: n, Edges: edges}
}

// Adjacency is the floor's representation: a Go slice per node.
func (g *Graph) Adjacency() [][]int32 {
	adj := make([][]int32, g.N)
	for _, e := range g.Edges {
		adj[e[0]] = append(adj[e[0]], e[1])
	}
	return adj
}

// FloorBFS is the floor a graph index is measured against: the plainest
// breadth-first search from start, returning how many nodes it reached
// besides start.
func FloorBFS(adj [][]int32, start int32) int {
	visited := make([]bool, len(adj))
	visited[start] = true
	queue := []int32{start}
	for h := 0; h < len(queue); h++ {
		for _, v := range adj[queue[h]] {
			if !visited[v] {
				visited[v] = true
				queue = append(queue, v)
			}
		}
	}
	return len(queue) - 1
}

// Load writes the graph straight into the store's lineage tables in one
// transaction with prepared multi-row inserts (ingesting 1M assets through
// notes would take minutes): the one writer of these tables besides
// internal/lineage, in a package only tests import. It moves the graph
// versions, as every lineage write does, and floors the index log. Assets are found by their id, so
// no aliases are written. Every 50th asset is tagged money and every
// 100th scheduled (kinds cycling through BulkKinds), so ranking has work
// to do.
func (g *Graph) Load(ctx context.Context, db *store.DB) error {
	tx, err := db.SQL().BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	pg := db.Dialect() == store.Postgres
	insert := func(prefix string, cols int, rows func(yield func(...any) error) error) error {
		return insertRows(ctx, tx, pg, prefix, cols, 200, rows)
	}
	err = insert("INSERT INTO lineage_assets (seq, id, name, name_key, kind, platform, owner, tags, flags, cron, first_seen_ms, last_seen_ms) VALUES ", 12,
		func(yield func(...any) error) error {
			for i := 1; i <= g.N; i++ {
				name := fmt.Sprintf("a%d", i)
				tags, flags, cron := "[]", 0, ""
				if i%50 == 0 {
					tags, flags = `["money"]`, FlagMoney
				}
				if i%100 == 0 {
					cron, flags = "0 23 * * *", flags|FlagScheduled
				}
				if err := yield(i, "bench://"+name, name, name, BulkKinds[i%len(BulkKinds)], "bench", fmt.Sprintf("team-%d", i%37), tags, flags, cron, 1, 1); err != nil {
					return err
				}
			}
			return nil
		})
	if err != nil {
		return fmt.Errorf("bench graph assets: %w", err)
	}
	err = insert("INSERT INTO lineage_edges (from_seq, to_seq, kind, sources, first_seen_ms, last_seen_ms) VALUES ", 6, func(yield func(...any) error) error {
		for _, e := range g.Edges {
			if err := yield(int64(e[0])+1, int64(e[1])+1, "feeds", "note", 1, 1); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("bench graph edges: %w", err)
	}
	if db.Dialect() == store.Postgres {
		if _, err := tx.ExecContext(ctx, "SELECT setval(pg_get_serial_sequence('lineage_assets', 'seq'), $1)", g.N); err != nil {
			return err
		}
	}
	// Written around the lineage Writer, so with nothing in the index log:
	// every version moves and the log's floor with them, and any index
	// held over this store loads again.
	if _, err := tx.ExecContext(ctx, "DELETE FROM lineage_index_log"); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `UPDATE lineage_version SET version = version + 1, topology = topology + 1,
		facts = facts + 1, log_floor = topology + 1, log_rows = 0 WHERE id = 1`); err != nil {
		return err
	}
	return tx.Commit()
}

// insertRows writes the rows rows yields (cols values each) with
// prefix, an INSERT's text up to VALUES, rowsPer rows per statement: a
// prepared statement for every full one, the rest in one more.
func insertRows(ctx context.Context, tx *sql.Tx, pg bool, prefix string, cols, rowsPer int, rows func(yield func(...any) error) error) error {
	args := make([]any, 0, rowsPer*cols)
	full, err := tx.PrepareContext(ctx, prefix+bindRows(pg, rowsPer, cols))
	if err != nil {
		return err
	}
	defer full.Close()
	flush := func() error {
		if len(args) == 0 {
			return nil
		}
		var err error
		if len(args) == rowsPer*cols {
			_, err = full.ExecContext(ctx, args...)
		} else {
			_, err = tx.ExecContext(ctx, prefix+bindRows(pg, len(args)/cols, cols), args...)
		}
		args = args[:0]
		return err
	}
	if err := rows(func(vals ...any) error {
		args = append(args, vals...)
		if len(args) == rowsPer*cols {
			return flush()
		}
		return nil
	}); err != nil {
		return err
	}
	return flush()
}

// bindRows is rows rows of cols bind variables, in the dialect's
// spelling ($n on PostgreSQL, ? on SQLite).
func bindRows(pg bool, rows, cols int) string {
	var b strings.Builder
	n := 0
	for r := 0; r < rows; r++ {
		if r > 0 {
			b.WriteByte(',')
		}
		b.WriteByte('(')
		for c := 0; c < cols; c++ {
			if c > 0 {
				b.WriteByte(',')
			}
			n++
			if pg {
				fmt.Fprintf(&b, "$%d", n)
			} else {
				b.WriteByte('?')
			}
		}
		b.WriteByte(')')
	}
	return b.String()
}
