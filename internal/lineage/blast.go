package lineage

import (
	"context"
	"fmt"
	"github.com/dataworkers/dw/internal/lineage/graphindex"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/dataworkers/dw/internal/page"
	"github.com/dataworkers/dw/internal/suggest"
)

// Traversal defaults and ceilings. The ceilings keep one question from
// holding a process for minutes; an answer cut by a budget says so.
const (
	defaultMaxDepth  = 20
	MaxWalkDepth     = 10000
	defaultMaxAssets = 10000
	MaxWalkAssets    = 10_000_000
	defaultLimit     = page.DefaultLimit
	maxLimit         = 10000 // for callers inside dw; the tool's schema caps limit at page.MaxLimit
	maxNames         = 25
	maxUnknownEdges  = 50
	defaultTimeout   = 5 * time.Second
	maxTimeout       = 60 * time.Second
)

// BlastParams asks what a change to an asset (or some of its columns) can
// reach downstream.
type BlastParams struct {
	Asset     string   `json:"asset" jsonschema:"asset id (e.g. schema://api-usage-value) or a bare name (e.g. usage_hourly) when unambiguous"`
	Columns   []string `json:"columns,omitempty" jsonschema:"only follow what reads these columns of the asset, where column lineage is known; edges without column lineage are followed in full and listed"`
	MaxDepth  int      `json:"max_depth,omitempty" jsonschema:"hops to follow (default 20)"`
	MaxAssets int      `json:"max_assets,omitempty" jsonschema:"stop after reaching this many assets (default 10000)"`
	Limit     int      `json:"limit,omitempty" jsonschema:"assets listed per page, most critical first: 1 to 500 (default 50); counts always cover everything reached"`
	Cursor    string   `json:"cursor,omitempty" jsonschema:"next_cursor from the previous answer, for the next page of assets; omit for the first page"`
	Timeout   string   `json:"timeout,omitempty" jsonschema:"time budget as a duration, e.g. 2s (default 5s, at most 60s)"`
}

// ImpactedAsset is one asset a change can reach.
type ImpactedAsset struct {
	ID              string    `json:"id" jsonschema:"asset id"`
	Kind            Kind      `json:"kind" jsonschema:"asset kind"`
	Platform        string    `json:"platform" jsonschema:"platform the asset lives in"`
	Title           string    `json:"title,omitempty" jsonschema:"display name"`
	Owner           string    `json:"owner,omitempty" jsonschema:"owner"`
	OwnerEmail      string    `json:"owner_email,omitempty" jsonschema:"owner's email"`
	Domain          string    `json:"domain,omitempty" jsonschema:"business domain"`
	Tags            []string  `json:"tags,omitempty" jsonschema:"tags"`
	Critical        []string  `json:"critical,omitempty" jsonschema:"which of outbound, money, regulator, customer-facing apply"`
	Distance        int       `json:"distance" jsonschema:"hops from the changed asset"`
	Path            []string  `json:"path" jsonschema:"asset ids from the changed asset to this one"`
	Schedule        *Schedule `json:"schedule,omitempty" jsonschema:"when the job runs"`
	NextRun         time.Time `json:"next_run,omitzero" jsonschema:"next scheduled run (UTC)"`
	AffectedColumns []string  `json:"affected_columns,omitempty" jsonschema:"columns the change reaches, when column lineage narrowed it; empty means the whole asset"`
}

// EdgeRef names an edge.
type EdgeRef struct {
	From string `json:"from" jsonschema:"upstream asset id"`
	To   string `json:"to" jsonschema:"downstream asset id"`
}

// NameCount is a name with how many assets carry it.
type NameCount struct {
	Name   string `json:"name" jsonschema:"owner or domain"`
	Assets int    `json:"assets" jsonschema:"assets reached that carry it"`
}

