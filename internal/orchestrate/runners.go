package orchestrate

import (
	"fmt"
	"sort"
	"strings"

	"github.com/dataworkers/dw/internal/config"
)

// Runners are the configured orchestrators, by system.
type Runners map[System]Runner

// NewRunners builds a runner for every orchestrator the config names. It
// reads no secret and calls no system: credentials are read per call, so
// a missing variable is reported when a run needs it.
func NewRunners(o config.Orchestrators) (Runners, error) {
	rs := Runners{}
	var errs []string
	add := func(r Runner, err error) {
		if err != nil {
			errs = append(errs, err.Error())
			return
		}
		rs[r.System()] = r
	}
	if o.Dagster != nil {
		add(NewDagsterRunner(o.Dagster))
	}
	if o.Airflow != nil {
		add(NewAirflowRunner(o.Airflow))
	}
	if o.DBTCloud != nil {
		add(NewDBTCloudRunner(o.DBTCloud))
	}
	if o.StepFunctions != nil {
		add(NewStepFunctionsRunner(o.StepFunctions))
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("orchestrators: %s", strings.Join(errs, "; "))
	}
	return rs, nil
}

// get returns the runner for a system, or an error naming what is configured.
func (rs Runners) get(s System) (Runner, error) {
	if r, ok := rs[s]; ok {
		return r, nil
	}
	var have []string
	for k := range rs {
		have = append(have, string(k))
	}
	sort.Strings(have)
	configured := "none is configured"
	if len(have) > 0 {
		configured = "configured: " + strings.Join(have, ", ")
	}
	return nil, invalid("no %s orchestrator is configured (%s); add orchestrators.%s with its url to dw.yaml", s, configured, s)
}
