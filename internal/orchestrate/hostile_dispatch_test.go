package orchestrate_test

import (
	"errors"
	"testing"
	"time"

	"github.com/dataworkers/dw/internal/orchestrate"
	"github.com/dataworkers/dw/internal/store"
	"github.com/dataworkers/dw/internal/store/storetest"
)

// TestDispatchRefusesHostileTargets: at dispatch, with or without a
// proposal, a target its system's rule refuses (a parent directory, an
// escaped one, a slash, a query, a fragment, a space) is an input error
// and reaches no orchestrator.
func TestDispatchRefusesHostileTargets(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		f := newFixture(t, db, 5*time.Second)
		hostile := map[orchestrate.System][]string{
			orchestrate.Airflow:       {"..", ".", "%2e%2e", "../" + airflowDAG, airflowDAG + "/..", airflowDAG + "?x=1", airflowDAG + "#x", "sync metered"},
			orchestrate.Dagster:       {"billing_location/../refresh_usage", "../__repository__/refresh_usage", "billing_location/__repository__/refresh_usage?x", "billing_location/__repository__/refresh usage"},
			orchestrate.DBTCloud:      {"40000/..", "..", "40000?x", "40000#x", "4 0000"},
			orchestrate.StepFunctions: {stateMachine + "/..", stateMachine + "?x", stateMachine + "#x"},
		}
		for _, sys := range systems {
			approved := f.approved(sys)
			for _, target := range hostile[sys.name] {
				for _, a := range []orchestrate.Approval{{ProposalID: approved.ID}, {RequestKey: "INC-1-hostile"}} {
					_, err := f.d.Run(f.ctx, orchestrate.Params{Approval: a, System: sys.name, Target: target, Params: sys.params})
					var ie *orchestrate.InputError
					if !errors.As(err, &ie) {
						t.Errorf("%s %q (proposal %q): want an input error, got %v", sys.name, target, a.ProposalID, err)
					}
				}
			}
			if n := sys.trigger(f.srv); n != 0 {
				t.Errorf("%s: %d triggers reached the server", sys.name, n)
			}
		}
	})
}