// BlastResult is everything downstream of a change.
type BlastResult struct {
	Asset                string          `json:"asset" jsonschema:"the changed asset's id"`
	Columns              []string        `json:"columns,omitempty" jsonschema:"the changed columns, when given"`
	Total                int             `json:"total" jsonschema:"assets reached (not counting the changed one)"`
	Critical             int             `json:"critical" jsonschema:"assets reached tagged outbound, money, regulator or customer-facing"`
	Scheduled            int             `json:"scheduled" jsonschema:"scheduled jobs reached"`
	CountsByKind         map[string]int  `json:"counts_by_kind" jsonschema:"assets reached per kind"`
	Owners               []NameCount     `json:"owners,omitempty" jsonschema:"owners of the assets reached, most assets first (at most 25; owner_count says how many)"`
	OwnerCount           int             `json:"owner_count" jsonschema:"distinct owners of the assets reached"`
	Domains              []NameCount     `json:"domains,omitempty" jsonschema:"domains of the assets reached, most assets first (at most 25; domain_count says how many)"`
	DomainCount          int             `json:"domain_count" jsonschema:"distinct domains of the assets reached"`
	Unowned              int             `json:"unowned" jsonschema:"assets reached with no recorded owner"`
	Assets               []ImpactedAsset `json:"assets" jsonschema:"this page of the assets reached, critical and scheduled first (soonest next run first), then by distance"`
	NextCursor           string          `json:"next_cursor,omitempty" jsonschema:"pass as cursor for the next page of assets; absent on the last page"`
	Partial              bool            `json:"partial" jsonschema:"true when a budget stopped the traversal before it finished"`
	Budget               string          `json:"budget,omitempty" jsonschema:"the budget that stopped it: depth, size or time"`
	NoColumnLineage      []EdgeRef       `json:"no_column_lineage,omitempty" jsonschema:"edges followed in full because they carry no column lineage, so the answer is conservative past them (at most 50)"`
	NoColumnLineageTotal int             `json:"no_column_lineage_total,omitempty" jsonschema:"edges without column lineage in all"`
	GraphVersion         int64           `json:"graph_version" jsonschema:"graph version the answer was computed on"`
	IndexLoadMS          float64         `json:"index_load_ms,omitempty" jsonschema:"milliseconds this call spent loading the graph's traversal index (the first call after a start or a graph change); absent when the index was held"`
	Summary              string          `json:"summary" jsonschema:"one-paragraph summary for a person"`
}

func traversalLimits(maxDepth, maxAssets int, timeout string, defDepth int) (graphindex.Limits, error) {
	lim := graphindex.Limits{MaxDepth: defDepth, MaxNodes: defaultMaxAssets}
	switch {
	case maxDepth < 0 || maxDepth > MaxWalkDepth:
		return lim, fmt.Errorf("max_depth %d is out of range; use 1 to %d (0 means the default %d)", maxDepth, MaxWalkDepth, defDepth)
	case maxDepth > 0:
		lim.MaxDepth = maxDepth
	}
	switch {
	case maxAssets < 0 || maxAssets > MaxWalkAssets:
		return lim, fmt.Errorf("max_assets %d is out of range; use 1 to %d (0 means the default %d)", maxAssets, MaxWalkAssets, defaultMaxAssets)
	case maxAssets > 0:
		lim.MaxNodes = maxAssets
	}
	d := defaultTimeout
	if strings.TrimSpace(timeout) != "" {
		var err error
		d, err = time.ParseDuration(strings.TrimSpace(timeout))
		if err != nil || d <= 0 || d > maxTimeout {
			return lim, fmt.Errorf("timeout %q must be a positive duration up to %s, e.g. 2s or 500ms", timeout, maxTimeout)
		}
	}
	// The time budget is elapsed wall time, not the injected clock: it
	// bounds work done, it is not a rule about when things happen.
	lim.Deadline = time.Now().Add(d)
	return lim, nil
}

// start resolves a traversal's starting asset to its node in a current
// index, and says how long loading that index took when this call did.
// The reference is resolved after the version is read, through the
// index's table, so a warm call does not resolve it in the store again.
func (g *Graph) start(ctx context.Context, ref string) (*graphindex.Index, int32, resolved, time.Duration, error) {
	idx, took, err := g.index(ctx)
	if err != nil {
		return nil, 0, resolved{}, took, err
	}
	r, err := indexResolve(ctx, idx, g.db, ref)
	if err != nil {
		return nil, 0, r, took, err
	}
	n, ok := idx.Node(r.seq)
	if !ok {
		return nil, 0, r, took, fmt.Errorf("%w %q: it was added or removed while the question was asked; retry", ErrUnknownAsset, ref)
	}
	return idx, n, r, took, nil
}

func criticalTags(tags []string) []string {
	var out []string
	for _, t := range tags {
		if tagFlags([]string{t}) != 0 {
			out = append(out, t)
		}
	}
	return out
}

