// Package groupowner names the job behind a Kafka consumer group and its
// owner: the group id and its members' client ids matched to a stream job
// or connector in the context graph, its owner there, else the owner of the
// dw.yaml domain it falls in, else the nearest owner upstream as a lead.
// get_consumer_lag shows it per group; dw watch tells it with a lagging
// group.
package groupowner

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/dataworkers/dw/internal/approvals"
	"github.com/dataworkers/dw/internal/config"
	"github.com/dataworkers/dw/internal/kafka"
	"github.com/dataworkers/dw/internal/lineage"
)

// Owner is the job behind a consumer group and who owns it.
type Owner struct {
	Asset     string `json:"asset,omitempty" jsonschema:"asset id of the consuming stream job or connector in the context graph"`
	Kind      string `json:"kind,omitempty" jsonschema:"the asset's kind"`
	MatchedBy string `json:"matched_by,omitempty" jsonschema:"what linked the group to the asset: its group id or a member's client id"`
	Owner     string `json:"owner,omitempty" jsonschema:"owner recorded for the job (the graph's owner, else its domain's owner in dw.yaml)"`
	OwnerFrom string `json:"owner_from,omitempty" jsonschema:"where the owner came from: context graph, or domain <name> in dw.yaml"`
	// UpstreamOwner is a lead when the job itself has no owner.
	UpstreamOwner      string `json:"upstream_owner,omitempty" jsonschema:"owner of the nearest owned asset upstream, when the job has none"`
	UpstreamOwnerAsset string `json:"upstream_owner_asset,omitempty" jsonschema:"the asset that upstream owner owns"`
	Note               string `json:"note,omitempty" jsonschema:"why no owner is named, or what was ambiguous"`
}

// Line is the owner in a few words for a summary.
func (o Owner) Line() string {
	switch {
	case o.Owner != "":
		return fmt.Sprintf("consumed by %s, owner %s", o.Asset, o.Owner)
	case o.Asset != "":
		return fmt.Sprintf("consumed by %s; %s", o.Asset, o.Note)
	}
	return o.Note
}

// jobKinds are the asset kinds that consume topics.
var jobKinds = []string{string(lineage.KindStreamJob), string(lineage.KindConnector), string(lineage.KindJob),
	string(lineage.KindReverseETLSync), string(lineage.KindOrchestratorJob)}

// Finder matches consumer groups to jobs in the context graph.
type Finder struct {
	graph *lineage.Graph
	cfg   *config.Config
	err   error
	// cache holds the jobs found under each lower-cased name. When the
	// graph's jobs fit one read (the usual case), all of them are indexed
	// up front and complete is set, so a round over hundreds of groups
	// costs one graph query; otherwise each name is searched once.
	cache    map[string][]lineage.SearchHit
	complete bool
}

// preloadJobs is how many job assets are indexed in one read.
const preloadJobs = 500

// New prepares a Finder over the graph, with cfg's domains for jobs the
// graph gives no owner. graphErr is why the graph could not be opened, if
// it could not: every answer then says so in its note, and the reading it
// goes with is not failed for it.
func New(ctx context.Context, g *lineage.Graph, graphErr error, cfg *config.Config) *Finder {
	f := &Finder{graph: g, cfg: cfg, err: graphErr, cache: map[string][]lineage.SearchHit{}}
	if graphErr != nil {
		return f
	}
	res, err := g.SearchAssets(ctx, lineage.SearchParams{Kinds: jobKinds, Limit: preloadJobs})
	if err != nil || res.Truncated || res.Total > len(res.Assets) {
		return f
	}
	for _, hit := range res.Assets {
		f.index(hit)
	}
	f.complete = true
	return f
}

// index files a job under its short name and its title.
func (f *Finder) index(hit lineage.SearchHit) {
	for _, n := range []string{shortName(hit.ID), hit.Title} {
		key := strings.ToLower(n)
		if key == "" || slices.ContainsFunc(f.cache[key], func(h lineage.SearchHit) bool { return h.ID == hit.ID }) {
			continue
		}
		f.cache[key] = append(f.cache[key], hit)
	}
}

// taskSuffix is the "-<n>" a client id carries per consumer instance or
// Connect task; compiled on first use, not at every start.
var taskSuffix = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`-\d+$`) })

// candidate is a name a consuming job may be recorded under.
type candidate struct {
	name, via string
}

