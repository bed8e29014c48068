package lineage

import (
	"context"
	"fmt"
	"github.com/dataworkers/dw/internal/lineage/graphindex"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/dataworkers/dw/internal/bound"
	"github.com/dataworkers/dw/internal/page"
	"github.com/dataworkers/dw/internal/store"
)

// AssetSummary is the short form of an asset used in lists.
type AssetSummary struct {
	ID       string   `json:"id" jsonschema:"asset id"`
	Kind     Kind     `json:"kind" jsonschema:"asset kind"`
	Platform string   `json:"platform" jsonschema:"platform"`
	Title    string   `json:"title,omitempty" jsonschema:"display name"`
	Owner    string   `json:"owner,omitempty" jsonschema:"owner"`
	Domain   string   `json:"domain,omitempty" jsonschema:"domain"`
	Tags     []string `json:"tags,omitempty" jsonschema:"tags"`
}

func (r *assetRow) summary() AssetSummary {
	return AssetSummary{ID: r.ID, Kind: r.Kind, Platform: r.Platform, Title: r.Title, Owner: r.Owner, Domain: r.Domain, Tags: r.Tags}
}

// LineageParams names the asset whose neighbours are wanted.
type LineageParams struct {
	Asset string `json:"asset" jsonschema:"asset id or unambiguous bare name"`
	page.Params
}

// Neighbor is an adjacent asset and the edge to or from it.
type Neighbor struct {
	Asset AssetSummary `json:"asset" jsonschema:"the neighbouring asset"`
	Edge  Edge         `json:"edge" jsonschema:"the edge between them, with column lineage when known"`
}

// LineageResult is an asset with its direct upstream and downstream.
type LineageResult struct {
	Asset      Asset      `json:"asset" jsonschema:"the asset, with its aliases and next run; its first 100 columns and 4,000 characters of SQL (columns_total, sql_chars say when there is more)"`
	Upstream   []Neighbor `json:"upstream" jsonschema:"this page of the assets feeding this one, by id"`
	Downstream []Neighbor `json:"downstream" jsonschema:"this page of the assets this one feeds, by id"`
	// One cursor pages both lists at once: page n holds the n-th slice of
	// each, so a list that ends early simply comes back empty.
	UpstreamTotal   int `json:"upstream_total" jsonschema:"assets feeding this one in all"`
	DownstreamTotal int `json:"downstream_total" jsonschema:"assets this one feeds in all"`
	// What the answer leaves out of the asset itself (bound).
	ColumnsTotal int    `json:"columns_total,omitempty" jsonschema:"the asset's columns in all, when asset.columns lists only the first 100"`
	SQLChars     int    `json:"sql_chars,omitempty" jsonschema:"length of the asset's SQL, when asset.sql holds only its first 4,000 characters"`
	NextCursor   string `json:"next_cursor,omitempty" jsonschema:"pass as cursor for the next page of upstream and downstream neighbours; absent on the last page"`
	Summary      string `json:"summary" jsonschema:"short text for a person"`
}

// GetLineage returns an asset and its direct neighbours, read fresh from
// the store.
func (g *Graph) GetLineage(ctx context.Context, p LineageParams) (*LineageResult, error) {
	r, err := resolveAsset(ctx, g.db, p.Asset)
	if err != nil {
		return nil, err
	}
	row, err := loadAsset(ctx, g.db, r.seq)
	if err != nil {
		return nil, err
	}
	pg, err := p.ResolveKeyset(lineageKey, "get_lineage", row.ID)
	if err != nil {
		return nil, err
	}
	res := &LineageResult{Asset: row.asset()}
	if err := g.fillAsset(ctx, r.seq, &res.Asset); err != nil {
		return nil, err
	}
	// Each list goes on after its own last neighbour; one that had none
	// yet starts from the beginning.
	upAfter, downAfter := neighborKey{}, neighborKey{}
	if k := pg.After; k != nil {
		upAfter, downAfter = neighborKey{k.Text(0), k.Int(1)}, neighborKey{k.Text(2), k.Int(3)}
	}
	var upKeys, downKeys []neighborKey
	var upMore, downMore bool
	if res.Upstream, res.UpstreamTotal, upKeys, upMore, err = neighbors(ctx, g.db, r.seq, true, pg.Limit, upAfter); err != nil {
		return nil, err
	}
	if res.Downstream, res.DownstreamTotal, downKeys, downMore, err = neighbors(ctx, g.db, r.seq, false, pg.Limit, downAfter); err != nil {
		return nil, err
	}
	// The answer's budget may end both lists early; each then goes on
	// after its last neighbour listed.
	res.bound(pg.Limit)
	upLast, upCut := lastListed(upKeys, len(res.Upstream), upAfter)
	downLast, downCut := lastListed(downKeys, len(res.Downstream), downAfter)
	res.NextCursor = pg.NextAfter(page.Key{upLast.prefix, upLast.seq, downLast.prefix, downLast.seq}, upMore || downMore || upCut || downCut)
	res.Summary = fmt.Sprintf("%s (%s on %s): %d upstream, %d downstream.", row.ID, row.Kind, row.Platform, res.UpstreamTotal, res.DownstreamTotal)
	if res.NextCursor != "" {
		res.Summary += fmt.Sprintf(" Listed %d and %d; next_cursor pages on.", len(res.Upstream), len(res.Downstream))
	}
	if row.Owner != "" {
		res.Summary += " Owner: " + row.Owner + "."
	}
	if !res.Asset.NextRun.IsZero() {
		res.Summary += " Next run: " + res.Asset.NextRun.Format("2006-01-02 15:04 MST") + "."
	}
	return res, nil
}

