package checks

import (
	"context"
	"fmt"

	"github.com/dataworkers/dw/internal/clock"
	"github.com/dataworkers/dw/internal/lineage"
	"github.com/dataworkers/dw/internal/lineage/ingest"
	"github.com/dataworkers/dw/internal/store"
)

// DBTImport is a dbt manifest imported whole: the graph import and the
// expectations its tests became.
type DBTImport struct {
	ingest.DBTImportResult
	Expectations DBTRecord `json:"expectations" jsonschema:"quality expectations recorded from the manifest's dbt tests (source dbt)"`
}

// ImportDBT imports a dbt manifest into the context graph and records its
// tests as expectations (RecordDBTTests) for the configured warehouses of
// each test's platform (warehouses maps a platform such as duckdb to their
// names). Everything that can be refused is refused before anything is
// written: the manifest is parsed once, whole, for both its graph and its
// tests, before anything is written. The expectations are written inside the
// transaction that makes the graph import visible (ingest.DBTOptions.InSwap:
// the import's one transaction, or its staged swap), so the two commit
// together or not at all: a failed import leaves the old graph and the old
// expectations as they were.
func ImportDBT(ctx context.Context, g *lineage.Graph, data []byte, opts ingest.DBTOptions, warehouses map[string][]string, clk clock.Clock) (*DBTImport, error) {
	pm, err := ingest.ParseDBTManifest(data)
	if err != nil {
		return nil, err
	}
	tests, skipped := pm.Tests()
	at := clk.Now()
	var rec *DBTRecord
	opts.InSwap = func(tx *store.Tx, project string) error {
		var err error
		if rec, err = recordDBTTests(ctx, tx, project, warehouses, tests, at); err != nil {
			return fmt.Errorf("record the dbt tests as expectations (nothing was imported): %w", err)
		}
		return nil
	}
	res, err := pm.Import(ctx, g, opts)
	if err != nil {
		return nil, err
	}
	if res.Counts == nil {
		res.Counts = map[string]int{}
	}
	rec.Notes = append(rec.Notes, skipped...)
	return &DBTImport{DBTImportResult: *res, Expectations: *rec}, nil
}
