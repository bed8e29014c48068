package remediate

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/dataworkers/dw/internal/incidents"
)

// A metric's definition decides what verification reads: define_metric on
// an existing name after an incident's onset can turn a failing re-run
// into a passing one (or the reverse) without the fix changing anything.
// So every verification records the definition of each metric it computed
// or judged with (its SQL's SHA-256, when and by whom it was defined), and
// one redefined after the onset is stated with the verdict and in the
// receipt, so nobody reads "verified" without knowing the yardstick moved.

// MetricUsed is the definition of a metric a verification computed or
// judged with.
type MetricUsed struct {
	Name      string    `json:"name" jsonschema:"metric name"`
	Asset     string    `json:"asset" jsonschema:"asset the metric describes"`
	Source    string    `json:"source" jsonschema:"sql or pushed"`
	SQLSHA256 string    `json:"sql_sha256,omitempty" jsonschema:"SHA-256 of the SQL it was computed with, in hex (sql metrics)"`
	DefinedAt time.Time `json:"defined_at" jsonschema:"when this definition was made (the metric's updated_at)"`
	DefinedBy string    `json:"defined_by,omitempty" jsonschema:"who made it, when known"`
	// RedefinedAfterOnset: the metric existed before and its definition
	// changed after the incident's onset; the verdict judges the new one.
	RedefinedAfterOnset bool `json:"redefined_after_onset,omitempty" jsonschema:"its definition changed after the incident's onset: the verdict judges the new definition, not the one the symptom fired under"`
}

// involve records a metric definition the verification uses, once.
func (v *verifier) involve(def *incidents.MetricDefinition) {
	if slices.ContainsFunc(v.used, func(m MetricUsed) bool { return m.Name == def.Name }) {
		return
	}
	m := MetricUsed{Name: def.Name, Asset: def.Asset, Source: def.Source, DefinedAt: def.UpdatedAt.UTC(), DefinedBy: def.DefinedBy,
		RedefinedAfterOnset: def.UpdatedAt.After(def.CreatedAt) && def.UpdatedAt.After(v.inc.Onset)}
	if def.Source == incidents.SourceSQL {
		sum := sha256.Sum256([]byte(def.SQL))
		m.SQLSHA256 = hex.EncodeToString(sum[:])
	}
	v.used = append(v.used, m)
}

// metricsUsed are the definitions used, by name.
func (v *verifier) metricsUsed() []MetricUsed {
	out := slices.Clone(v.used)
	slices.SortFunc(out, func(a, b MetricUsed) int { return strings.Compare(a.Name, b.Name) })
	if out == nil {
		out = []MetricUsed{}
	}
	return out
}

// caveats say, for the verdict, each metric redefined after the onset:
// when, by whom and what the verdict judged.
func (v *verifier) caveats() []string {
	var out []string
	for _, m := range v.metricsUsed() {
		if !m.RedefinedAfterOnset {
			continue
		}
		what := "its new definition"
		if m.SQLSHA256 != "" {
			what = "its new SQL (sha256 " + m.SQLSHA256[:12] + "…)"
		}
		out = append(out, fmt.Sprintf("metric %s was redefined at %s by %s, after the incident's onset at %s: this verdict judges %s, not the definition the symptom fired under",
			m.Name, m.DefinedAt.Format("2006-01-02 15:04 UTC"), orDefault(m.DefinedBy, "a caller who was not recorded"),
			v.inc.Onset.UTC().Format("2006-01-02 15:04 UTC"), what))
	}
	return out
}
