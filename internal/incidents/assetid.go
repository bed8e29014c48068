package incidents

import (
	"context"
	"errors"
	"strings"

	"github.com/dataworkers/dw/internal/changelog"
	"github.com/dataworkers/dw/internal/lineage"
)

// AssetNamer knows every spelling of an asset: a check names a table
// duckdb://sales.orders, the catalog duckdb://warehouse.sales.orders, dbt
// dbt://model.shop.orders, a person sales.orders. A Graph that implements it
// (LineageGraph given the configured warehouses) makes incidents store one
// id per asset, the one proposals, domains and receipts use (lineage's
// Identities), and find them under any spelling.
type AssetNamer interface {
	// Identify returns the identity of what ref names; a spelling that
	// fits several assets is a *lineage.AmbiguousError.
	Identify(ctx context.Context, ref string) (lineage.Identity, error)
}

// assetID is the id an incident records for a reported asset: its one id
// when it can be told, else the spelling as given (case-folded), so a
// symptom is never lost over a name.
func (s *Service) assetID(ctx context.Context, field, a string) (string, error) {
	a, err := changelog.CleanAsset(field, a)
	if err != nil {
		return "", err
	}
	if n, ok := s.Graph.(AssetNamer); ok {
		it, err := n.Identify(ctx, a)
		var amb *lineage.AmbiguousError
		switch {
		case err == nil:
			return it.ID, nil
		case errors.As(err, &amb) || errors.Is(err, lineage.ErrUnknownAsset):
		default:
			return "", err
		}
	}
	if strings.Contains(a, "://") {
		if c, err := lineage.CanonicalID(a); err == nil {
			return c, nil
		}
	}
	return a, nil
}

// assetSpellings is every name records on the asset a lookup means may
// carry, its one id first. A spelling that fits several assets is refused
// with them listed.
func (s *Service) assetSpellings(ctx context.Context, field, a string) ([]string, error) {
	a, err := changelog.CleanAsset(field, a)
	if err != nil {
		return nil, err
	}
	out := []string{}
	if n, ok := s.Graph.(AssetNamer); ok {
		it, err := n.Identify(ctx, a)
		var amb *lineage.AmbiguousError
		switch {
		case err == nil:
			out = append(out, it.Names...)
		case errors.As(err, &amb):
			return nil, invalid("%s: %v", field, err)
		case !errors.Is(err, lineage.ErrUnknownAsset):
			return nil, err
		}
	}
	if c, err := lineage.CanonicalID(a); err == nil && strings.Contains(a, "://") {
		out = appendNew(out, c)
	}
	return appendNew(out, a), nil
}

func appendNew(list []string, s string) []string {
	for _, x := range list {
		if x == s {
			return list
		}
	}
	return append(list, s)
}
