package remediate

import (
	"context"
	"errors"
	"fmt"

	"github.com/dataworkers/dw/internal/lineage"
)

// namer compares and places asset ids by lineage's one identity rule, the
// one incidents, proposals and domains use (docs/ASSET_IDS.md): an
// incident recorded under a dbt model, a metric defined on the table's
// short name and a proposal naming the table in full all speak of one
// asset; duckdb://dev.s.t and duckdb://prod.s.t are two.
type namer struct {
	ids   lineage.Identities
	cache map[string]lineage.Identity
}

func newNamer(env *Env) *namer {
	return &namer{ids: lineage.StoreIdentities(env.DB, env.Config), cache: map[string]lineage.Identity{}}
}

// identity is what ref names. A spelling the graph cannot place (one it
// does not know, or one several of its assets fit) is named by the
// configured warehouses alone, and one that is no asset id at all (an
// incident may keep a symptom's asset as given) stands for itself; only a
// store failure is an error.
func (n *namer) identity(ctx context.Context, ref string) (lineage.Identity, error) {
	if it, ok := n.cache[ref]; ok {
		return it, nil
	}
	it, err := n.ids.Of(ctx, ref)
	if err != nil {
		plain, perr := lineage.Identities{Names: n.ids.Names}.Of(ctx, ref)
		var amb *lineage.AmbiguousError
		switch {
		case perr != nil:
			it = lineage.Identity{ID: ref, Names: []string{ref}}
		case errors.As(err, &amb) || errors.Is(err, lineage.ErrUnknownAsset):
			it = plain
		default:
			return lineage.Identity{}, fmt.Errorf("name asset %s: %w; nothing was changed", ref, err)
		}
	}
	n.cache[ref] = it
	return it, nil
}

// same reports whether two asset ids name one asset.
func (n *namer) same(ctx context.Context, a, b string) (bool, error) {
	if a == b {
		return true, nil
	}
	ia, err := n.identity(ctx, a)
	if err != nil {
		return false, err
	}
	ib, err := n.identity(ctx, b)
	if err != nil {
		return false, err
	}
	return ia.Same(ib), nil
}

// key is what identifies an asset among others: its warehouse table when
// it has one, else its id.
func (n *namer) key(ctx context.Context, ref string) (string, error) {
	it, err := n.identity(ctx, ref)
	if err != nil {
		return "", err
	}
	if it.Table != "" {
		return it.Table, nil
	}
	return it.ID, nil
}

// table is the warehouse table an asset id names, through the context
// graph for a model or source that builds one: its platform and path as
// warehouse.Resolve takes it; ok is false when it names no single table.
func (n *namer) table(ctx context.Context, ref string) (platform, path string, ok bool, err error) {
	it, err := n.identity(ctx, ref)
	if err != nil || it.Table == "" {
		return "", "", false, err
	}
	platform, path, ok = lineage.SplitID(it.Table)
	return platform, path, ok, nil
}

// distinct counts the assets among ids.
func (n *namer) distinct(ctx context.Context, ids []string) (int, error) {
	seen := map[string]bool{}
	for _, a := range ids {
		k, err := n.key(ctx, a)
		if err != nil {
			return 0, err
		}
		seen[k] = true
	}
	return len(seen), nil
}
