package incidents

import (
	"context"
	"fmt"
	"strings"

	"github.com/dataworkers/dw/internal/incidents"
	"github.com/dataworkers/dw/internal/remediate"
)

// bindReplacement checks a proposal's "replaces A with B" and records the
// canonical pair in its details, which the approval seals with the rest of
// the proposal, and says it first in its why, which the approver reads in
// every request: approving it is approving that verification reads B.
func (h *handlers) bindReplacement(ctx context.Context, e *env, inc *incidents.Incident, spec *ProposalSpec, details map[string]any) error {
	if _, ok := details[remediate.DetailReplacement]; ok {
		return fmt.Errorf("details.%s is written from replaces, so the approval seals a checked pair: give replaces {asset, with} instead", remediate.DetailReplacement)
	}
	if spec.Replaces == nil {
		return nil
	}
	if _, ok := details[detailVerifyTable]; ok {
		return fmt.Errorf("give the replacement once: replaces {asset, with} or details.%s, not both", detailVerifyTable)
	}
	r, err := remediate.CheckReplacement(ctx, h.remediateEnv(e), inc, *spec.Replaces, e.graph)
	if err != nil {
		return err
	}
	details[remediate.DetailReplacement] = map[string]any{"asset": r.Asset, "with": r.With}
	said := fmt.Sprintf("Replaces %s with %s: once approved, remediate reads %s for the checks and metrics of %s", r.Asset, r.With, r.With, r.Asset)
	if w := strings.TrimSpace(spec.Why); w != "" {
		said += ". " + w
	}
	spec.Why = said
	return nil
}
