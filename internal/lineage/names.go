package lineage

import (
	"context"
	"errors"
	"fmt"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/dataworkers/dw/internal/config"
)

// The text rule: every asset id entering the product (a note, an
// OpenLineage event, a dbt manifest, a connector's config, a proposal's
// target) is printable text. An id is shown to people who approve work on
// it, in terminals and in answers: a control character can rewrite the
// line it is printed on (ESC sequences, CR) or forge a second one (LF),
// and an invisible format character (a zero-width space, a bidirectional
// override) makes an id that looks exactly like another asset's. So they
// are refused wherever an id comes in, by CheckIDText, and the Writer
// refuses them again so no path into lineage_* can skip the rule.

// IDTextRule says what an asset id may contain, for error messages.
const IDTextRule = "an asset id is printable text: no control characters (U+0000-U+001F, U+007F-U+009F), " +
	"no invisible format characters (Unicode category Cf, e.g. U+00AD, U+200B-U+200F, U+202A-U+202E, U+2060-U+2064, U+2066-U+2069, U+FEFF), " +
	"no line or paragraph separators (U+2028, U+2029) and valid UTF-8 (see docs/ASSET_IDS.md)"

// IDTextError is text refused by the asset id rule. It never holds the
// text itself: the id may come from any file, so only the refused
// character's code point and position are shown.
type IDTextError struct {
	// Field names where the text came from (assets[0].id, inputs[2].name);
	// "" when the caller adds it.
	Field string
	// Rune is the refused character; utf8.RuneError when the bytes are not
	// UTF-8 (BadUTF8).
	Rune    rune
	BadUTF8 bool
	// Pos is the refused character's position, counted in characters from 1.
	Pos int
}

// Reason says what is wrong and what is valid, without the field.
func (e *IDTextError) Reason() string {
	var what string
	switch {
	case e.BadUTF8:
		what = "is not valid UTF-8"
	case e.Rune == utf8.RuneError:
		what = "contains U+FFFD, the replacement character a decoder puts where bytes were not UTF-8,"
	case unicode.IsControl(e.Rune):
		what = fmt.Sprintf("contains the control character U+%04X", e.Rune)
	case e.Rune == '\u2028' || e.Rune == '\u2029':
		what = fmt.Sprintf("contains the line separator U+%04X", e.Rune)
	default:
		what = fmt.Sprintf("contains the invisible format character U+%04X", e.Rune)
	}
	return fmt.Sprintf("%s at character %d; %s", what, e.Pos, IDTextRule)
}

func (e *IDTextError) Error() string {
	if e.Field == "" {
		return e.Reason()
	}
	return e.Field + " " + e.Reason()
}

// refusedInID reports whether r may not appear in an asset id.
func refusedInID(r rune) bool {
	return unicode.IsControl(r) || unicode.Is(unicode.Cf, r) || r == '\u2028' || r == '\u2029' || r == utf8.RuneError
}

// CheckIDText applies the text rule to s (an id, or a part an id is made
// of), returning an *IDTextError naming field when s breaks it.
func CheckIDText(field, s string) error {
	i := 0
	for i < len(s) && s[i] >= 0x20 && s[i] < 0x7f {
		i++ // printable ASCII, the usual id, needs no decoding
	}
	if i == len(s) {
		return nil
	}
	pos := utf8.RuneCountInString(s[:i])
	for off, r := range s[i:] {
		pos++
		if refusedInID(r) {
			e := &IDTextError{Field: field, Rune: r, Pos: pos}
			if r == utf8.RuneError {
				// Ranging yields RuneError both for a byte that is not
				// UTF-8 (size 1) and for an encoded U+FFFD (size 3).
				_, size := utf8.DecodeRuneInString(s[i+off:])
				e.BadUTF8 = size == 1
			}
			return e
		}
	}
	return nil
}

// Spellings: a person names a table the way the tool in front of them
// shows it: duckdb://sales.orders from a check, duckdb://warehouse.sales.orders
// from the catalog, "Sales"."Orders" from a SQL editor, or just sales.orders.
// TableID folds case and quoting; what it cannot know is which database a
// name without one lives in. The configured warehouses say that: each has a
// home database (DuckDB: the file's name, as DuckDB calls the attached
// catalog; Snowflake: database; BigQuery: project) and schema (DuckDB: main;
// Snowflake: schema; BigQuery: dataset). With them every spelling of a table
// becomes one full id, platform://database.schema.table, and domain globs
// are compared part by part on full ids (docs/ASSET_IDS.md).

