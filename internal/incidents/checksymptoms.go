package incidents

import "github.com/dataworkers/dw/internal/checks"

// CheckSymptoms turns a quality check's failed and anomalous results into
// symptoms on asset (the table as the context graph names it). Both
// run_quality_check and the scheduled routines report checks through it,
// so a check finds the same incident whoever ran it.
func CheckSymptoms(rep *checks.Report, asset string) []Symptom {
	var out []Symptom
	for _, r := range rep.Results {
		if r.Status != checks.Fail && r.Status != checks.Anomalous {
			continue
		}
		s := Symptom{Kind: checkSymptomKind(r), Asset: asset, Metric: r.Metric, Column: checkColumn(r),
			At: rep.ObservedAt, Source: "run_quality_check", Detail: r.Message}
		if r.Observed != nil {
			s.Observed = *r.Observed
		}
		if r.Expected != nil {
			s.ExpectedLow, s.ExpectedHigh = r.Expected.Low, r.Expected.High
			s.Expected = (r.Expected.Low + r.Expected.High) / 2
		}
		// The symptom starts at the first bucket that is not a pass.
		for _, b := range r.Buckets {
			if b.Status == checks.Fail || b.Status == checks.Anomalous {
				s.At = b.Start
				// The bucket's end bounds the onset (see Incident.OnsetEnd).
				if rep.Window != nil && rep.Window.Grain.Duration() > 0 {
					s.Until = b.Start.Add(rep.Window.Grain.Duration())
				}
				break
			}
		}
		out = append(out, s)
	}
	return out
}

func checkSymptomKind(r checks.MetricResult) SymptomKind {
	switch r.Problem {
	case checks.ProblemVolume:
		return SymptomVolume
	case checks.ProblemNulls:
		return SymptomNulls
	case checks.ProblemUniqueness:
		return SymptomUniqueness
	case checks.ProblemFreshness:
		// Both of a load lag check's metrics (average and p95) are load
		// lag: verification re-runs the lag check for them, not the
		// table's staleness.
		if r.Metric == checks.MetricLagAvg || r.Metric == checks.MetricLagP95 {
			return SymptomLoadLag
		}
		return SymptomFreshness
	}
	return SymptomValue
}

func checkColumn(r checks.MetricResult) string {
	if r.Problem == checks.ProblemNulls || r.Problem == checks.ProblemValues {
		return r.Dimension
	}
	return ""
}
