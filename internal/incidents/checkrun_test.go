package incidents

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/dataworkers/dw/internal/checks"
	"github.com/dataworkers/dw/internal/store/storetest"
	"github.com/dataworkers/dw/internal/warehouse/duckdb"
)

// mapNames resolves the ids it has and fails on the rest.
type mapNames map[string]string

func (m mapNames) Resolve(_ context.Context, ref string) (string, error) {
	if got, ok := m[ref]; ok {
		return got, nil
	}
	return "", errors.New("unknown asset")
}

// ordersWarehouse is a table whose declared key repeats: a check fails.
func ordersWarehouse(t *testing.T) *duckdb.Warehouse {
	t.Helper()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "orders.duckdb")
	db, err := duckdb.OpenWrite(ctx, path, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{`CREATE SCHEMA shop`, `CREATE TABLE shop.orders (order_id BIGINT, amount DOUBLE)`,
		`INSERT INTO shop.orders VALUES (1, 2.5), (2, 3.0), (2, 3.0), (3, 1.0)`} {
		if _, err := db.ExecContext(ctx, s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	wh, err := duckdb.Open("test", path, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { wh.Close() })
	return wh
}

func TestRunCheckReportsFindingsOnTheCanonicalAsset(t *testing.T) {
	wh := ordersWarehouse(t)
	db := storetest.SQLite(t)
	ctx := context.Background()
	s, clk := newService(t, db, time.Date(2026, 3, 10, 9, 0, 0, 0, time.UTC), nil)
	env := checks.Env{DB: db, Warehouse: wh, Clock: clk, Agent: "test", Tool: "run_quality_check"}
	if _, err := checks.SetExpectations(ctx, env, checks.ExpectationsRequest{Table: "shop.orders", Expectations: checks.Expectations{Key: []string{"order_id"}}}); err != nil {
		t.Fatal(err)
	}
	req := checks.CheckRequest{Table: "shop.orders"}
	names := mapNames{"duckdb://shop.orders": "duckdb://warehouse.shop.orders"}

	// A dry look: the failure is in the report, and no incident.
	dry, err := s.RunCheck(ctx, env, req, CheckRunParams{NoIncident: true, Actor: "test", Names: names})
	if err != nil {
		t.Fatal(err)
	}
	if dry.Report.Status != checks.Fail || dry.Incidents == nil || len(dry.Incidents) != 0 || len(dry.Symptoms) != 0 || dry.Asset != "duckdb://shop.orders" {
		t.Fatalf("dry run: status %s incidents %+v", dry.Report.Status, dry.Incidents)
	}

	run, err := s.RunCheck(ctx, env, req, CheckRunParams{Actor: "test", Names: names})
	if err != nil {
		t.Fatal(err)
	}
	if len(run.Incidents) != 1 || !run.Incidents[0].Opened {
		t.Fatalf("the failed key should open an incident (the dry run opened none): %+v", run.Incidents)
	}
	if run.Asset != "duckdb://warehouse.shop.orders" || len(run.Symptoms) == 0 {
		t.Fatalf("reported on %q: %+v", run.Asset, run.Symptoms)
	}
	for _, sym := range run.Symptoms {
		if sym.Asset != run.Asset {
			t.Errorf("symptom on %q, want %q", sym.Asset, run.Asset)
		}
	}
	inc, err := s.GetIncident(ctx, run.Incidents[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(inc.Assets) != 1 || inc.Assets[0] != "duckdb://warehouse.shop.orders" {
		t.Errorf("the incident should be on the graph's name for the table: %v", inc.Assets)
	}

	// The same failure an hour later joins the incident.
	clk.Advance(time.Hour)
	again, err := s.RunCheck(ctx, env, req, CheckRunParams{Actor: "test", Names: names})
	if err != nil {
		t.Fatal(err)
	}
	if len(again.Incidents) != 1 || again.Incidents[0].Opened || again.Incidents[0].ID != run.Incidents[0].ID {
		t.Fatalf("again: %+v", again.Incidents)
	}

	// A resolver that does not know the table keeps the check's id: the
	// symptom is on another asset as far as incidents can tell.
	other, err := s.RunCheck(ctx, env, req, CheckRunParams{Actor: "test", Names: mapNames{}})
	if err != nil {
		t.Fatal(err)
	}
	if len(other.Incidents) != 1 || other.Incidents[0].ID == run.Incidents[0].ID {
		t.Fatalf("unresolved: %+v", other.Incidents)
	}
	if inc, err := s.GetIncident(ctx, other.Incidents[0].ID); err != nil || len(inc.Assets) != 1 || inc.Assets[0] != "duckdb://shop.orders" {
		t.Errorf("unresolved incident assets: %+v %v", inc, err)
	}

	// A table the warehouse does not have: the check's error, nothing reported.
	if _, err := s.RunCheck(ctx, env, checks.CheckRequest{Table: "shop.nope"}, CheckRunParams{Actor: "test"}); err == nil {
		t.Error("a missing table should be an error")
	}
}
