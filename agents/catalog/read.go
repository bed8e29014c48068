package catalog

import (
	"context"
	"fmt"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/dataworkers/dw/internal/lineage"
	"github.com/dataworkers/dw/internal/mcpserver"
)

// walkRanges states the ranges of a walk's budgets, as the walk checks
// them (0 is the default).
func walkRanges(s *jsonschema.Schema) {
	mcpserver.Range(s, "max_depth", 0, lineage.MaxWalkDepth)
	mcpserver.Range(s, "max_assets", 0, lineage.MaxWalkAssets)
}

var blastRadiusTool = mcpserver.Tool{
	Name: "blast_radius_analysis",
	InputSchema: mcpserver.InputSchema[lineage.BlastParams](func(s *jsonschema.Schema) {
		walkRanges(s)
	}),
	Title: "Blast radius of a change",
	Description: "Lists everything downstream of an asset in the context graph (optionally only what reads given columns, where column lineage is known), " +
		"with distance, the path that reaches it, owners and domains; outbound, money, regulator and customer-facing assets and scheduled jobs with their next run come first, with counts by kind. " +
		"Depth, size and time budgets apply; an answer cut short says partial and which budget. Assets are paged (limit, default 50, at most 500; next_cursor); total and the counts cover everything reached. " +
		"Use it for the full list of what a broken or changing asset reaches; for who to ask before a schema change use assess_impact (dw-schema); for the platform-by-platform paths in either direction use trace_cross_platform_lineage.",
	ReadOnly: true, Idempotent: true, OpenWorld: false,
	Text: blastText,
}

// blastText renders the listed assets one a line, straight from the
// answer: the generic renderer marshals the answer to JSON and back to
// render it, a second encoding of the whole answer on every call, which
// through MCP cost a tenth of a warm blast radius on a small graph. The
// counts, owners and cursor are in the summary and the structured content.
func blastText(out any) string {
	r, ok := out.(*lineage.BlastResult)
	if !ok || len(r.Assets) == 0 {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "assets (%d of %d):\n", len(r.Assets), r.Total)
	for _, a := range r.Assets {
		fmt.Fprintf(&b, "- %s (%s, %d hop(s)", a.ID, a.Kind, a.Distance)
		if a.Owner != "" {
			b.WriteString(", owner " + a.Owner)
		}
		if len(a.Critical) > 0 {
			b.WriteString(", " + strings.Join(a.Critical, ", "))
		}
		if !a.NextRun.IsZero() {
			b.WriteString(", next run " + a.NextRun.Format("2006-01-02 15:04 MST"))
		}
		b.WriteString(")\n")
	}
	return b.String()
}

func (h *handlers) blastRadius(ctx context.Context, in lineage.BlastParams) (*lineage.BlastResult, string, error) {
	g, err := h.graph(ctx)
	if err != nil {
		return nil, "", err
	}
	res, err := g.BlastRadius(ctx, in)
	if err != nil {
		return nil, "", err
	}
	if res.CountsByKind == nil {
		res.CountsByKind = map[string]int{}
	}
	if res.Assets == nil {
		res.Assets = []lineage.ImpactedAsset{}
	}
	return res, res.Summary, nil
}

var traceTool = mcpserver.Tool{
	Name: "trace_cross_platform_lineage",
	InputSchema: mcpserver.InputSchema[lineage.TraceParams](func(s *jsonschema.Schema) {
		walkRanges(s)
		mcpserver.Range(s, "max_paths", 0, lineage.MaxTracePaths)
	}),
	Title: "Trace lineage across platforms",
	Description: "Follows the paths from an asset across platforms, upstream (where its data comes from), downstream (where it goes) or both, " +
		"e.g. Kafka topic -> Flink job -> warehouse table -> dbt model -> BI workbook -> reverse ETL sync, listing each path with the platforms it crosses (max_paths per direction, most cross-platform and longest first, with upstream_total and downstream_total; a path over 10 assets shows its first and last 5 and counts the rest). Nodes are paged (limit, default 50, at most 500; next_cursor) with nodes_total. " +
		"Use it to see how data flows (where an asset's data comes from, or the route it takes); for the ranked list of everything affected downstream use blast_radius_analysis, and for a schema change's owners to ask use assess_impact (dw-schema).",
	ReadOnly: true, Idempotent: true, OpenWorld: false,
}

func (h *handlers) trace(ctx context.Context, in lineage.TraceParams) (*lineage.TraceResult, string, error) {
	g, err := h.graph(ctx)
	if err != nil {
		return nil, "", err
	}
	res, err := g.Trace(ctx, in)
	if err != nil {
		return nil, "", err
	}
	return res, res.Summary, nil
}