// Home is where one configured warehouse puts a table named without its
// database or schema.
type Home struct {
	// Warehouse is the configured name, for messages.
	Warehouse string
	// Platform is the warehouse kind (duckdb, snowflake, bigquery, ...).
	Platform string
	// Database and Schema are as configured; "" when unknown.
	Database, Schema string
}

// Names resolves spellings of tables against the configured warehouses.
// The zero value (or nil) knows no warehouse: it still folds case and
// quoting but leaves a name without a database as it is.
type Names struct {
	homes []Home
}

// NewNames returns Names over the warehouses, in priority order: where two
// warehouses of one platform could hold a name, the first is assumed.
func NewNames(homes ...Home) *Names {
	n := &Names{}
	for _, h := range homes {
		h.Platform = NormalizePlatform(h.Platform)
		h.Database, h.Schema = strings.TrimSpace(h.Database), strings.TrimSpace(h.Schema)
		if h.Platform != "" {
			n.homes = append(n.homes, h)
		}
	}
	return n
}

// NamesFromConfig reads each configured warehouse's home database and
// schema.
func NamesFromConfig(cfg *config.Config) *Names {
	if cfg == nil {
		return NewNames()
	}
	var homes []Home
	for _, w := range cfg.Warehouses {
		h := Home{Warehouse: w.Name, Platform: w.Kind}
		switch NormalizePlatform(w.Kind) {
		case "duckdb":
			h.Database, h.Schema = duckDBCatalog(w.Path), "main"
		case "bigquery":
			h.Database, h.Schema = w.Project, w.Dataset
		default:
			h.Database, h.Schema = w.Database, w.Schema
		}
		homes = append(homes, h)
	}
	return NewNames(homes...)
}

// duckDBCatalog is the name DuckDB gives a database file it opens: the
// file name without its extension (warehouse.duckdb -> warehouse).
func duckDBCatalog(p string) string {
	p = strings.TrimSpace(p)
	if p == "" || p == ":memory:" {
		return "memory"
	}
	base := filepath.Base(p)
	if i := strings.Index(base, "."); i > 0 {
		base = base[:i]
	}
	return base
}

// AmbiguousError is a spelling that names a table in several configured
// warehouses.
type AmbiguousError struct {
	Ref        string
	Candidates []string
}

func (e *AmbiguousError) Error() string {
	return fmt.Sprintf("%q could be %s; give the full id (platform://database.schema.table)", e.Ref, strings.Join(e.Candidates, " or "))
}

// spelling is a reference parsed: a table on a warehouse platform (platform
// may be "" for a bare name) or another asset id (other != "").
type spelling struct {
	platform string
	parts    []namePart
	other    string
}

func parseSpelling(ref string) (spelling, error) {
	ref = strings.TrimSpace(ref)
	if err := CheckIDText("asset", ref); err != nil {
		return spelling{}, err
	}
	if strings.Contains(ref, "://") {
		id, err := CanonicalID(ref)
		if err != nil {
			return spelling{}, err
		}
		p, rest, _ := SplitID(id)
		if !IsWarehouse(p) {
			return spelling{other: id}, nil
		}
		parts, err := splitQualified(strings.TrimSpace(rest))
		if err != nil {
			return spelling{}, err
		}
		return spelling{platform: p, parts: parts}, nil
	}
	if ref == "" {
		return spelling{}, errors.New("asset is empty: give an id like duckdb://warehouse.sales.orders or a table name like sales.orders")
	}
	parts, err := splitQualified(ref)
	if err != nil {
		return spelling{}, err
	}
	if len(parts) > 3 {
		return spelling{}, fmt.Errorf("%q has %d parts; a table is at most database.schema.table", ref, len(parts))
	}
	for _, p := range parts {
		if !p.quoted && !regularIdent().MatchString(p.s) {
			// api-usage is more likely a topic than a table: without a
			// platform only a plain or quoted identifier is taken as one.
			return spelling{}, fmt.Errorf("%q is not a table name (quote identifiers with other characters) and has no platform; give an id like kafka://prod/%s", ref, ref)
		}
	}
	return spelling{parts: parts}, nil
}