// BlastRadius lists everything downstream of an asset: how far, by which
// path, who owns it, with outbound, money, regulator and customer-facing
// assets and scheduled jobs (with their next run) first, and counts by
// kind. With columns, only what reads those columns is followed where
// column lineage is known; edges without it are followed in full and
// named in the answer. Depth, size and time budgets bound the walk, and an
// answer they cut short says which one; cycles are visited once.
func (g *Graph) BlastRadius(ctx context.Context, p BlastParams) (*BlastResult, error) {
	lim, err := traversalLimits(p.MaxDepth, p.MaxAssets, p.Timeout, defaultMaxDepth)
	if err != nil {
		return nil, err
	}
	idx, start, r, took, err := g.start(ctx, p.Asset)
	if err != nil {
		return nil, err
	}
	// The cursor is bound to the graph version: a page of a walk over a
	// graph that changed since would skip or repeat assets.
	pg, err := page.Params{Limit: p.Limit, Cursor: p.Cursor}.ResolveWith(defaultLimit, maxLimit, "blast_radius_analysis", r.id,
		strings.Join(p.Columns, ","), fmt.Sprint(p.MaxDepth, p.MaxAssets, p.Timeout, idx.Version))
	if err != nil {
		return nil, err
	}
	res := &BlastResult{Asset: r.id, CountsByKind: map[string]int{}, Assets: []ImpactedAsset{}, GraphVersion: idx.Version,
		IndexLoadMS: float64(took.Microseconds()) / 1000}
	var w *graphindex.Walk
	var states []*graphindex.ColSet
	var unknown [][2]int32
	if len(p.Columns) > 0 {
		cols, err := g.checkColumns(ctx, r, p.Columns)
		if err != nil {
			return nil, err
		}
		res.Columns = cols
		lower := make([]string, len(cols))
		for i, c := range cols {
			lower[i] = strings.ToLower(c)
		}
		w, states, unknown = idx.ColumnWalk(ctx, start, lower, lim)
	} else {
		w = idx.BFS(ctx, []int32{start}, false, lim)
	}
	res.Partial, res.Budget = w.Budget != "", w.Budget
	// The answer keeps no slice of the walk (paths are copied out as ids),
	// so its arrays go back for the next call.
	defer idx.Release(w)
	return res, g.describeBlast(ctx, idx, w, states, unknown, pg, res)
}

// checkColumns validates the changed columns against the asset's known
// columns, when it has any.
func (g *Graph) checkColumns(ctx context.Context, r resolved, cols []string) ([]string, error) {
	row, err := loadAsset(ctx, g.db, r.seq)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, c := range cols {
		c = strings.TrimSpace(c)
		if c == "" {
			return nil, fmt.Errorf("columns: an empty column name was given")
		}
		if len(row.Columns) > 0 && !slices.ContainsFunc(row.Columns, func(k Column) bool { return strings.EqualFold(k.Name, c) }) {
			names := make([]string, len(row.Columns))
			for i, k := range row.Columns {
				names[i] = k.Name
			}
			return nil, fmt.Errorf("column %q is not a column of %s; closest: %s", c, r.id, strings.Join(suggest.Closest(c, names, 5), ", "))
		}
		if !slices.Contains(out, c) {
			out = append(out, c)
		}
	}
	return out, nil
}

