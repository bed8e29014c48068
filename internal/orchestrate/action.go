package orchestrate

import (
	"strings"

	"github.com/dataworkers/dw/internal/approvals"
	"github.com/dataworkers/dw/internal/suggest"
)

// proposeKey stands in for the idempotency key when a run is only checked
// for a proposal; every system accepts it.
const proposeKey = "dw-proposal-check"

// ActionFor is the action an approval must bind to allow running target
// on system with params: the target (a Dagster job by name, its code
// location and repository in the location), the configured instance and
// every param. The proposer binds it into the proposal, and Dispatcher.Run
// builds it again for the request, so approvals can compare the two field
// by field. The request is checked as a trigger would check it.
func ActionFor(runners Runners, system, target string, params map[string]any) (*approvals.ActionSpec, error) {
	sys, ok := parseSystem(system)
	if !ok {
		return nil, invalid("unknown system %q; closest: %s (valid: %s)", system,
			strings.Join(suggest.Closest(system, systemNames(), 1), ", "), strings.Join(systemNames(), ", "))
	}
	target = strings.TrimSpace(target)
	if target == "" {
		return nil, invalid("target is empty: name the %s to run", targetNoun(sys))
	}
	runner, err := runners.get(sys)
	if err != nil {
		return nil, err
	}
	if err := exactNumbers(params); err != nil {
		return nil, err
	}
	if err := runner.Validate(RunRequest{Key: proposeKey, Target: target, Params: params}); err != nil {
		return nil, err
	}
	return actionSpec(runner, sys, target, params)
}

func actionSpec(runner Runner, sys System, target string, params map[string]any) (*approvals.ActionSpec, error) {
	name := target
	if sys == Dagster {
		t, err := parseDagsterTarget(target)
		if err != nil {
			return nil, err
		}
		name = t.job
	}
	return approvals.NewActionSpec(string(sys), name, AssetID(sys, target), runner.Location(target), params)
}
