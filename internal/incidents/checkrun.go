package incidents

import (
	"context"
	"fmt"

	"github.com/dataworkers/dw/internal/checks"
)

// AssetResolver names an asset as the context graph does (lineage.Graph
// fits): a dbt source of a table and the table are one asset there.
type AssetResolver interface {
	Resolve(ctx context.Context, ref string) (string, error)
}

// CheckRunParams says how a check's findings are reported.
type CheckRunParams struct {
	// NoIncident keeps the check from opening or joining an incident (a
	// backfill of history, a dry look).
	NoIncident bool
	// Actor reports the symptoms, for the timeline.
	Actor string
	// Names canonicalizes the table's asset id, so an incident on it meets
	// its lineage; nil, or an id it cannot resolve, keeps the check's id.
	Names AssetResolver
}

// CheckRun is a quality check's report and the incidents its failed and
// anomalous results opened or joined.
type CheckRun struct {
	Report *checks.Report
	// Asset is the checked table as the context graph names it (the
	// report's id under NoIncident, which resolves nothing).
	Asset string
	// Symptoms are what was reported on Asset: one per failed or
	// anomalous result.
	Symptoms  []Symptom
	Incidents []IncidentRef
}

// RunCheck runs a quality check and reports what it found: its failed and
// anomalous results become symptoms on the table (as the context graph
// names it), which open or join incidents. A check that ran but whose
// findings could not be reported is an error that says so (its metric
// points are already recorded).
func (s *Service) RunCheck(ctx context.Context, env checks.Env, req checks.CheckRequest, p CheckRunParams) (*CheckRun, error) {
	rep, err := checks.RunCheck(ctx, env, req)
	if err != nil {
		return nil, err
	}
	out := &CheckRun{Report: rep, Asset: rep.Asset, Incidents: []IncidentRef{}}
	if p.NoIncident {
		return out, nil
	}
	asset := rep.Asset
	if p.Names != nil {
		if got, err := p.Names.Resolve(ctx, asset); err == nil && got != "" {
			asset = got
		}
	}
	symptoms := CheckSymptoms(rep, asset)
	out.Asset = asset
	if len(symptoms) == 0 {
		return out, nil
	}
	res, err := s.ReportSymptoms(ctx, ReportParams{Symptoms: symptoms, Actor: p.Actor})
	if err != nil {
		return nil, fmt.Errorf("the check ran but reporting its findings failed: %w", err)
	}
	out.Symptoms, out.Incidents = symptoms, res.Incidents
	return out, nil
}