func (g *Graph) describeBlast(ctx context.Context, idx *graphindex.Index, w *graphindex.Walk, states []*graphindex.ColSet, unknown [][2]int32, pg page.Page, res *BlastResult) error {
	// Owners and domains are counted in slices indexed by interned name,
	// not maps: tallyReached runs once per asset reached.
	owners, domains := make([]int, len(idx.Strs)), make([]int, len(idx.Strs))
	t := tallyReached(idx.ReachedMetas(w), w.Starts, owners, domains, pg.Offset+pg.Limit)
	res.Total, res.Critical, res.Scheduled, res.Unowned = t.total, t.critical, t.scheduled, t.unowned
	kinds, pick, rest := t.kinds, t.pick, t.rest
	for k, c := range kinds {
		if c > 0 {
			res.CountsByKind[string(Kinds[k])] = c
		}
	}
	res.Owners, res.Domains = rankNames(idx, owners), rankNames(idx, domains)
	res.OwnerCount, res.DomainCount = len(res.Owners), len(res.Domains)
	res.Owners, res.Domains = res.Owners[:min(len(res.Owners), maxNames)], res.Domains[:min(len(res.Domains), maxNames)]
	pick = append(pick, rest[:min(len(rest), max(0, pg.Offset+pg.Limit-len(pick)))]...)
	pick = pick[min(pg.Offset, len(pick)):min(pg.Offset+pg.Limit, len(pick))]
	if more := pg.Offset+len(pick) < res.Total; more {
		res.NextCursor = pg.Next(len(pick), more)
	}
	res.NoColumnLineageTotal = len(unknown)
	unknown = unknown[:min(len(unknown), maxUnknownEdges)]
	// Read what the listed assets show, and only the ids of the others on
	// their paths and of the edges without column lineage, through the
	// index's table: a warm call on an unchanged graph reads none of it
	// from the store again.
	listed := make([]int64, len(pick))
	var need []int32
	paths := make([][]int32, len(pick))
	for i, p := range pick {
		listed[i] = idx.Seq(w.Order[p])
		paths[i] = w.Path(p)
		need = append(need, paths[i]...)
	}
	for _, e := range unknown {
		need = append(need, e[0], e[1])
	}
	rows, err := indexListRows(ctx, idx, g.db, listed)
	if err != nil {
		return err
	}
	ids, err := indexIDs(ctx, idx, g.db, need)
	if err != nil {
		return err
	}
	idOf := func(n int32) string { return ids[n] }
	now := g.clock.Now()
	nextRuns := map[Schedule]time.Time{} // many listed jobs share a few schedules
	for i, p := range pick {
		n := w.Order[p]
		r, ok := rows[idx.Seq(n)]
		if !ok {
			continue // deleted since the index was built
		}
		a := ImpactedAsset{ID: r.ID, Kind: r.Kind, Platform: r.Platform, Title: r.Title, Owner: r.Owner,
			OwnerEmail: r.OwnerEmail, Domain: r.Domain, Tags: slices.Clone(r.Tags), Critical: criticalTags(r.Tags),
			Distance: int(w.Distance(p)), Schedule: scheduleOf(r)}
		a.Path = make([]string, len(paths[i]))
		for k, pn := range paths[i] {
			a.Path[k] = idOf(pn)
		}
		if a.Schedule != nil {
			next, ok := nextRuns[*a.Schedule]
			if !ok {
				next, _ = a.Schedule.NextRun(now)
				nextRuns[*a.Schedule] = next
			}
			a.NextRun = next
		}
		if states != nil {
			a.AffectedColumns = states[p].List()
		}
		res.Assets = append(res.Assets, a)
	}
	sortImpacted(res.Assets)
	for _, e := range unknown {
		res.NoColumnLineage = append(res.NoColumnLineage, EdgeRef{From: idOf(e[0]), To: idOf(e[1])})
	}
	res.Summary = blastSummary(res)
	return nil
}

// reachedTally is what tallyReached counts.
type reachedTally struct {
	total, critical, scheduled, unowned int
	kinds                               [32]int
	// pick holds the positions of the critical and scheduled assets, rest
	// the first of the others, up to the page's end; both in walk order.
	pick, rest []int32
}

// tallyReached counts the reached assets' kinds, flags, owners and domains
// (metas[i] is the asset at walk position starts+i; owners and domains are
// indexed by interned name), and picks the positions a page can list, up
// to upTo of those neither critical nor scheduled. It runs once per asset
// reached, hundreds of thousands of them, so it is a function of its own:
// in describeBlast's body the compiler kept its counters in memory (the
// answer's fields, and spilled registers), and the loop took a fifth of
// the walk's time.
func tallyReached(metas []graphindex.NodeMeta, starts int, owners, domains []int, upTo int) reachedTally {
	var t reachedTally
	var critical, scheduled, unowned int
	for i, m := range metas {
		t.kinds[m.Kind]++
		f := m.Flags
		if f&flagCritical != 0 {
			critical++
		}
		if f&flagScheduled != 0 {
			scheduled++
		}
		if o := m.Owner; o >= 0 {
			owners[o]++
		} else {
			unowned++
		}
		if d := m.Domain; d >= 0 {
			domains[d]++
		}
		// Critical and scheduled assets come first on the pages; within
		// each group the walk's order (by distance) is kept, so pages are
		// stable for one graph version.
		if f&(flagCritical|flagScheduled) != 0 {
			t.pick = append(t.pick, int32(starts+i))
		} else if len(t.rest) < upTo {
			t.rest = append(t.rest, int32(starts+i))
		}
	}
	t.total, t.critical, t.scheduled, t.unowned = len(metas), critical, scheduled, unowned
	return t
}