// stored is a name part as the engine resolves it: unquoted parts folded to
// the platform's case, quoted parts kept.
func stored(rule caseRule, p namePart, index, count int) string {
	switch rule {
	case ruleUpper:
		if !p.quoted {
			return strings.ToUpper(p.s)
		}
	case ruleLower:
		if !p.quoted {
			return strings.ToLower(p.s)
		}
	case ruleInsensitive:
		return strings.ToLower(p.s)
	case ruleBigQuery:
		if count == 3 && index == 0 {
			return strings.ToLower(p.s)
		}
	}
	return p.s
}

func (n *Names) homesOf(platform string) []Home {
	if n == nil {
		return nil
	}
	var out []Home
	for _, h := range n.homes {
		if h.Platform == platform {
			out = append(out, h)
		}
	}
	return out
}

// full resolves a table's parts to what the engine stores, filling the
// database and schema a shorter name leaves out from home (nil: left out).
// Parts that stay unknown are "".
func full(platform string, parts []namePart, home *Home) []string {
	rule := warehousePlatforms[platform]
	if len(parts) > 3 {
		out := make([]string, len(parts))
		for i, p := range parts {
			out[i] = stored(rule, p, i, len(parts))
		}
		return out
	}
	out := make([]string, 3)
	for i, p := range parts {
		out[3-len(parts)+i] = stored(rule, p, 3-len(parts)+i, 3)
	}
	if home != nil {
		if out[0] == "" && home.Database != "" {
			out[0] = stored(rule, namePart{s: home.Database}, 0, 3)
		}
		if out[1] == "" && home.Schema != "" {
			out[1] = stored(rule, namePart{s: home.Schema}, 1, 3)
		}
	}
	return out
}

// render writes a full name as an id from the part after the last unknown
// one: a database without a schema would read as a schema.
func render(platform string, fullParts []string) string {
	i := 0
	for j, s := range fullParts[:len(fullParts)-1] {
		if s == "" {
			i = j + 1
		}
	}
	ps := make([]namePart, 0, len(fullParts)-i)
	for _, s := range fullParts[i:] {
		ps = append(ps, namePart{s: s, quoted: true})
	}
	id, _, _ := tableIDFromParts(platform, ps)
	return id
}

// Candidates lists the full ids a spelling can mean, the likeliest first:
// one for an id on a platform with at most one configured warehouse or a
// name with its database, one per warehouse otherwise. An id on a platform
// that names no tables (kafka://, dbt://) is returned canonicalized.
func (n *Names) Candidates(ref string) ([]string, error) {
	sp, err := parseSpelling(ref)
	if err != nil {
		return nil, err
	}
	if sp.other != "" {
		return []string{sp.other}, nil
	}
	var out []string
	add := func(platform string, h *Home) {
		if id := render(platform, full(platform, sp.parts, h)); !slices.Contains(out, id) {
			out = append(out, id)
		}
	}
	if sp.platform != "" {
		hs := n.homesOf(sp.platform)
		if len(hs) == 0 {
			add(sp.platform, nil)
		}
		for i := range hs {
			add(sp.platform, &hs[i])
		}
		return out, nil
	}
	if n == nil || len(n.homes) == 0 {
		return nil, fmt.Errorf("%q has no platform and no warehouse is configured to place it; give an id like duckdb://warehouse.%s", ref, strings.TrimSpace(ref))
	}
	for i := range n.homes {
		add(n.homes[i].Platform, &n.homes[i])
	}
	return out, nil
}

// Canonical is the one id of a spelling: its full table id, or the
// canonical id of a non-table asset. A name given with its platform takes
// the platform's first configured warehouse; a bare name that fits
// warehouses of several platforms is an *AmbiguousError.
func (n *Names) Canonical(ref string) (string, error) {
	cands, err := n.Candidates(ref)
	if err != nil {
		return "", err
	}
	if len(cands) > 1 && !strings.Contains(ref, "://") {
		return "", &AmbiguousError{Ref: strings.TrimSpace(ref), Candidates: cands}
	}
	return cands[0], nil
}