// candidates lists the names to look for, most specific first: the group
// id (and, for a Connect sink's default group connect-<name>, the
// connector's name), then each member's client id with the prefixes and
// task numbers Kafka clients and Connect add (consumer-<group>-<n>,
// connector-consumer-<connector>-<task>).
func candidates(g kafka.GroupReport) []candidate {
	var out []candidate
	add := func(name, via string) {
		name = strings.TrimSpace(name)
		if name == "" || slices.ContainsFunc(out, func(c candidate) bool { return strings.EqualFold(c.name, name) }) {
			return
		}
		out = append(out, candidate{name, via})
	}
	add(g.Group, "group id "+g.Group)
	if rest, ok := strings.CutPrefix(g.Group, "connect-"); ok {
		add(rest, "group id "+g.Group+" (Kafka Connect sink group)")
	}
	var clients []string
	for _, p := range g.Partitions {
		if p.ClientID != "" && !slices.Contains(clients, p.ClientID) {
			clients = append(clients, p.ClientID)
		}
	}
	sort.Strings(clients)
	for _, id := range clients {
		via := "client id " + id
		add(id, via)
		base := taskSuffix().ReplaceAllString(id, "")
		add(base, via)
		for _, prefix := range []string{"connector-consumer-", "consumer-"} {
			if rest, ok := strings.CutPrefix(base, prefix); ok {
				add(rest, via)
			}
		}
	}
	return out
}

// shortName is the last path segment of an asset id, the name a job
// is usually known by (flink://usage-hourly-rollup, connect://bq-sink).
func shortName(id string) string {
	_, path, ok := strings.Cut(id, "://")
	if !ok {
		path = id
	}
	path = strings.TrimRight(path, "/")
	if i := strings.LastIndex(path, "/"); i >= 0 {
		path = path[i+1:]
	}
	return path
}

// Find names the consuming job of a group and its owner. It never fails:
// what cannot be found is said in Note.
func (f *Finder) Find(ctx context.Context, g kafka.GroupReport) Owner {
	if f.err != nil {
		return Owner{Note: "context graph not readable: " + f.err.Error()}
	}
	cands := candidates(g)
	for _, c := range cands {
		hits, err := f.search(ctx, c.name)
		if err != nil {
			return Owner{Note: "context graph search failed: " + err.Error()}
		}
		if len(hits) == 0 {
			continue
		}
		if len(hits) > 1 {
			ids := make([]string, len(hits))
			for i, h := range hits {
				ids[i] = h.ID
			}
			return Owner{MatchedBy: c.via, Note: fmt.Sprintf("%q names %d jobs in the context graph (%s); record which one consumes group %s to name its owner",
				c.name, len(hits), strings.Join(ids, ", "), g.Group)}
		}
		return f.ownerOf(ctx, hits[0], c.via)
	}
	names := make([]string, len(cands))
	for i, c := range cands {
		names[i] = c.name
	}
	return Owner{Note: fmt.Sprintf("no owner recorded: no stream job or connector in the context graph is named %s; record the consuming job with its owner (dw-context-catalog record_lineage) to name it here",
		strings.Join(names, " or "))}
}

// search finds job assets whose short name or title is exactly name.
func (f *Finder) search(ctx context.Context, name string) ([]lineage.SearchHit, error) {
	key := strings.ToLower(name)
	if hits, ok := f.cache[key]; ok || f.complete {
		return hits, nil
	}
	res, err := f.graph.SearchAssets(ctx, lineage.SearchParams{Query: name, Kinds: jobKinds, Limit: 500})
	if err != nil {
		return nil, err
	}
	var hits []lineage.SearchHit
	for _, h := range res.Assets {
		if strings.EqualFold(shortName(h.ID), name) || strings.EqualFold(h.Title, name) {
			hits = append(hits, h)
		}
	}
	f.cache[key] = hits
	return hits, nil
}

// ownerOf reads the owner of a matched job: the graph's, else the owner of
// the dw.yaml domain its id falls in, else the nearest owner upstream as a
// lead.
func (f *Finder) ownerOf(ctx context.Context, hit lineage.SearchHit, via string) Owner {
	o := Owner{Asset: hit.ID, Kind: string(hit.Kind), MatchedBy: via}
	if hit.Owner != "" {
		o.Owner, o.OwnerFrom = hit.Owner, "context graph"
		return o
	}
	ids := lineage.Identities{Graph: f.graph, Names: lineage.NamesFromConfig(f.cfg)}
	if d, ok, err := approvals.DomainOf(ctx, f.cfg, ids, hit.ID); err == nil && ok && len(d.Owners) > 0 {
		o.Owner, o.OwnerFrom = d.Owners[0], "domain "+d.Name+" in dw.yaml"
		return o
	}
	o.Note = "no owner recorded for " + hit.ID
	res, err := f.graph.Owners(ctx, lineage.OwnersParams{Assets: []string{hit.ID}})
	if err == nil && len(res.Assets) == 1 && res.Assets[0].UpstreamOwner != "" {
		o.UpstreamOwner, o.UpstreamOwnerAsset = res.Assets[0].UpstreamOwner, res.Assets[0].UpstreamOwnerAsset
		o.Note += fmt.Sprintf("; the nearest owner upstream is %s (of %s)", o.UpstreamOwner, o.UpstreamOwnerAsset)
	}
	return o
}
