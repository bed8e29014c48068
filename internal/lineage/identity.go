package lineage

import (
	"context"
	"errors"
	"slices"
	"strings"

	"github.com/dataworkers/dw/internal/config"
	"github.com/dataworkers/dw/internal/store"
)

// One table, several ids: a check prints duckdb://sales.orders, the catalog
// duckdb://warehouse.sales.orders, dbt calls the model that builds it
// dbt://model.shop.orders, and a person types "Sales"."Orders". Incidents,
// proposals, domains, verification and receipts must all see one asset
// there, so every one of them asks Identities (docs/ASSET_IDS.md):
//
//   - The id a record carries is the warehouse table, because that is what
//     a check runs on and what a data engineer recognises: the graph's own
//     id when it names a table, else the one table the graph knows the
//     asset by (a dbt model's relation). An asset with no table (a topic, a
//     job, a dashboard) or with several keeps the graph's id; an asset the
//     graph does not know gets its full id from the configured warehouses.
//   - Its names are every spelling records and globs may use: that id, the
//     graph's id and aliases (the dbt ids), the table's full id and the
//     schema.table a check prints. A domain glob matching any of them owns
//     the asset.
//   - The database is part of a table's identity: duckdb://dev.s.t and
//     duckdb://prod.s.t are two tables even where the graph noted one of
//     them without its database.

// Identity is what one asset is called.
type Identity struct {
	// ID is the id incidents, proposal targets, domains and receipts
	// record for the asset.
	ID string
	// Node is the context graph's id for it; "" when the graph does not
	// know it.
	Node string
	// Table is its warehouse table as a full id (with the database when
	// the graph or the configured warehouses know it); "" when the asset
	// is no table, or the graph knows several tables under it.
	Table string
	// Names are every name the asset is known by, ID first.
	Names []string
}

// Same reports whether two identities are one asset: the same id, or the
// same warehouse table (database, schema and name) however each was named.
func (a Identity) Same(b Identity) bool {
	return a.ID == b.ID || a.Table != "" && a.Table == b.Table
}

// Identities resolves spellings to identities: the context graph (nil
// when there is none at hand) and the configured warehouses' names.
type Identities struct {
	Graph *Graph
	Names *Names
}

// StoreIdentities is the identity service over the graph kept in db and the
// configured warehouses. Identity only reads the graph's names, never its
// traversal index, so a fresh Graph costs nothing to hold.
func StoreIdentities(db *store.DB, cfg *config.Config) Identities {
	ids := Identities{Names: NamesFromConfig(cfg)}
	if db != nil {
		ids.Graph = New(db, nil)
	}
	return ids
}

// Of is the identity of what ref names. A spelling several assets fit is
// an *AmbiguousError listing them; a spelling that names no asset id (no
// platform and no warehouse to place it, a refused character) is an error
// saying why.
func (s Identities) Of(ctx context.Context, ref string) (Identity, error) {
	ref = strings.TrimSpace(ref)
	bare := !strings.Contains(ref, "://")
	cands, cerr := s.Names.Candidates(ref)
	if cerr != nil && (!bare || s.Graph == nil) {
		return Identity{}, cerr
	}
	var known []resolved
	var via []string
	if s.Graph != nil {
		for _, c := range cands {
			r, ok, err := s.Graph.known(ctx, c)
			if err != nil {
				return Identity{}, err
			}
			if ok && !slices.ContainsFunc(known, func(k resolved) bool { return k.seq == r.seq }) {
				known, via = append(known, r), append(via, c)
			}
		}
		if len(known) == 0 && bare {
			// A bare name may be an asset's name or dbt id (fct_orders,
			// model.shop.fct_orders) rather than a table spelling.
			r, err := resolveAsset(ctx, s.Graph.db, ref)
			switch {
			case err == nil:
				known, via = []resolved{r}, []string{r.id}
			case !errors.Is(err, ErrUnknownAsset) || cerr != nil:
				return Identity{}, err
			}
		}
	}
	switch len(known) {
	case 0:
		if len(cands) > 1 && bare {
			return Identity{}, &AmbiguousError{Ref: ref, Candidates: cands}
		}
		return s.unknown(cands[0]), nil
	case 1:
		return s.known(ctx, known[0], via[0])
	}
	ids := make([]string, len(known))
	for i, k := range known {
		ids[i] = k.id
	}
	return Identity{}, &AmbiguousError{Ref: ref, Candidates: ids}
}

// unknown is the identity of an asset the graph does not know: its
// canonical id, already full where the warehouses place it.
func (s Identities) unknown(id string) Identity {
	it := Identity{ID: id, Names: s.Names.withShort([]string{id})}
	if isTable(id) {
		it.Table = id
	}
	return it
}

// known is the identity of an asset the graph holds, found through the
// candidate id via.
func (s Identities) known(ctx context.Context, r resolved, via string) (Identity, error) {
	aliases, err := s.Graph.aliasesOf(ctx, r.seq)
	if err != nil {
		return Identity{}, err
	}
	strong := append([]string{r.id}, aliases...)
	// The tables the asset is known by, keyed by their full id: names the
	// graph holds with their database say where it is, and only when it
	// holds none is a partial name placed in the home database.
	var withDB, partial []string
	for _, n := range strong {
		switch {
		case !isTable(n):
		case hasDatabase(n):
			withDB = append(withDB, n)
		default:
			partial = append(partial, n)
		}
	}
	tables := map[string]string{} // full id -> the name the graph records
	var keys []string
	add := func(full, recorded string) {
		if _, ok := tables[full]; !ok {
			tables[full] = recorded
			keys = append(keys, full)
		}
	}
	for _, n := range withDB {
		add(n, n)
	}
	if len(withDB) == 0 {
		for _, n := range partial {
			c, err := s.Names.Canonical(n)
			if err != nil {
				c = n
			}
			add(c, n)
		}
		// A full name the graph never saw reached the asset through its
		// partial name; if the warehouses place that partial name in
		// another database, the spelling is another database's table.
		if len(keys) == 1 && isTable(via) && hasDatabase(via) && hasDatabase(keys[0]) && keys[0] != via {
			return s.unknown(via), nil
		}
	}
	it := Identity{ID: r.id, Node: r.id}
	if len(keys) == 1 {
		it.Table = keys[0]
		if !isTable(r.id) {
			it.ID = tables[keys[0]]
		}
	}
	names := []string{it.ID}
	for _, n := range append(strong, keys...) {
		if !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	if (via == it.Table || len(withDB) == 0) && !slices.Contains(names, via) {
		names = append(names, via)
	}
	it.Names = s.Names.withShort(names)
	return it, nil
}

// isTable reports whether id is a warehouse table's id.
func isTable(id string) bool {
	p, _, ok := SplitID(id)
	return ok && IsWarehouse(p)
}

// hasDatabase reports whether a table id names its database
// (platform://database.schema.table).
func hasDatabase(id string) bool {
	p, path, ok := SplitID(id)
	if !ok || !IsWarehouse(p) {
		return false
	}
	parts, err := splitQualified(path)
	return err == nil && len(parts) >= 3
}