// MatchGlob reports whether a domain's asset glob matches an asset id.
// Table globs are compared part by part on full names, so
// duckdb://sales.*, sales.* and duckdb://warehouse.sales.* all match
// duckdb://warehouse.sales.orders (and its every spelling) when warehouse is
// DuckDB's configured database. A glob left without a database where none
// is configured matches any database. Other globs follow path.Match on the
// canonical id, where * stops at a slash and ** matches anything.
func (n *Names) MatchGlob(pat, id string) bool {
	pat, id = strings.TrimSpace(pat), strings.TrimSpace(id)
	if pat == "" || id == "" {
		return false
	}
	if plainGlob(pat, id) {
		return true
	}
	cands, err := n.Candidates(id)
	if err != nil {
		return false
	}
	// A glob's literal platform is folded as ids' are, so dbt_cloud://job/*
	// governs what the graph calls dbt-cloud://job/<id>.
	if pp, rest, ok := SplitID(pat); ok && !strings.ContainsAny(pp, `*?[\`) {
		pat = NormalizePlatform(pp) + "://" + rest
	}
	for _, cid := range cands {
		if plainGlob(pat, cid) || n.matchTable(pat, cid) {
			return true
		}
	}
	return false
}

// matchTable compares a glob with a canonical table id part by part, the
// glob's missing database and schema taken from the platform's first
// configured warehouse.
func (n *Names) matchTable(pat, cid string) bool {
	p, idPath, ok := SplitID(cid)
	if !ok || !IsWarehouse(p) || strings.Contains(pat, "**") {
		return false
	}
	idParts, err := splitQualified(idPath)
	if err != nil {
		return false
	}
	idFull := full(p, idParts, nil) // already full where the database is known
	var patParts []namePart
	if pp, ppath, ok := SplitID(pat); ok {
		if NormalizePlatform(pp) != p {
			if ok, err := path.Match(strings.ToLower(pp), p); err != nil || !ok {
				return false
			}
		}
		patParts, err = splitQualified(strings.TrimSpace(ppath))
	} else {
		if n != nil && len(n.homes) > 0 && len(n.homesOf(p)) == 0 {
			return false // a bare name means a table in a configured warehouse
		}
		patParts, err = splitQualified(pat)
	}
	if err != nil || len(patParts) == 0 || len(patParts) > len(idFull) {
		return false
	}
	home := &Home{Platform: p}
	if hs := n.homesOf(p); len(hs) > 0 {
		home = &hs[0]
	}
	pf := full(p, patParts, home)
	if len(patParts) == 1 && patParts[0].s == "*" && !patParts[0].quoted {
		pf = []string{"*", "*", "*"} // platform://* is every table
	}
	if len(pf) != len(idFull) {
		return false
	}
	for i := range pf {
		if pf[i] == "" || idFull[i] == "" {
			continue // unknown on either side: a name without a database
		}
		if ok, err := path.Match(pf[i], idFull[i]); err != nil || !ok {
			return false
		}
	}
	return true
}

// plainGlob is path.Match with "**" matching any run of characters.
func plainGlob(pat, id string) bool {
	if pat == id {
		return true
	}
	if pre, suf, ok := strings.Cut(pat, "**"); ok {
		return len(id) >= len(pre)+len(suf) && strings.HasPrefix(id, pre) && strings.HasSuffix(id, suf)
	}
	ok, err := path.Match(pat, id)
	return err == nil && ok
}

// withShort adds the schema.table spelling of each table id in the home
// database of its platform, the name a check prints for it.
func (n *Names) withShort(ids []string) []string {
	for _, id := range slices.Clone(ids) {
		w := weakOf(id)
		if w == "" || slices.Contains(ids, w) {
			continue
		}
		if a, err := n.Canonical(w); err == nil {
			if b, err := n.Canonical(id); err == nil && a == b {
				ids = append(ids, w)
			}
		}
	}
	return ids
}

// known finds the asset a full table id names, under the id itself or,
// for a table a note named without its database, its partial name.
func (g *Graph) known(ctx context.Context, id string) (resolved, bool, error) {
	if r, ok, err := byAlias(ctx, g.db, id); err != nil || ok {
		return r, ok, err
	}
	return byPartial(ctx, g.db, id)
}

// aliasesOf lists an asset's strong names.
func (g *Graph) aliasesOf(ctx context.Context, seq int64) ([]string, error) {
	rows, err := g.db.QueryContext(ctx, "SELECT alias FROM lineage_aliases WHERE asset_seq = ? AND weak = 0 ORDER BY alias", seq)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var a string
		if err := rows.Scan(&a); err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, rows.Err()
}
