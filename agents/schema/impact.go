package schema

import (
	"context"
	"fmt"
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

// OwnerToAsk and OutboundJob are lineage's.
type (
	OwnerToAsk  = lineage.OwnerToAsk
	OutboundJob = lineage.OutboundJob
)

// summaryItems is how many owners and critical jobs a summary names.
const summaryItems = 10

// ImpactOut is lineage's impact, answered as is. It is a type of the
// agent's own (not an alias) because the tool's listed schemas are keyed
// by its output type's name.
type ImpactOut lineage.Impact

var assessImpactTool = mcpserver.Tool{
	Name:  "assess_impact",
	Title: "Size a schema change downstream",
	Description: "Sizes what a change to a schema subject or asset (optionally only some fields) reaches downstream in the context graph: counts by kind, " +
		"the owners to ask with their assets, assets with no recorded owner, and outbound, money, regulator and customer-facing jobs with their next runs. " +
		"Every count covers all that is reached; the lists name the first 50 owners (10 assets each), unowned assets and critical jobs, with their totals. " +
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
	imp, err := g.Impact(ctx, asset, in.Fields)
	if err != nil {
		return nil, "", err
	}
	out := (*ImpactOut)(imp)
	var b strings.Builder
	fmt.Fprintf(&b, "%s reaches %d assets", out.Asset, out.Total)
	if len(in.Fields) > 0 {
		fmt.Fprintf(&b, " through %s", strings.Join(in.Fields, ", "))
	}
	if out.Partial {
		fmt.Fprintf(&b, " (partial: stopped by the %s budget)", out.Budget)
	}
	if out.IndexLoadMS > 0 {
		fmt.Fprintf(&b, " (this call first loaded the graph's traversal index: %.0f ms)", out.IndexLoadMS)
	}
	// The summary names the first owners and critical jobs; the answer
	// lists more, and blast_radius_analysis pages every asset.
	for i, o := range out.Owners {
		if i == summaryItems {
			fmt.Fprintf(&b, "\n… %d owners in all (owners lists %d)", out.OwnersTotal, len(out.Owners))
			break
		}
		more := ""
		if o.AssetsTotal > len(o.Assets) {
			more = fmt.Sprintf(" and %d more", o.AssetsTotal-len(o.Assets))
		}
		fmt.Fprintf(&b, "\n- ask %s: %s%s", o.Owner, strings.Join(o.Assets, ", "), more)
	}
	for i, j := range out.Outbound {
		if i == summaryItems {
			fmt.Fprintf(&b, "\n… %d outbound, money, regulator and customer-facing assets in all", out.OutboundTotal)
			break
		}
		fmt.Fprintf(&b, "\n- %s (%s) next run %s", j.Asset, strings.Join(j.Critical, ", "), orNone(j.NextRun))
	}
	if out.OwnersTotal > len(out.Owners) || out.OutboundTotal > len(out.Outbound) || out.UnownedTotal > len(out.Unowned) {
		fmt.Fprintf(&b, "\nEvery asset reached, with its owner: blast_radius_analysis (dw-context-catalog) pages them.")
	}
	return out, b.String(), nil
}