// What get_lineage lists: an asset may have thousands of columns and a
// long SQL text, and each of a page's edges thousands of column mappings.
const (
	listedColumns, columnsBudget = 100, 8000
	sqlChars, descriptionChars   = 4000, 4000
	listedAliases                = 50
	edgeMappings, mappingsBudget = 10, 600
	neighborsBudget              = 25_000 // per direction
)

// bound cuts the asset's columns, SQL and aliases and each edge's column
// mappings, and ends a page of neighbours early when it is long: both
// lists are cut to the same length, since one cursor pages both. It
// returns how many neighbours the page holds (of each list, at most).
func (r *LineageResult) bound(limit int) int {
	a := &r.Asset
	if n := len(a.Columns); n > 0 {
		if head := bound.Head(a.Columns, listedColumns, columnsBudget); len(head) < n {
			a.Columns, r.ColumnsTotal = head, n
		}
	}
	if len(a.SQL) > sqlChars {
		r.SQLChars, a.SQL = len(a.SQL), clipRunes(a.SQL, sqlChars)
	}
	a.Description = clipRunes(a.Description, descriptionChars)
	a.Aliases = a.Aliases[:min(len(a.Aliases), listedAliases)]
	for _, list := range [][]Neighbor{r.Upstream, r.Downstream} {
		for i := range list {
			e := &list[i].Edge
			if n := len(e.Columns); n > 0 {
				if head := bound.Head(e.Columns, edgeMappings, mappingsBudget); len(head) < n {
					e.Columns, e.ColumnsTotal = head, n
				}
			}
		}
	}
	n := max(len(r.Upstream), len(r.Downstream))
	for _, list := range [][]Neighbor{r.Upstream, r.Downstream} {
		if k := len(bound.Head(list, limit, neighborsBudget)); k < len(list) {
			n = min(n, k)
		}
	}
	r.Upstream, r.Downstream = r.Upstream[:min(n, len(r.Upstream))], r.Downstream[:min(n, len(r.Downstream))]
	return n
}

// lastListed is where a list's next page starts: after its last neighbour
// listed (after, when none was), and whether the page left some out.
func lastListed(keys []neighborKey, listed int, after neighborKey) (last neighborKey, cut bool) {
	if listed == 0 {
		return after, len(keys) > 0
	}
	return keys[listed-1], listed < len(keys)
}

// clipRunes cuts s to at most n bytes on a rune boundary, marking the cut.
func clipRunes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// fillAsset adds the aliases and the next run to an asset read from a row.
func (g *Graph) fillAsset(ctx context.Context, seq int64, a *Asset) error {
	rows, err := g.db.QueryContext(ctx, "SELECT alias FROM lineage_aliases WHERE asset_seq = ? AND alias <> ? ORDER BY alias", seq, a.ID)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return err
		}
		a.Aliases = append(a.Aliases, s)
	}
	if a.Schedule != nil {
		if next, err := a.Schedule.NextRun(g.clock.Now()); err == nil {
			a.NextRun = next
		}
	}
	return rows.Err()
}

