package lineage_test

import (
	"context"
	"io"

	"github.com/dataworkers/dw/internal/lineage"
	"github.com/dataworkers/dw/internal/lineage/ingest"
)

func init() {
	lineage.ImportDBTForTest = func(ctx context.Context, g *lineage.Graph, r io.Reader) error {
		_, err := ingest.DBTManifest(ctx, g, r, ingest.DBTOptions{})
		return err
	}
}