var getLineageTool = mcpserver.Tool{
	Name:        "get_lineage",
	Title:       "An asset and its neighbours",
	Description: "Returns one asset of the context graph with everything recorded about it (kind, owner, domain, tags, schedule and next run, columns, SQL, aliases) and its direct upstream and downstream neighbours with the edges' column lineage, paged together (limit per list, default 50, at most 500; next_cursor) with upstream_total and downstream_total.",
	ReadOnly:    true, Idempotent: true, OpenWorld: false,
}

func (h *handlers) getLineage(ctx context.Context, in lineage.LineageParams) (*lineage.LineageResult, string, error) {
	g, err := h.graph(ctx)
	if err != nil {
		return nil, "", err
	}
	res, err := g.GetLineage(ctx, in)
	if err != nil {
		return nil, "", err
	}
	return res, res.Summary, nil
}

var searchAssetsTool = mcpserver.Tool{
	Name: "search_assets",
	InputSchema: mcpserver.InputSchema[lineage.SearchParams](func(s *jsonschema.Schema) {
		mcpserver.Items(s, "kinds", 0, lineage.MaxSearchFilter)
		mcpserver.Items(s, "tags", 0, lineage.MaxSearchFilter)
	}),
	Title:       "Search the context graph",
	Description: "Finds assets by words in their names, titles, descriptions, columns, tags, owners and domains, optionally only of some kinds or carrying some tags (e.g. outbound, money), ranked by relevance. Paged: limit (default 50, at most 500), next_cursor, total.",
	ReadOnly:    true, Idempotent: true, OpenWorld: false,
}

func (h *handlers) searchAssets(ctx context.Context, in lineage.SearchParams) (*lineage.SearchResult, string, error) {
	g, err := h.graph(ctx)
	if err != nil {
		return nil, "", err
	}
	res, err := g.SearchAssets(ctx, in)
	if err != nil {
		return nil, "", err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d assets found", res.Total)
	if len(res.Assets) < res.Total {
		fmt.Fprintf(&b, ", %d listed", len(res.Assets))
	}
	for i, hit := range res.Assets {
		if i == 20 {
			fmt.Fprintf(&b, "\n… and %d more on this page", len(res.Assets)-20)
			break
		}
		fmt.Fprintf(&b, "\n- %s (%s) owner %s", hit.ID, hit.Kind, orNone(hit.Owner))
	}
	if res.NextCursor != "" {
		b.WriteString("\nMore: pass next_cursor as cursor.")
	}
	if res.Truncated {
		b.WriteString("\nMore assets matched than were ranked: narrow the query.")
	}
	return res, b.String(), nil
}

// maxOwnerAssets bounds get_owners' list: each asset costs a walk upstream,
// and the answer holds one entry per asset.
const maxOwnerAssets = 100

var getOwnersTool = mcpserver.Tool{
	Name:        "get_owners",
	Title:       "Who owns these assets",
	Description: fmt.Sprintf("Names the owner and domain of each asset (at most %d per call); for an asset with no recorded owner, names the owner of the nearest owned asset upstream, who can usually answer for the data.", maxOwnerAssets),
	ReadOnly:    true, Idempotent: true, OpenWorld: false,
	InputSchema: mcpserver.InputSchema[lineage.OwnersParams](func(s *jsonschema.Schema) {
		a := s.Properties["assets"]
		a.MinItems, a.MaxItems = ptr(1), ptr(maxOwnerAssets)
		a.Description += fmt.Sprintf(": 1 to %d", maxOwnerAssets)
	}),
}

func ptr[T any](v T) *T { return &v }

func (h *handlers) getOwners(ctx context.Context, in lineage.OwnersParams) (*lineage.OwnersResult, string, error) {
	g, err := h.graph(ctx)
	if err != nil {
		return nil, "", err
	}
	res, err := g.Owners(ctx, in)
	if err != nil {
		return nil, "", err
	}
	var b strings.Builder
	for _, o := range res.Assets {
		owner := o.Owner
		if owner == "" && o.UpstreamOwner != "" {
			owner = "none recorded; upstream owner " + o.UpstreamOwner
		}
		fmt.Fprintf(&b, "- %s: %s\n", o.Asset, orNone(owner))
	}
	return res, strings.TrimSpace(b.String()), nil
}

func orNone(s string) string {
	if s == "" {
		return "none recorded"
	}
	return s
}