// Neighbours are listed by id. A key's text is bounded and ids are not,
// so the order is by the first neighborIDPrefix characters of the id,
// then by the asset's number (ids longer than that which share their
// first 80 characters follow each other in the order they were added).
const neighborIDPrefix = 80

// neighborKey is a position in one neighbour list: the neighbour's id
// prefix and number. The zero key comes before every neighbour.
type neighborKey struct {
	prefix string
	seq    int64
}

// lineageKey is get_lineage's cursor: the upstream list's position, then
// the downstream list's (each a neighborKey).
var lineageKey = page.Keyset{page.Text, page.Int, page.Text, page.Int}

// neighbors reads one page of at most limit of an asset's direct upstream
// (or downstream) neighbours after the key after, how many there are in
// all, the key of the last one read (after when none) and whether more
// follow. The page is cut in SQL: an asset with 20,000 neighbours costs
// one page of reads, not 20,000; and it starts after a key, not at a
// count, so an edge added or removed between pages moves no other.
//
// keys[i] is the cursor position of the i-th neighbour, so a page the
// answer's budget ends early goes on from the last one listed.
func neighbors(ctx context.Context, q store.Querier, seq int64, up bool, limit int, after neighborKey) (out []Neighbor, total int, keys []neighborKey, more bool, err error) {
	near, far := "to_seq", "from_seq"
	if !up {
		near, far = far, near
	}
	if err := q.QueryRowContext(ctx, "SELECT COUNT(*) FROM lineage_edges WHERE "+near+" = ?", seq).Scan(&total); err != nil {
		return nil, 0, nil, false, err
	}
	prefix := fmt.Sprintf("SUBSTR(a.id, 1, %d)", neighborIDPrefix)
	rows, err := q.QueryContext(ctx, "SELECT e.from_seq, e.to_seq, e.kind, e.sources, e.last_seen_ms, "+prefix+
		" FROM lineage_edges e JOIN lineage_assets a ON a.seq = e."+far+
		" WHERE e."+near+" = ? AND ("+prefix+", a.seq) > (?, ?) ORDER BY "+prefix+", a.seq LIMIT ?",
		seq, after.prefix, after.seq, limit+1)
	if err != nil {
		return nil, 0, nil, false, err
	}
	type edgeRow struct {
		from, to int64
		kind     string
		sources  string
		last     int64
		prefix   string
	}
	var edges []edgeRow
	for rows.Next() {
		var e edgeRow
		if err := rows.Scan(&e.from, &e.to, &e.kind, &e.sources, &e.last, &e.prefix); err != nil {
			rows.Close()
			return nil, 0, nil, false, err
		}
		edges = append(edges, e)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, 0, nil, false, err
	}
	more = len(edges) > limit
	if more {
		edges = edges[:limit]
	}
	seqs := []int64{seq}
	for _, e := range edges {
		if up {
			seqs = append(seqs, e.from)
		} else {
			seqs = append(seqs, e.to)
		}
	}
	assets, err := loadListRows(ctx, q, seqs)
	if err != nil {
		return nil, 0, nil, false, err
	}
	out = make([]Neighbor, 0, len(edges))
	for _, e := range edges {
		other := e.to
		if up {
			other = e.from
		}
		fa, ta, oa := assets[e.from], assets[e.to], assets[other]
		if fa == nil || ta == nil || oa == nil {
			continue
		}
		cols, err := edgeColumns(ctx, q, e.from, e.to)
		if err != nil {
			return nil, 0, nil, false, err
		}
		edge := Edge{From: fa.ID, To: ta.ID, Kind: EdgeKind(e.kind), Columns: cols, LastSeen: store.FromMillis(e.last)}
		for _, s := range strings.Split(e.sources, ",") {
			if s != "" {
				edge.Sources = append(edge.Sources, Source(s))
			}
		}
		out = append(out, Neighbor{Asset: oa.summary(), Edge: edge})
		keys = append(keys, neighborKey{e.prefix, other})
	}
	return out, total, keys, more, nil
}

