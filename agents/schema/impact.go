package schema

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/dataworkers/dw/internal/lineage"
	"github.com/dataworkers/dw/internal/mcpserver"
)

// ImpactIn names what changes.
type ImpactIn struct {
	Subject string   `json:"subject,omitempty" jsonschema:"Schema Registry subject (its asset is schema://SUBJECT); give this or asset"`
	Asset   string   `json:"asset,omitempty" jsonschema:"asset id or unambiguous bare name, e.g. duckdb://usage.usage_hourly; give this or subject"`
	Fields  []string `json:"fields,omitempty" jsonschema:"only what reads these fields or columns; empty means the whole asset"`
}

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

// ImpactOut sizes a change downstream.
type ImpactOut struct {
	Asset        string            `json:"asset" jsonschema:"the changed asset"`
	Fields       []string          `json:"fields" jsonschema:"the fields considered"`
	Total        int               `json:"total" jsonschema:"assets reached"`
	CountsByKind map[string]int    `json:"counts_by_kind" jsonschema:"assets reached per kind"`
	Owners       []OwnerToAsk      `json:"owners" jsonschema:"the owners to ask, with their assets"`
	Unowned      []string          `json:"unowned" jsonschema:"assets reached with no recorded owner"`
	Outbound     []OutboundJob     `json:"outbound" jsonschema:"outbound, money, regulator and customer-facing assets, soonest next run first"`
	Partial      bool              `json:"partial" jsonschema:"a traversal budget stopped the walk early"`
	Budget       string            `json:"budget,omitempty" jsonschema:"which budget"`
	NoColumnInfo []lineage.EdgeRef `json:"no_column_lineage,omitempty" jsonschema:"edges followed in full because they carry no column lineage"`
}

var assessImpactTool = mcpserver.Tool{
	Name:  "assess_impact",
	Title: "Size a schema change downstream",
	Description: "Sizes what a change to a schema subject or asset (optionally only some fields) reaches downstream in the context graph: counts by kind, " +
		"the owners to ask with their assets, assets with no recorded owner, and outbound, money, regulator and customer-facing jobs with their next runs. " +
		"Use it before a schema change, to know whom to ask and how big it is; for every affected asset with its path use blast_radius_analysis, and for upstream or route questions trace_cross_platform_lineage (both dw-context-catalog).",
	ReadOnly: true, Idempotent: true, OpenWorld: false,
}

func (h *handlers) assessImpact(ctx context.Context, in ImpactIn) (*ImpactOut, string, error) {
	asset := in.Asset
	switch {
	case in.Subject != "" && in.Asset != "":
		return nil, "", fmt.Errorf("give subject or asset, not both")
	case in.Subject != "":
		asset = "schema://" + in.Subject
	case in.Asset == "":
		return nil, "", fmt.Errorf("give subject (e.g. api-usage-value) or asset (e.g. duckdb://usage.usage_hourly)")
	}
	g, err := h.d.Graph(ctx)
	if err != nil {
		return nil, "", err
	}
	br, err := g.BlastRadius(ctx, lineage.BlastParams{Asset: asset, Columns: in.Fields, Limit: 10000})
	if err != nil {
		return nil, "", err
	}
	out := &ImpactOut{Asset: br.Asset, Fields: append([]string{}, in.Fields...), Total: br.Total, CountsByKind: br.CountsByKind,
		Owners: []OwnerToAsk{}, Unowned: []string{}, Outbound: []OutboundJob{}, Partial: br.Partial, Budget: br.Budget, NoColumnInfo: br.NoColumnLineage}
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
	var b strings.Builder
	fmt.Fprintf(&b, "%s reaches %d assets", out.Asset, out.Total)
	if len(in.Fields) > 0 {
		fmt.Fprintf(&b, " through %s", strings.Join(in.Fields, ", "))
	}
	if out.Partial {
		fmt.Fprintf(&b, " (partial: stopped by the %s budget)", out.Budget)
	}
	for _, o := range out.Owners {
		fmt.Fprintf(&b, "\n- ask %s: %s", o.Owner, strings.Join(o.Assets, ", "))
	}
	for _, j := range out.Outbound {
		fmt.Fprintf(&b, "\n- %s (%s) next run %s", j.Asset, strings.Join(j.Critical, ", "), orNone(j.NextRun))
	}
	return out, b.String(), nil
}
