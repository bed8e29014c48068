package checks

import (
	"bytes"
	"context"
	"fmt"

	"github.com/dataworkers/dw/internal/clock"
	"github.com/dataworkers/dw/internal/lineage"
	"github.com/dataworkers/dw/internal/lineage/ingest"
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
// written: the tests are read first, and the graph import parses the whole
// manifest before its one atomic write, so a manifest that cannot be read
// changes nothing. The expectations are written after the graph, in their
// own transaction: both writes are idempotent, so if that last write fails
// (the error says the graph was imported) importing the same manifest
// again completes it and changes nothing else.
func ImportDBT(ctx context.Context, g *lineage.Graph, data []byte, opts ingest.DBTOptions, warehouses map[string][]string, clk clock.Clock) (*DBTImport, error) {
	tests, skipped, err := ingest.ReadDBTTests(bytes.NewReader(data))
	if err != nil {
		return nil, err
	}
	res, err := ingest.DBTManifest(ctx, g, bytes.NewReader(data), opts)
	if err != nil {
		return nil, err
	}
	if res.Counts == nil {
		res.Counts = map[string]int{}
	}
	rec, err := RecordDBTTests(ctx, g.DB(), res.Project, warehouses, tests, clk.Now())
	if err != nil {
		return nil, fmt.Errorf("the graph was imported, but the dbt tests were not recorded as expectations: %w", err)
	}
	rec.Notes = append(rec.Notes, skipped...)
	return &DBTImport{DBTImportResult: *res, Expectations: *rec}, nil
}
