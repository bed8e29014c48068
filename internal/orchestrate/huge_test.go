package orchestrate_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/dataworkers/dw/internal/config"
	"github.com/dataworkers/dw/internal/orchestrate"
	"github.com/dataworkers/dw/internal/rest/resttest"
)

// An orchestrator answering 1 GiB, as a success or as an error, costs at
// most the cap: reading a run's status fails as too large instead of
// exhausting memory, for every REST runner.
func TestHugeAnswerIsBounded(t *testing.T) {
	t.Setenv("DW_TEST_ORCH_TOKEN", "t")
	for _, status := range []int{http.StatusOK, http.StatusInternalServerError} {
		srv := resttest.HugeServer(t, status)
		svc := &config.Service{URL: srv.URL, Timeout: 20 * time.Second, TokenEnv: "DW_TEST_ORCH_TOKEN", AccountID: "1"}
		airflow, err := orchestrate.NewAirflowRunner(svc)
		if err != nil {
			t.Fatal(err)
		}
		dbt, err := orchestrate.NewDBTCloudRunner(svc)
		if err != nil {
			t.Fatal(err)
		}
		dagster, err := orchestrate.NewDagsterRunner(svc)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			name string
			call func() error
		}{
			{"airflow", func() error {
				_, err := airflow.Status(context.Background(), orchestrate.RunRef{Target: "dag", RunID: "run"})
				return err
			}},
			{"dbt_cloud", func() error {
				_, err := dbt.Status(context.Background(), orchestrate.RunRef{Target: "1", RunID: "2"})
				return err
			}},
			{"dagster", func() error {
				_, err := dagster.Status(context.Background(), orchestrate.RunRef{Target: "job", RunID: "0b1c2d3e-0000-0000-0000-000000000000"})
				return err
			}},
		} {
			t.Run(c.name, func(t *testing.T) { resttest.RequireBounded(t, 4*orchestrate.MaxResponseBytes, c.call) })
		}
	}
}