func rankNames(idx *graphindex.Index, counts []int) []NameCount {
	var out []NameCount
	for s, n := range counts {
		if n > 0 {
			out = append(out, NameCount{Name: idx.Strs[s], Assets: n})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Assets != out[j].Assets {
			return out[i].Assets > out[j].Assets
		}
		return out[i].Name < out[j].Name
	})
	if len(out) > 50 {
		out = out[:50]
	}
	return out
}

// sortImpacted puts critical assets first, then scheduled jobs, each by
// soonest next run, then everything else by distance: the order in which
// someone must act.
func sortImpacted(as []ImpactedAsset) {
	group := func(a *ImpactedAsset) int {
		switch {
		case len(a.Critical) > 0:
			return 0
		case a.Schedule != nil:
			return 1
		}
		return 2
	}
	sort.SliceStable(as, func(i, j int) bool {
		a, b := &as[i], &as[j]
		if ga, gb := group(a), group(b); ga != gb {
			return ga < gb
		}
		if a.NextRun.IsZero() != b.NextRun.IsZero() {
			return !a.NextRun.IsZero()
		}
		if !a.NextRun.Equal(b.NextRun) {
			return a.NextRun.Before(b.NextRun)
		}
		if a.Distance != b.Distance {
			return a.Distance < b.Distance
		}
		return a.ID < b.ID
	})
}

func blastSummary(r *BlastResult) string {
	var b strings.Builder
	fmt.Fprintf(&b, "A change to %s", r.Asset)
	if len(r.Columns) > 0 {
		fmt.Fprintf(&b, " (columns %s)", strings.Join(r.Columns, ", "))
	}
	fmt.Fprintf(&b, " reaches %d asset(s) downstream", r.Total)
	if r.Total == 0 {
		b.WriteString(".")
	} else {
		kinds := make([]string, 0, len(r.CountsByKind))
		for k, n := range r.CountsByKind {
			kinds = append(kinds, fmt.Sprintf("%d %s", n, k))
		}
		sort.Strings(kinds)
		fmt.Fprintf(&b, " (%s); %d critical, %d scheduled.", strings.Join(kinds, ", "), r.Critical, r.Scheduled)
	}
	var urgent []string
	for _, a := range r.Assets {
		if len(a.Critical) == 0 && a.NextRun.IsZero() {
			continue
		}
		s := a.ID
		if len(a.Critical) > 0 {
			s += " [" + strings.Join(a.Critical, ", ") + "]"
		}
		if !a.NextRun.IsZero() {
			s += " next run " + a.NextRun.Format("2006-01-02 15:04 MST")
		}
		urgent = append(urgent, s)
		if len(urgent) == 5 {
			break
		}
	}
	if len(urgent) > 0 {
		fmt.Fprintf(&b, " First: %s.", strings.Join(urgent, "; "))
	}
	if len(r.Owners) > 0 {
		names := make([]string, 0, 3)
		for _, o := range r.Owners[:min(3, len(r.Owners))] {
			names = append(names, o.Name)
		}
		fmt.Fprintf(&b, " Owners: %s.", strings.Join(names, ", "))
	}
	if len(r.NoColumnLineage) > 0 {
		fmt.Fprintf(&b, " %d edge(s) had no column lineage and were followed in full, so the answer is conservative past them.", len(r.NoColumnLineage))
	}
	if r.Partial {
		fmt.Fprintf(&b, " PARTIAL: the %s budget stopped the walk; more assets may be affected.", r.Budget)
	}
	if len(r.Assets) < r.Total {
		fmt.Fprintf(&b, " Listed %d of %d.", len(r.Assets), r.Total)
	}
	if r.IndexLoadMS > 0 {
		fmt.Fprintf(&b, " This call first loaded the graph's traversal index (%s; kept for later calls until the graph changes).",
			time.Duration(r.IndexLoadMS*float64(time.Millisecond)).Round(time.Millisecond))
	}
	return b.String()
}
