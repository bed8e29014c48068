package lineage

import (
	"context"
	"sort"

	"github.com/dataworkers/dw/internal/bound"
)

// OwnerToAsk is an owner with the assets of theirs a change reaches.
type OwnerToAsk struct {
	Owner       string   `json:"owner" jsonschema:"owner"`
	Assets      []string `json:"assets" jsonschema:"their assets the change reaches: the first 10 (assets_total counts them all)"`
	AssetsTotal int      `json:"assets_total" jsonschema:"their assets the change reaches, in all"`
}

// OutboundJob is a job that sends data out, with its next run.
type OutboundJob struct {
	Asset    string   `json:"asset" jsonschema:"asset id"`
	Title    string   `json:"title,omitempty" jsonschema:"display name"`
	Owner    string   `json:"owner,omitempty" jsonschema:"owner"`
	Critical []string `json:"critical" jsonschema:"outbound, money, regulator, customer-facing"`
	NextRun  string   `json:"next_run,omitempty" jsonschema:"next scheduled run (RFC 3339)"`
}

// Impact sizes a change downstream for the people who must agree to it.
// Every count covers everything reached; the lists name the first of
// each (blast_radius_analysis pages every asset reached, with its owner).
type Impact struct {
	Asset        string         `json:"asset" jsonschema:"the changed asset"`
	Fields       []string       `json:"fields" jsonschema:"the fields considered"`
	Total        int            `json:"total" jsonschema:"assets reached"`
	CountsByKind map[string]int `json:"counts_by_kind" jsonschema:"assets reached per kind"`
	Owners       []OwnerToAsk   `json:"owners" jsonschema:"the owners to ask, most assets first, with their first assets: the first 50 owners (owners_total counts them all)"`
	OwnersTotal  int            `json:"owners_total" jsonschema:"owners of assets reached, in all"`
	Unowned      []string       `json:"unowned" jsonschema:"assets reached with no recorded owner: the first 50 (unowned_total counts them all)"`
	UnownedTotal int            `json:"unowned_total" jsonschema:"assets reached with no recorded owner, in all"`
	Outbound     []OutboundJob  `json:"outbound" jsonschema:"outbound, money, regulator and customer-facing assets in the blast radius's ranking: the first 50 (outbound_total counts them all)"`
	// OutboundTotal counts every critical asset reached.
	OutboundTotal     int       `json:"outbound_total" jsonschema:"outbound, money, regulator and customer-facing assets reached, in all"`
	Partial           bool      `json:"partial" jsonschema:"a traversal budget stopped the walk early"`
	Budget            string    `json:"budget,omitempty" jsonschema:"which budget"`
	NoColumnInfo      []EdgeRef `json:"no_column_lineage,omitempty" jsonschema:"edges followed in full because they carry no column lineage: the first 20"`
	NoColumnInfoTotal int       `json:"no_column_lineage_total,omitempty" jsonschema:"edges without column lineage, in all"`
	IndexLoadMS       float64   `json:"index_load_ms,omitempty" jsonschema:"milliseconds this call spent loading the graph's traversal index (first call after a start or a graph change); absent when it was held"`
}

// impactLimit is how many reached assets Impact groups by owner: sizing a
// change needs every owner, not a page of them.
const impactLimit = 10000

// What an impact lists of what it counts.
const (
	listedOwners, ownerAssets, ownerBudget = 50, 10, 1000
	listedUnowned, unownedBudget           = 50, 5000
	listedOutbound, outboundBudget         = 50, 12000
	listedNoColumn                         = 20
)

// Impact walks what a change to an asset (only what reads fields, when
// given) reaches and groups it for asking: owners with their assets (most
// assets first), assets nobody owns, and the critical ones with their next
// runs, in the blast radius's ranking. Every owner is counted; the lists
// are cut to their first entries (Impact's field descriptions say how
// many).
func (g *Graph) Impact(ctx context.Context, asset string, fields []string) (*Impact, error) {
	br, err := g.BlastRadius(ctx, BlastParams{Asset: asset, Columns: fields, Limit: impactLimit})
	if err != nil {
		return nil, err
	}
	out := &Impact{Asset: br.Asset, Fields: append([]string{}, fields...), Total: br.Total, CountsByKind: br.CountsByKind,
		Owners: []OwnerToAsk{}, Unowned: []string{}, Outbound: []OutboundJob{}, Partial: br.Partial, Budget: br.Budget,
		NoColumnInfo: br.NoColumnLineage, NoColumnInfoTotal: max(br.NoColumnLineageTotal, len(br.NoColumnLineage)), IndexLoadMS: br.IndexLoadMS}
	if out.CountsByKind == nil {
		out.CountsByKind = map[string]int{}
	}
	byOwner := map[string][]string{}
	for _, a := range br.Assets {
		if a.Owner == "" {
			out.Unowned = append(out.Unowned, a.ID)
		} else {
			byOwner[a.Owner] = append(byOwner[a.Owner], a.ID)
		}
		if len(a.Critical) > 0 {
			j := OutboundJob{Asset: a.ID, Title: a.Title, Owner: a.Owner, Critical: a.Critical}
			if !a.NextRun.IsZero() {
				j.NextRun = a.NextRun.Format("2006-01-02T15:04:05Z07:00")
			}
			out.Outbound = append(out.Outbound, j)
		}
	}
	for o, as := range byOwner {
		out.Owners = append(out.Owners, OwnerToAsk{Owner: o, Assets: as, AssetsTotal: len(as)})
	}
	sort.Slice(out.Owners, func(i, j int) bool {
		if out.Owners[i].AssetsTotal != out.Owners[j].AssetsTotal {
			return out.Owners[i].AssetsTotal > out.Owners[j].AssetsTotal
		}
		return out.Owners[i].Owner < out.Owners[j].Owner
	})
	out.bound()
	return out, nil
}

// bound cuts the lists to their first entries, keeping the totals.
func (o *Impact) bound() {
	o.OwnersTotal, o.UnownedTotal, o.OutboundTotal = len(o.Owners), len(o.Unowned), len(o.Outbound)
	o.Owners = o.Owners[:min(len(o.Owners), listedOwners)]
	for i := range o.Owners {
		o.Owners[i].Assets = bound.Head(o.Owners[i].Assets, ownerAssets, ownerBudget)
	}
	o.Unowned = bound.Head(o.Unowned, listedUnowned, unownedBudget)
	o.Outbound = bound.Head(o.Outbound, listedOutbound, outboundBudget)
	o.NoColumnInfo = o.NoColumnInfo[:min(len(o.NoColumnInfo), listedNoColumn)]
}