func edgeColumns(ctx context.Context, q store.Querier, from, to int64) ([]ColumnMapping, error) {
	rows, err := q.QueryContext(ctx, "SELECT DISTINCT from_col, to_col FROM lineage_edge_columns WHERE from_seq = ? AND to_seq = ? ORDER BY from_col, to_col", from, to)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []ColumnMapping
	for rows.Next() {
		var m ColumnMapping
		if err := rows.Scan(&m.From, &m.To); err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, rows.Err()
}

// SearchParams finds assets by words, kinds and tags.
type SearchParams struct {
	Query  string   `json:"query,omitempty" jsonschema:"words to find in names, titles, descriptions, columns, tags, owners and domains; every word must match somewhere"`
	Kinds  []string `json:"kinds,omitempty" jsonschema:"only these kinds, e.g. dbt_model, dashboard, orchestrator_job"`
	Tags   []string `json:"tags,omitempty" jsonschema:"only assets carrying all these tags, e.g. outbound, money"`
	Limit  int      `json:"limit,omitempty" jsonschema:"results per page: 1 to 500 (default 50)"`
	Cursor string   `json:"cursor,omitempty" jsonschema:"next_cursor from the previous answer, for the next page; omit for the first page"`
}

// SearchHit is an asset found by a search.
type SearchHit struct {
	AssetSummary
	Score   int      `json:"score" jsonschema:"relevance, higher is better"`
	Matched []string `json:"matched,omitempty" jsonschema:"where the words matched (the first 10): name, title, column:<name>, tag:<tag>, description, owner, domain"`
}

// SearchResult lists the best matches.
type SearchResult struct {
	Assets     []SearchHit `json:"assets" jsonschema:"this page of matching assets, best first"`
	Total      int         `json:"total" jsonschema:"assets that matched (of those scanned), across all pages"`
	NextCursor string      `json:"next_cursor,omitempty" jsonschema:"pass as cursor for the next page; absent on the last page"`
	Truncated  bool        `json:"truncated" jsonschema:"true when more assets matched than were scanned for ranking: narrow the query"`
}

// Bounds on a search: the rows ranked in memory, the words of a query
// (each word is eight bound LIKE patterns), and where-it-matched notes per
// hit.
const (
	searchScanCap   = 5000
	maxSearchQuery  = 256
	maxSearchTerms  = 16
	MaxSearchFilter = 50
	maxMatched      = 10
)

// SearchAssets ranks assets over their names, titles, descriptions,
// columns and tags. Filtering happens in SQL with bound LIKE patterns;
// ranking happens here.
func (g *Graph) SearchAssets(ctx context.Context, p SearchParams) (*SearchResult, error) {
	if len(p.Query) > maxSearchQuery {
		return nil, fmt.Errorf("query is %d characters; at most %d: give a few words", len(p.Query), maxSearchQuery)
	}
	if strings.ContainsRune(p.Query, 0) {
		return nil, fmt.Errorf("query contains a NUL character; give words to search for")
	}
	terms := strings.Fields(strings.ToLower(p.Query))
	if len(terms) > maxSearchTerms {
		return nil, fmt.Errorf("query has %d words; at most %d", len(terms), maxSearchTerms)
	}
	if len(p.Kinds) > MaxSearchFilter || len(p.Tags) > MaxSearchFilter {
		return nil, fmt.Errorf("kinds and tags take at most %d values each", MaxSearchFilter)
	}
	if len(terms) == 0 && len(p.Kinds) == 0 && len(p.Tags) == 0 {
		return nil, fmt.Errorf("give a query, kinds or tags to search for")
	}
	pg, err := page.Params{Limit: p.Limit, Cursor: p.Cursor}.ResolveKeysetWith(page.DefaultLimit, page.MaxLimit, searchKey, "search_assets",
		strings.Join(terms, " "), strings.Join(p.Kinds, ","), strings.Join(p.Tags, ","))
	if err != nil {
		return nil, err
	}
	var where []string
	var args []any
	if len(p.Kinds) > 0 {
		var ks []string
		for _, k := range p.Kinds {
			kind, err := ParseKind(k)
			if err != nil {
				return nil, err
			}
			ks = append(ks, "?")
			args = append(args, string(kind))
		}
		where = append(where, "kind IN ("+strings.Join(ks, ",")+")")
	}
	tags := normalizeTags(p.Tags)
	for _, t := range tags {
		where = append(where, `tags LIKE ? ESCAPE '\'`)
		args = append(args, `%"`+likeEscape(t)+`"%`)
	}
	for _, t := range terms {
		pat := "%" + likeEscape(t) + "%"
		where = append(where, `(name_key LIKE ? ESCAPE '\' OR LOWER(id) LIKE ? ESCAPE '\' OR LOWER(title) LIKE ? ESCAPE '\'
			OR LOWER(description) LIKE ? ESCAPE '\' OR LOWER(columns_json) LIKE ? ESCAPE '\' OR tags LIKE ? ESCAPE '\'
			OR LOWER(owner) LIKE ? ESCAPE '\' OR LOWER(domain) LIKE ? ESCAPE '\')`)
		for range 8 {
			args = append(args, pat)
		}
	}
	q := "SELECT " + assetCols + " FROM lineage_assets"
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	q += fmt.Sprintf(" LIMIT %d", searchScanCap+1)
	rows, err := g.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("search assets: %w", err)
	}
	defer rows.Close()
	res := &SearchResult{Assets: []SearchHit{}}
	type ranked struct {
		SearchHit
		key neighborKey
	}
	var hits []ranked
	for rows.Next() {
		r, err := scanAsset(rows)
		if err != nil {
			return nil, err
		}
		if res.Total == searchScanCap {
			res.Truncated = true
			break
		}
		score, matched := scoreAsset(r, terms)
		if len(terms) > 0 && score == 0 {
			continue
		}
		res.Total++
		hits = append(hits, ranked{SearchHit{AssetSummary: r.summary(), Score: score, Matched: matched[:min(len(matched), maxMatched)]},
			neighborKey{runePrefix(r.ID, neighborIDPrefix), r.Seq}})
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	// Best first, then by id as neighbours are (a bounded prefix and the
	// asset's number). The ranking is made afresh on every call, so a
	// page starts after the previous page's last hit, not at a count an
	// asset added meanwhile would shift.
	before := func(a ranked, score int64, k neighborKey) bool {
		if int64(a.Score) != score {
			return int64(a.Score) > score
		}
		if a.key.prefix != k.prefix {
			return a.key.prefix < k.prefix
		}
		return a.key.seq < k.seq
	}
	sort.Slice(hits, func(i, j int) bool { return before(hits[i], int64(hits[j].Score), hits[j].key) })
	shown, info := page.SliceAfter(pg, hits,
		func(h ranked) page.Key { return page.Key{int64(h.Score), h.key.prefix, h.key.seq} },
		func(h ranked, k page.Key) bool {
			at := neighborKey{k.Text(1), k.Int(2)}
			return !before(h, k.Int(0), at) && !(int64(h.Score) == k.Int(0) && h.key == at)
		})
	for _, h := range shown {
		res.Assets = append(res.Assets, h.SearchHit)
	}
	res.NextCursor = info.NextCursor
	return res, nil
}

// searchKey is a position in search_assets' ranking: the score, then the
// asset's id prefix and number.
var searchKey = page.Keyset{page.Int, page.Text, page.Int}

// runePrefix is s cut after n characters.
func runePrefix(s string, n int) string {
	for i := range s {
		if n == 0 {
			return s[:i]
		}
		n--
	}
	return s
}

// scoreAsset weighs where each word matched: a name beats a title beats a
// column or tag beats prose. A word that matches nowhere zeroes the score.
func scoreAsset(r *assetRow, terms []string) (int, []string) {
	total := 0
	var matched []string
	add := func(m string) {
		for _, x := range matched {
			if x == m {
				return
			}
		}
		matched = append(matched, m)
	}
	name := strings.ToLower(shortName(r.ID))
	for _, t := range terms {
		s := 0
		switch {
		case name == t:
			s += 100
			add("name")
		case strings.HasPrefix(name, t):
			s += 60
			add("name")
		case strings.Contains(name, t):
			s += 40
			add("name")
		case strings.Contains(strings.ToLower(r.ID), t):
			s += 25
			add("id")
		}
		if title := strings.ToLower(r.Title); title != "" && strings.Contains(title, t) {
			s += 30
			add("title")
		}
		for _, c := range r.Columns {
			lc := strings.ToLower(c.Name)
			if lc == t {
				s += 20
				add("column:" + c.Name)
			} else if strings.Contains(lc, t) {
				s += 10
				add("column:" + c.Name)
			}
		}
		for _, tag := range r.Tags {
			if tag == t {
				s += 20
				add("tag:" + tag)
			} else if strings.Contains(tag, t) {
				s += 8
				add("tag:" + tag)
			}
		}
		if strings.Contains(strings.ToLower(r.Description), t) {
			s += 5
			add("description")
		}
		if strings.Contains(strings.ToLower(r.Owner), t) {
			s += 8
			add("owner")
		}
		if strings.Contains(strings.ToLower(r.Domain), t) {
			s += 8
			add("domain")
		}
		if s == 0 {
			return 0, nil
		}
		total += s
	}
	if len(terms) == 0 {
		total = 1
	}
	return total, matched
}

// OwnersParams names the assets whose owners are wanted.
type OwnersParams struct {
	Assets []string `json:"assets" jsonschema:"asset ids or unambiguous bare names"`
}

// AssetOwner is who owns one asset. For an asset with no recorded owner the
// nearest owned asset upstream is named, since its owner is usually the one
// who can answer for the data.
type AssetOwner struct {
	Asset              string `json:"asset" jsonschema:"asset id"`
	Owner              string `json:"owner,omitempty" jsonschema:"recorded owner"`
	OwnerEmail         string `json:"owner_email,omitempty" jsonschema:"recorded owner's email"`
	Domain             string `json:"domain,omitempty" jsonschema:"domain"`
	UpstreamOwner      string `json:"upstream_owner,omitempty" jsonschema:"owner of the nearest owned asset upstream, when the asset has none"`
	UpstreamOwnerAsset string `json:"upstream_owner_asset,omitempty" jsonschema:"the asset that owner owns"`
}

// OwnerGroup is one owner and the assets they own among those asked about.
type OwnerGroup struct {
	Owner  string   `json:"owner" jsonschema:"owner"`
	Email  string   `json:"email,omitempty" jsonschema:"owner's email"`
	Assets []string `json:"assets" jsonschema:"asset ids"`
}

// OwnersResult answers who owns a set of assets.
type OwnersResult struct {
	Assets  []AssetOwner `json:"assets" jsonschema:"one entry per asset asked about"`
	ByOwner []OwnerGroup `json:"by_owner" jsonschema:"the same, grouped by recorded owner"`
	Unowned []string     `json:"unowned,omitempty" jsonschema:"assets with no recorded owner"`
}

// Owners reports who owns each asset, grouped by owner.
func (g *Graph) Owners(ctx context.Context, p OwnersParams) (*OwnersResult, error) {
	if len(p.Assets) == 0 {
		return nil, fmt.Errorf("assets: give at least one asset id or name")
	}
	var seqs []int64
	for _, ref := range p.Assets {
		r, err := resolveAsset(ctx, g.db, ref)
		if err != nil {
			return nil, err
		}
		seqs = append(seqs, r.seq)
	}
	rows, err := loadRows(ctx, g.db, seqs)
	if err != nil {
		return nil, err
	}
	res := &OwnersResult{Assets: []AssetOwner{}, ByOwner: []OwnerGroup{}}
	groups := map[string]*OwnerGroup{}
	var idx *graphindex.Index
	for _, s := range seqs {
		r := rows[s]
		if r == nil {
			continue
		}
		ao := AssetOwner{Asset: r.ID, Owner: r.Owner, OwnerEmail: r.OwnerEmail, Domain: r.Domain}
		if r.Owner == "" {
			res.Unowned = append(res.Unowned, r.ID)
			if idx == nil {
				if idx, err = g.Index(ctx); err != nil {
					return nil, err
				}
			}
			if n, ok := idx.Node(s); ok {
				w := idx.BFS(ctx, []int32{n}, true, graphindex.Limits{MaxDepth: 10, MaxNodes: 10000, Deadline: time.Now().Add(time.Second)})
				for p := w.Starts; p < len(w.Order); p++ {
					if o := idx.MetaOf(w.Order[p]).Owner; o >= 0 {
						ao.UpstreamOwner = idx.Strs[o]
						if up, err := loadRows(ctx, g.db, []int64{idx.Seq(w.Order[p])}); err == nil {
							for _, u := range up {
								ao.UpstreamOwnerAsset = u.ID
							}
						}
						break
					}
				}
				idx.Release(w) // the next unowned asset's walk reuses its arrays
			}
		} else {
			grp := groups[r.Owner]
			if grp == nil {
				grp = &OwnerGroup{Owner: r.Owner}
				groups[r.Owner] = grp
			}
			if grp.Email == "" {
				grp.Email = r.OwnerEmail
			}
			grp.Assets = append(grp.Assets, r.ID)
		}
		res.Assets = append(res.Assets, ao)
	}
	for _, grp := range groups {
		res.ByOwner = append(res.ByOwner, *grp)
	}
	sort.Slice(res.ByOwner, func(i, j int) bool { return res.ByOwner[i].Owner < res.ByOwner[j].Owner })
	return res, nil
}
