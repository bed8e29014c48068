package incidents

import (
	"context"

	"github.com/dataworkers/dw/internal/lineage"
)

// DiagnoseWithBlastRadius diagnoses an incident (Diagnose) and reads what
// its symptomatic assets reach downstream in g together, the blast radius
// a person weighs the causes and the holds against.
func (s *Service) DiagnoseWithBlastRadius(ctx context.Context, g *lineage.Graph, p DiagnoseParams) (*Diagnosis, *lineage.MergedBlast, error) {
	d, err := s.Diagnose(ctx, p)
	if err != nil {
		return nil, nil, err
	}
	br, err := g.MergedBlastRadius(ctx, d.Assets)
	if err != nil {
		return nil, nil, err
	}
	return d, br, nil
}
