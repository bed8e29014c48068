package lineage

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/dataworkers/dw/internal/store"
	"github.com/dataworkers/dw/internal/suggest"
)

// ErrUnknownAsset is wrapped by every "no such asset" error.
var ErrUnknownAsset = errors.New("unknown asset")

// resolved is an asset reference found in the store.
type resolved struct {
	seq int64
	id  string
}

// Resolve finds the asset a person or tool means: an id or any alias
// (kafka://prod/api-usage, dbt://model.billing.fct_billable_egress, the
// table's snowflake://analytics.usage.usage_hourly), a dbt unique id
// without its dbt:// prefix, or a bare name (usage_hourly,
// fct_billable_egress) when exactly one asset has it. An unknown name
// gets an error listing the closest names; an ambiguous one lists the
// candidates.
func (g *Graph) Resolve(ctx context.Context, ref string) (string, error) {
	r, err := resolveAsset(ctx, g.db, ref)
	if err != nil {
		return "", err
	}
	return r.id, nil
}

func resolveAsset(ctx context.Context, q store.Querier, ref string) (resolved, error) {
	ref = strings.TrimSpace(ref)
	if ref == "" {
		return resolved{}, fmt.Errorf("asset is required: give an id like kafka://prod/api-usage or a name like fct_billable_egress")
	}
	var tries []string
	if strings.Contains(ref, "://") {
		tries = append(tries, ref)
		if c, err := CanonicalID(ref); err == nil && c != ref {
			tries = append(tries, c)
		} else if err != nil {
			return resolved{}, err
		}
	} else {
		tries = append(tries, "dbt://"+ref)
	}
	for _, t := range tries {
		if r, ok, err := byAlias(ctx, q, t); err != nil || ok {
			return r, err
		}
	}
	if strings.Contains(ref, "://") {
		// A full name the graph never saw, for a table a note named
		// without its database: the one asset holding that partial name,
		// as ingestion would link them.
		if r, ok, err := byPartial(ctx, q, tries[len(tries)-1]); err != nil || ok {
			return r, err
		}
	}
	if !strings.Contains(ref, "://") {
		if r, ok, err := byName(ctx, q, ref); err != nil || ok {
			return r, err
		}
	} else if err := ambiguousPartial(ctx, q, tries[len(tries)-1]); err != nil {
		return resolved{}, err
	}
	return resolved{}, unknownAssetError(ctx, q, ref)
}

func byAlias(ctx context.Context, q store.Querier, alias string) (resolved, bool, error) {
	var r resolved
	err := q.QueryRowContext(ctx, "SELECT seq, id FROM lineage_assets WHERE id = ?", alias).Scan(&r.seq, &r.id)
	if err == nil {
		return r, true, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return r, false, fmt.Errorf("look up asset %s: %w", alias, err)
	}
	err = q.QueryRowContext(ctx, `SELECT a.seq, a.id FROM lineage_aliases l JOIN lineage_assets a ON a.seq = l.asset_seq
		WHERE l.alias = ?`, alias).Scan(&r.seq, &r.id)
	if errors.Is(err, sql.ErrNoRows) {
		return r, false, nil
	}
	if err != nil {
		return r, false, fmt.Errorf("look up asset %s: %w", alias, err)
	}
	return r, true, nil
}

// byPartial finds the asset whose schema.table partial name a full table
// id shares, unless that asset carries another full name with it (then it
// is another database's table).
func byPartial(ctx context.Context, q store.Querier, id string) (resolved, bool, error) {
	w := weakOf(id)
	if w == "" || w == id {
		return resolved{}, false, nil
	}
	r, ok, err := byAlias(ctx, q, w)
	if err != nil || !ok {
		return r, false, err
	}
	rows, err := q.QueryContext(ctx, "SELECT alias FROM lineage_aliases WHERE asset_seq = ? AND weak = 0", r.seq)
	if err != nil {
		return r, false, err
	}
	defer rows.Close()
	for rows.Next() {
		var a string
		if err := rows.Scan(&a); err != nil {
			return r, false, err
		}
		if a != id && weakOf(a) == w {
			return resolved{}, false, nil
		}
	}
	return r, true, rows.Err()
}

