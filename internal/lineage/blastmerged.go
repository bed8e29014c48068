package lineage

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
)

// MergedBlast is what several assets reach downstream together, as one
// list: the blast radius of an incident's symptomatic assets.
type MergedBlast struct {
	From       []string        `json:"from" jsonschema:"the symptomatic assets it was computed from (canonical ids)"`
	Assets     []ImpactedAsset `json:"assets" jsonschema:"assets downstream: critical (outbound, money, regulator, customer-facing) and scheduled first, soonest run first, then by distance"`
	Critical   int             `json:"critical" jsonschema:"critical assets among them"`
	Scheduled  int             `json:"scheduled" jsonschema:"scheduled jobs among them"`
	More       bool            `json:"more" jsonschema:"true when more assets are reached than listed"`
	NotInGraph []string        `json:"not_in_graph,omitempty" jsonschema:"symptomatic assets the catalog does not know"`
	Summary    string          `json:"summary" jsonschema:"the blast radius in words"`
}

const (
	// mergedPerSource is how many assets each source's walk lists: enough
	// that the merged list's first mergedListed are the most critical.
	mergedPerSource = 100
	// mergedListed is how many assets the merged list keeps.
	mergedListed = 50
)

// MergedBlastRadius walks downstream of each asset and merges the walks:
// an asset reached from two sources is listed once, at its nearest
// distance; two names of one asset are walked once; assets the graph does
// not know are named in NotInGraph rather than failing the rest. The list
// is critical first, then scheduled (soonest run first), then by distance,
// at most 50 with More set when there were more; Summary says it in words,
// critical assets with their next run and owner.
func (g *Graph) MergedBlastRadius(ctx context.Context, assets []string) (*MergedBlast, error) {
	br := &MergedBlast{From: []string{}, Assets: []ImpactedAsset{}}
	byID := map[string]int{}
	for _, a := range assets {
		res, err := g.BlastRadius(ctx, BlastParams{Asset: a, Limit: mergedPerSource})
		if errors.Is(err, ErrUnknownAsset) {
			br.NotInGraph = append(br.NotInGraph, a)
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("blast radius of %s: %w", a, err)
		}
		if slices.Contains(br.From, res.Asset) {
			continue // another name of an asset already walked
		}
		br.From = append(br.From, res.Asset)
		if res.Total > len(res.Assets) || res.Partial {
			br.More = true
		}
		for _, ia := range res.Assets {
			if i, ok := byID[ia.ID]; ok {
				if ia.Distance < br.Assets[i].Distance {
					br.Assets[i] = ia
				}
				continue
			}
			byID[ia.ID] = len(br.Assets)
			br.Assets = append(br.Assets, ia)
		}
	}
	sort.SliceStable(br.Assets, func(i, j int) bool {
		a, b := br.Assets[i], br.Assets[j]
		if ca, cb := len(a.Critical) > 0, len(b.Critical) > 0; ca != cb {
			return ca
		}
		if sa, sb := !a.NextRun.IsZero(), !b.NextRun.IsZero(); sa != sb {
			return sa
		} else if sa && !a.NextRun.Equal(b.NextRun) {
			return a.NextRun.Before(b.NextRun)
		}
		if a.Distance != b.Distance {
			return a.Distance < b.Distance
		}
		return a.ID < b.ID
	})
	if len(br.Assets) > mergedListed {
		br.Assets, br.More = br.Assets[:mergedListed], true
	}
	var crit []string
	for _, a := range br.Assets {
		if len(a.Critical) > 0 {
			br.Critical++
			line := fmt.Sprintf("%s [%s]", a.ID, strings.Join(a.Critical, ", "))
			if !a.NextRun.IsZero() {
				line += " next run " + a.NextRun.UTC().Format("2006-01-02 15:04 UTC")
			}
			if a.Owner != "" {
				line += " (owner " + a.Owner + ")"
			}
			crit = append(crit, line)
		}
		if !a.NextRun.IsZero() {
			br.Scheduled++
		}
	}
	var b strings.Builder
	switch {
	case len(br.From) == 0:
		fmt.Fprintf(&b, "Blast radius unknown: the catalog does not know %s; record its lineage (dw-context-catalog record_lineage).", strings.Join(assets, ", "))
	case len(br.Assets) == 0:
		fmt.Fprintf(&b, "Blast radius: nothing recorded downstream of %s.", strings.Join(br.From, ", "))
	default:
		more := ""
		if br.More {
			more = " (more not listed)"
		}
		fmt.Fprintf(&b, "Blast radius: %d asset(s) downstream of %s%s", len(br.Assets), strings.Join(br.From, ", "), more)
		if len(crit) > 0 {
			fmt.Fprintf(&b, "; critical: %s", strings.Join(crit, "; "))
		}
		var others []string
		for _, a := range br.Assets {
			if len(a.Critical) == 0 {
				others = append(others, a.ID)
			}
		}
		if len(others) > 0 {
			fmt.Fprintf(&b, "; also %s", strings.Join(others, ", "))
		}
		b.WriteString(".")
	}
	br.Summary = b.String()
	return br, nil
}
