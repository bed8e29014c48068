package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/dataworkers/dw/internal/changelog"

	"github.com/dataworkers/dw/internal/approvals"
	"github.com/dataworkers/dw/internal/clock"
	"github.com/dataworkers/dw/internal/config"
	"github.com/dataworkers/dw/internal/incidents"
	"github.com/dataworkers/dw/internal/storeconfig"
)

// TestCauseSetRecordsWhoNamedIt: a configured person names an incident's
// cause from the terminal; the incident carries it, the receipt records it
// under their name, and bad calls change nothing.
func TestCauseSetRecordsWhoNamedIt(t *testing.T) {
	eachStore(t, func(t *testing.T, h *harness) {
		ctx := context.Background()
		db, err := storeconfig.Open(ctx, h.cfg())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		svc := &incidents.Service{DB: db, Clock: h.clk}
		ch, err := (&changelog.Log{DB: db, Clock: h.clk}).RecordChange(ctx, changelog.RecordChangeParams{At: h.clk.Now().Add(-2 * time.Hour), Kind: "deploy", System: "dbt",
			Assets: []string{"duckdb://wh.sales.orders_view"}, Summary: "orders view rewritten"})
		if err != nil {
			t.Fatal(err)
		}
		rep, err := svc.ReportSymptoms(ctx, incidents.ReportParams{Symptoms: []incidents.Symptom{{Kind: incidents.SymptomVolume,
			Asset: "duckdb://wh.sales.orders", Observed: 10, At: h.clk.Now().Add(-time.Hour).Truncate(time.Hour)}}})
		if err != nil {
			t.Fatal(err)
		}
		id := rep.Incidents[0].ID
		changeArg := fmt.Sprintf("CHANGE-%d", ch.Change.ID)

		for _, bad := range []struct {
			user string
			args []string
		}{
			{"bob", []string{"cause", "set", id, changeArg}},                          // no reason
			{"mallory", []string{"cause", "set", id, changeArg, "--reason", "guess"}}, // not a person
			{"bob", []string{"cause", "set", id, "CHANGE-x", "--reason", "r"}},        // not an id
			{"bob", []string{"cause", "set", id, "CHANGE-999999", "--reason", "r"}},   // unknown change
			{"bob", []string{"cause", "set", "INC-999", changeArg, "--reason", "r"}},  // unknown incident
			{"bob", []string{"cause", "set", id}},                                     // usage
		} {
			if out, errOut, code := h.dw(bad.user, bad.args...); code == 0 {
				t.Fatalf("%v as %s succeeded: %s %s", bad.args, bad.user, out, errOut)
			}
		}
		if inc, _ := svc.GetIncident(ctx, id); inc.Attributed != nil {
			t.Fatalf("refused calls recorded %+v", inc.Attributed)
		}
		out, errOut, code := h.dw("bob", "cause", "set", id, changeArg, "--reason", "the view drops late orders", "--json")
		if code != 0 {
			t.Fatalf("cause set: exit %d\n%s%s", code, out, errOut)
		}
		var inc incidents.Incident
		if err := json.Unmarshal([]byte(out), &inc); err != nil {
			t.Fatalf("output is not an incident: %v\n%s", err, out)
		}
		if inc.Verdict != incidents.VerdictAttributed || inc.Attributed == nil || inc.Attributed.Actor != "bob" ||
			inc.Attributed.Change.ID != ch.Change.ID || inc.Attributed.Reason != "the view drops late orders" {
			t.Fatalf("incident after cause set: %+v", inc.Attributed)
		}
		entries, err := approvals.Entries(ctx, db, id)
		if err != nil {
			t.Fatal(err)
		}
		last := entries[len(entries)-1]
		var facts incidents.CauseFacts
		if err := json.Unmarshal(last.Payload, &facts); err != nil {
			t.Fatal(err)
		}
		if last.Kind != approvals.EntryCause || last.Actor != "bob" || facts.AttributedBy != "bob" || facts.ChangeID != ch.Change.ID {
			t.Fatalf("receipt entry %s by %s: %+v", last.Kind, last.Actor, facts)
		}
		if v, err := approvals.Verify(ctx, db, id); err != nil || !v.OK {
			t.Fatalf("receipt not intact: %+v %v", v, err)
		}
	})
}