// ambiguousPartial explains a schema.table name that several databases'
// tables share, listing them.
func ambiguousPartial(ctx context.Context, q store.Querier, alias string) error {
	var seq int64
	err := q.QueryRowContext(ctx, "SELECT asset_seq FROM lineage_aliases WHERE alias = ?", alias).Scan(&seq)
	if errors.Is(err, sql.ErrNoRows) || err == nil && seq != 0 {
		return nil
	}
	if err != nil {
		return err
	}
	p, path, _ := SplitID(alias)
	rows, err := q.QueryContext(ctx, `SELECT DISTINCT a.id FROM lineage_aliases l JOIN lineage_assets a ON a.seq = l.asset_seq
		WHERE l.weak = 0 AND l.alias LIKE ? ESCAPE '\' ORDER BY a.id LIMIT 20`, likeEscape(p+"://")+"%."+likeEscape(path))
	if err != nil {
		return err
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return err
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	return fmt.Errorf("%w: %s names a table in several databases (%s); give the database too", ErrUnknownAsset, alias, strings.Join(ids, ", "))
}

// byName resolves a bare name, or a dotted tail of a table name
// (usage.usage_hourly), when exactly one asset matches.
func byName(ctx context.Context, q store.Querier, name string) (resolved, bool, error) {
	key, last := strings.ToLower(name), strings.ToLower(name)
	if i := strings.LastIndex(key, "."); i >= 0 {
		last = key[i+1:]
	}
	// A name may itself hold dots (a Kafka topic), or be the dotted tail of
	// a table's name (usage.usage_hourly).
	rows, err := q.QueryContext(ctx, "SELECT seq, id, name_key FROM lineage_assets WHERE name_key = ? OR name_key = ? ORDER BY id LIMIT 50", key, last)
	if err != nil {
		return resolved{}, false, fmt.Errorf("look up asset name %s: %w", name, err)
	}
	defer rows.Close()
	var all []resolved
	for rows.Next() {
		var r resolved
		var nk string
		if err := rows.Scan(&r.seq, &r.id, &nk); err != nil {
			return resolved{}, false, err
		}
		if nk != key && !strings.HasSuffix(strings.ToLower(r.id), "."+key) && !strings.HasSuffix(strings.ToLower(r.id), "/"+key) {
			continue
		}
		all = append(all, r)
	}
	if err := rows.Err(); err != nil {
		return resolved{}, false, err
	}
	switch len(all) {
	case 0:
		return resolved{}, false, nil
	case 1:
		return all[0], true, nil
	}
	ids := make([]string, len(all))
	for i, r := range all {
		ids[i] = r.id
	}
	return resolved{}, false, fmt.Errorf("%w: %q names %d assets (%s); give the full id", ErrUnknownAsset, name, len(all), strings.Join(ids, ", "))
}

// unknownAssetError lists the closest known names. On a large graph it
// ranks only names sharing the first letters, so the message stays cheap.
func unknownAssetError(ctx context.Context, q store.Querier, ref string) error {
	var total int
	if err := q.QueryRowContext(ctx, "SELECT COUNT(*) FROM lineage_assets").Scan(&total); err != nil {
		return err
	}
	if total == 0 {
		return fmt.Errorf("%w %q: the lineage graph is empty; import a dbt manifest, OpenLineage events or record a lineage note first", ErrUnknownAsset, ref)
	}
	name := strings.ToLower(shortName(ref))
	var rows *sql.Rows
	var err error
	if total <= 20000 {
		rows, err = q.QueryContext(ctx, "SELECT id FROM lineage_assets")
	} else {
		prefix := name
		if len(prefix) > 3 {
			prefix = prefix[:3]
		}
		rows, err = q.QueryContext(ctx, `SELECT id FROM lineage_assets WHERE name_key LIKE ? ESCAPE '\' LIMIT 5000`, likeEscape(prefix)+"%")
	}
	if err != nil {
		return err
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return err
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	// Rank by short name too, so "usage_hourly" finds snowflake://usage.usage_hourly.
	byShort := map[string]string{}
	var cands []string
	for _, id := range ids {
		cands = append(cands, id)
		s := shortName(id)
		if _, dup := byShort[s]; !dup && s != id {
			byShort[s] = id
			cands = append(cands, s)
		}
	}
	var out []string
	for _, c := range suggest.Closest(ref, cands, 10) {
		if full, ok := byShort[c]; ok {
			c = full
		}
		if !slices.Contains(out, c) {
			out = append(out, c)
		}
		if len(out) == 5 {
			break
		}
	}
	return fmt.Errorf("%w %q; closest: %s", ErrUnknownAsset, ref, strings.Join(out, ", "))
}

// likeEscape escapes LIKE wildcards so user text matches literally.
func likeEscape(s string) string {
	return strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`).Replace(s)
}

// loadIDs reads asset ids by seq.
func loadIDs(ctx context.Context, q store.Querier, seqs []int64) (map[int64]string, error) {
	out := make(map[int64]string, len(seqs))
	for start := 0; start < len(seqs); start += 500 {
		chunk := seqs[start:min(start+500, len(seqs))]
		args := make([]any, len(chunk))
		for i, s := range chunk {
			args[i] = s
		}
		rows, err := q.QueryContext(ctx, "SELECT seq, id FROM lineage_assets WHERE seq IN ("+bindVars(len(chunk))+")", args...)
		if err != nil {
			return nil, err
		}
		for rows.Next() {
			var s int64
			var id string
			if err := rows.Scan(&s, &id); err != nil {
				rows.Close()
				return nil, err
			}
			out[s] = id
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// loadRows reads assets by seq, in chunks the engines' parameter limits allow.
func loadRows(ctx context.Context, q store.Querier, seqs []int64) (map[int64]*assetRow, error) {
	return loadRowsWith(ctx, q, seqs, assetCols, scanAsset)
}

const listCols = `seq, id, title, kind, platform, owner, owner_email, domain, tags, cron, timezone`

// loadListRows reads what a list of assets shows (no columns, SQL or
// descriptions), which is most of the cost of a large answer.
func loadListRows(ctx context.Context, q store.Querier, seqs []int64) (map[int64]*assetRow, error) {
	return loadRowsWith(ctx, q, seqs, listCols, func(sc interface{ Scan(...any) error }) (*assetRow, error) {
		var r assetRow
		var kind, tags string
		if err := sc.Scan(&r.Seq, &r.ID, &r.Title, &kind, &r.Platform, &r.Owner, &r.OwnerEmail, &r.Domain, &tags, &r.Cron, &r.Timezone); err != nil {
			return nil, err
		}
		r.Kind = Kind(kind)
		if err := json.Unmarshal([]byte(tags), &r.Tags); err != nil {
			return nil, fmt.Errorf("asset %s: stored tags: %w", r.ID, err)
		}
		return &r, nil
	})
}

func loadRowsWith(ctx context.Context, q store.Querier, seqs []int64, cols string, scan func(interface{ Scan(...any) error }) (*assetRow, error)) (map[int64]*assetRow, error) {
	out := make(map[int64]*assetRow, len(seqs))
	for start := 0; start < len(seqs); start += 500 {
		chunk := seqs[start:min(start+500, len(seqs))]
		args := make([]any, len(chunk))
		for i, s := range chunk {
			args[i] = s
		}
		rows, err := q.QueryContext(ctx, "SELECT "+cols+" FROM lineage_assets WHERE seq IN ("+bindVars(len(chunk))+")", args...)
		if err != nil {
			return nil, err
		}
		for rows.Next() {
			r, err := scan(rows)
			if err != nil {
				rows.Close()
				return nil, err
			}
			out[r.Seq] = r
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}
