package lineage

import (
	"context"
	"sort"
)

// OwnerToAsk is an owner with the assets of theirs a change reaches.
type OwnerToAsk struct {
	Owner  string   `json:"owner" jsonschema:"owner"`
	Assets []string `json:"assets" jsonschema:"their assets the change reaches"`
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
type Impact struct {
	Asset        string         `json:"asset" jsonschema:"the changed asset"`
	Fields       []string       `json:"fields" jsonschema:"the fields considered"`
	Total        int            `json:"total" jsonschema:"assets reached"`
	CountsByKind map[string]int `json:"counts_by_kind" jsonschema:"assets reached per kind"`
	Owners       []OwnerToAsk   `json:"owners" jsonschema:"the owners to ask, with their assets"`
	Unowned      []string       `json:"unowned" jsonschema:"assets reached with no recorded owner"`
	Outbound     []OutboundJob  `json:"outbound" jsonschema:"outbound, money, regulator and customer-facing assets, soonest next run first"`
	Partial      bool           `json:"partial" jsonschema:"a traversal budget stopped the walk early"`
	Budget       string         `json:"budget,omitempty" jsonschema:"which budget"`
	NoColumnInfo []EdgeRef      `json:"no_column_lineage,omitempty" jsonschema:"edges followed in full because they carry no column lineage"`
	IndexLoadMS  float64        `json:"index_load_ms,omitempty" jsonschema:"milliseconds this call spent loading the graph's traversal index (first call after a start or a graph change); absent when it was held"`
}

// impactLimit is how many reached assets Impact groups by owner: sizing a
// change needs every owner, not a page of them.
const impactLimit = 10000

// Impact walks what a change to an asset (only what reads fields, when
// given) reaches and groups it for asking: owners with their assets (most
// assets first), assets nobody owns, and the critical ones with their next
// runs, in the blast radius's ranking.
func (g *Graph) Impact(ctx context.Context, asset string, fields []string) (*Impact, error) {
	br, err := g.BlastRadius(ctx, BlastParams{Asset: asset, Columns: fields, Limit: impactLimit})
	if err != nil {
		return nil, err
	}
	out := &Impact{Asset: br.Asset, Fields: append([]string{}, fields...), Total: br.Total, CountsByKind: br.CountsByKind,
		Owners: []OwnerToAsk{}, Unowned: []string{}, Outbound: []OutboundJob{}, Partial: br.Partial, Budget: br.Budget,
		NoColumnInfo: br.NoColumnLineage, IndexLoadMS: br.IndexLoadMS}
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
		out.Owners = append(out.Owners, OwnerToAsk{Owner: o, Assets: as})
	}
	sort.Slice(out.Owners, func(i, j int) bool {
		if len(out.Owners[i].Assets) != len(out.Owners[j].Assets) {
			return len(out.Owners[i].Assets) > len(out.Owners[j].Assets)
		}
		return out.Owners[i].Owner < out.Owners[j].Owner
	})
	return out, nil
}