// DW_CLOCK years ahead or behind on a store not made for replay: the cause
// entry is dated by the approvals clock (the real time), like every other
// receipt entry, never by the replayed clock, and the chain verifies.
func TestCauseSetDatesItsEntryByTheApprovalsClock(t *testing.T) {
	for name, years := range map[string]int{"ahead": 5, "behind": -5} {
		t.Run(name, func(t *testing.T) {
			eachStore(t, func(t *testing.T, h *harness) {
				ctx := context.Background()
				db := svcDB(t, h)
				replayed := clock.NewOffset(time.Now().AddDate(years, 0, 0)) // as DW_CLOCK makes it
				svc := &incidents.Service{DB: db, Clock: replayed}
				ch, err := (&changelog.Log{DB: db, Clock: replayed}).RecordChange(ctx, changelog.RecordChangeParams{At: replayed.Now().Add(-2 * time.Hour), Kind: "deploy", System: "dbt",
					Assets: []string{"duckdb://wh.sales.orders_view"}, Summary: "orders view rewritten"})
				if err != nil {
					t.Fatal(err)
				}
				rep, err := svc.ReportSymptoms(ctx, incidents.ReportParams{Symptoms: []incidents.Symptom{{Kind: incidents.SymptomVolume,
					Asset: "duckdb://wh.sales.orders", Observed: 10, At: replayed.Now().Add(-time.Hour).Truncate(time.Hour)}}})
				if err != nil {
					t.Fatal(err)
				}
				id := rep.Incidents[0].ID
				var out, errb bytes.Buffer
				e := &env{stdout: &out, stderr: &errb, osUser: "bob", clock: replayed,
					loadConfig: func() (*config.Config, error) { return config.Parse(h.path, h.data) },
					log:        slog.New(slog.NewTextHandler(io.Discard, nil))}
				before := time.Now().UTC()
				if code := run(ctx, e, []string{"cause", "set", id, fmt.Sprintf("CHANGE-%d", ch.Change.ID), "--reason", "the view drops late orders"}); code != 0 {
					t.Fatalf("cause set: exit %d\n%s%s", code, out.String(), errb.String())
				}
				after := time.Now().UTC()
				entries, err := approvals.Entries(ctx, db, id)
				if err != nil || len(entries) == 0 {
					t.Fatalf("entries %v %v", entries, err)
				}
				last := entries[len(entries)-1]
				if last.Kind != approvals.EntryCause {
					t.Fatalf("last entry is %s, want %s", last.Kind, approvals.EntryCause)
				}
				if at := last.At.UTC(); at.Before(before.Add(-time.Second)) || at.After(after.Add(time.Second)) {
					t.Fatalf("cause entry dated %s under DW_CLOCK %+d years; want the real time %s..%s", at, years, before, after)
				}
				if v, err := approvals.Verify(ctx, db, id); err != nil || !v.OK {
					t.Fatalf("receipt not intact: %+v %v", v, err)
				}
			})
		})
	}
}

// A change stored before the text rule (ESC sequences, a forged second
// line) is printed by cause set escaped: the answer is exactly its three
// lines and none holds a control character.
func TestCauseSetEscapesStoredChangeText(t *testing.T) {
	eachStore(t, func(t *testing.T, h *harness) {
		ctx := context.Background()
		db := svcDB(t, h)
		svc := &incidents.Service{DB: db, Clock: h.clk}
		ch, err := (&changelog.Log{DB: db, Clock: h.clk}).RecordChange(ctx, changelog.RecordChangeParams{At: h.clk.Now().Add(-2 * time.Hour), Kind: "deploy", System: "dbt",
			Assets: []string{"duckdb://wh.sales.orders_view"}, Summary: "orders view rewritten"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.ExecContext(ctx, `UPDATE incident_changes SET summary = ?, system = ? WHERE id = ?`,
			"egress_bytes dropped\x1b[8m\n  Runs exactly this: nothing", "db\u202et", ch.Change.ID); err != nil {
			t.Fatal(err)
		}
		rep, err := svc.ReportSymptoms(ctx, incidents.ReportParams{Symptoms: []incidents.Symptom{{Kind: incidents.SymptomVolume,
			Asset: "duckdb://wh.sales.orders", Observed: 10, At: h.clk.Now().Add(-time.Hour).Truncate(time.Hour)}}})
		if err != nil {
			t.Fatal(err)
		}
		id := rep.Incidents[0].ID
		out, errOut, code := h.dw("bob", "cause", "set", id, fmt.Sprintf("%d", ch.Change.ID), "--reason", "line one\nline two")
		if code != 0 {
			t.Fatalf("cause set: exit %d\n%s%s", code, out, errOut)
		}
		lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
		at := stamp(h.clk.Now().Add(-2 * time.Hour).UTC().Truncate(time.Millisecond))
		want := []string{
			fmt.Sprintf(`%s: cause named by bob: change %d, egress_bytes dropped\x1b[8m\n  Runs exactly this: nothing (deploy on db\u202et at %s).`, id, ch.Change.ID, at),
			"Reason: line one",
			"        > line two",
		}
		if len(lines) < len(want) {
			t.Fatalf("answer has %d lines:\n%s", len(lines), out)
		}
		for i, w := range want {
			if lines[i] != w {
				t.Errorf("line %d:\n got %q\nwant %q", i+1, lines[i], w)
			}
		}
		if strings.ContainsAny(out, "\x1b\u202e") {
			t.Errorf("answer holds raw control or format characters: %q", out)
		}
	})
}
