package incidents

import (
	"context"
	"testing"
	"time"

	"github.com/dataworkers/dw/internal/changelog"
	"github.com/dataworkers/dw/internal/clock"
	"github.com/dataworkers/dw/internal/store/storetest"
)

// A diagnosis whose transaction loses a race and is run again (store.InTx
// retries a serialization failure) stores what one clean attempt would:
// the first attempt, rolled back, leaves nothing in the incident the
// second one starts from. PostgreSQL, where the retry happens: a trigger
// fails the first update of the incident with SQLSTATE 40001.
func TestDiagnoseRetriedTransaction(t *testing.T) {
	ctx := context.Background()
	db := storetest.Postgres(t)
	for _, stmt := range []string{
		// A sequence, because it is not rolled back with the attempt.
		`CREATE SEQUENCE fail_once`,
		`CREATE FUNCTION fail_first_update() RETURNS trigger AS $$
		BEGIN
			IF nextval('fail_once') = 1 THEN
				RAISE EXCEPTION 'seeded conflict' USING ERRCODE = '40001';
			END IF;
			RETURN NEW;
		END $$ LANGUAGE plpgsql`,
	} {
		if _, err := db.ExecContext(ctx, stmt); err != nil {
			t.Fatal(err)
		}
	}
	g := newMemGraph().chain("kafka://prod/orders", "flink://enrich", "duckdb://main.orders")
	onset := tue(14, 0)
	s, _ := newService(t, db, onset.Add(time.Hour), g)
	mustRecord(t, s, changelog.RecordChangeParams{At: onset.Add(-20 * time.Minute), Kind: "schema_version", System: "registry",
		Assets: []string{"kafka://prod/orders"}, Fields: []changelog.FieldChange{{Name: "amount", How: changelog.FieldRemoved}}, Summary: "drop amount"})
	id := mustReport(t, s, Symptom{Kind: SymptomNulls, Asset: "duckdb://main.orders", Column: "amount", Observed: 0.4, At: onset}).Incidents[0].ID
	before, err := loadIncident(ctx, db, id)
	if err != nil {
		t.Fatal(err)
	}
	// The update fails only from here on: the rolled-back attempt has
	// already moved the incident in memory when it fails.
	if _, err := db.ExecContext(ctx, `CREATE TRIGGER fail_first BEFORE UPDATE ON incidents FOR EACH ROW EXECUTE FUNCTION fail_first_update()`); err != nil {
		t.Fatal(err)
	}
	d, err := Diagnose(ctx, db, g, id, DiagnoseOptions{Clock: clock.NewFake(onset.Add(time.Hour))})
	if err != nil {
		t.Fatal(err)
	}
	var updates int64
	if err := db.QueryRowContext(ctx, `SELECT last_value FROM fail_once`).Scan(&updates); err != nil || updates != 2 {
		t.Fatalf("the incident was updated %d times (%v), want 2: a failed attempt and its retry", updates, err)
	}
	after, err := loadIncident(ctx, db, id)
	if err != nil {
		t.Fatal(err)
	}
	if d.Status != StatusDiagnosed || after.Status != StatusDiagnosed || after.version != before.version+1 {
		t.Fatalf("after the retry: answer %s, stored %s at version %d (was %d); want diagnosed at %d",
			d.Status, after.Status, after.version, before.version, before.version+1)
	}
	last := after.Timeline[len(after.Timeline)-1]
	if len(after.Timeline) != len(before.Timeline)+1 || last.From != StatusOpen || last.To != StatusDiagnosed {
		t.Fatalf("timeline after the retry: %+v; want one more event, open → diagnosed", after.Timeline)
	}
}
