package remediate

import (
	"errors"
	"strings"
	"testing"

	"github.com/dataworkers/dw/internal/orchestrate"
)

// A run is bound against the runners the process holds (Env.Runners):
// they are asked for on each bind and never rebuilt from the config, and
// when they cannot be had the bind says why and binds nothing.
func TestBindUsesTheHeldRunners(t *testing.T) {
	f, inc := proposeFixture(t)
	held, err := orchestrate.NewRunners(f.cfg.Orchestrators)
	if err != nil {
		t.Fatal(err)
	}
	asked := 0
	f.env.Runners = func() (orchestrate.Runners, error) { asked++; return held, nil }
	// With the orchestrator gone from the config, only the held runners
	// can bind the run.
	f.cfg.Orchestrators.Airflow = nil
	b, err := Bind(f.ctx, f.env, f.graph(), inc, rerunSpec())
	if err != nil {
		t.Fatal(err)
	}
	if asked != 1 || b.Action == nil || b.Action.System != "airflow" || b.Action.Target != "rebuild_orders" {
		t.Fatalf("asked %d, action %+v", asked, b.Action)
	}

	f.env.Runners = func() (orchestrate.Runners, error) {
		return nil, errors.New("orchestrators in dw.yaml: airflow.url is not a URL")
	}
	if _, err := Bind(f.ctx, f.env, f.graph(), inc, rerunSpec()); err == nil || !strings.Contains(err.Error(), "airflow.url is not a URL") {
		t.Errorf("runners that cannot be built: %v", err)
	}
}
