package incidents

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/dataworkers/dw/internal/changelog"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/dataworkers/dw/internal/approvals"
	"github.com/dataworkers/dw/internal/incidents"
)

// maxAnswer is the most one tool answer may hold by default (text plus
// structured output): about 20k tokens.
const maxAnswer = 80_000

// sizedCall calls a tool and returns its structured output and size.
func sizedCall(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any, out any) int {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	text := ""
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			text += tc.Text
		}
	}
	if res.IsError {
		t.Fatalf("%s failed: %s", name, text)
	}
	raw, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, out); err != nil {
		t.Fatal(err)
	}
	return len(text) + len(raw)
}

// pageAll follows next_cursor from the first page to the last and returns
// how often each item id was listed.
func pageAll(t *testing.T, cs *mcp.ClientSession, tool, list string, args map[string]any) (map[string]int, int) {
	t.Helper()
	seen := map[string]int{}
	total := -1
	for pages := 0; ; pages++ {
		if pages > 1000 {
			t.Fatalf("%s: paging does not end", tool)
		}
		var out map[string]json.RawMessage
		sizedCall(t, cs, tool, args, &out)
		var items []map[string]any
		if err := json.Unmarshal(out[list], &items); err != nil {
			t.Fatal(err)
		}
		for _, it := range items {
			id := fmt.Sprint(it["id"])
			if it["id"] == nil {
				id = fmt.Sprint(it["name"])
			}
			seen[id]++
		}
		var tot int
		_ = json.Unmarshal(out["total"], &tot)
		if total >= 0 && tot != total {
			t.Fatalf("%s: total changed between pages: %d then %d", tool, total, tot)
		}
		total = tot
		var next string
		_ = json.Unmarshal(out["next_cursor"], &next)
		if next == "" {
			return seen, total
		}
		args = clone(args)
		args["cursor"] = next
	}
}

func clone(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func onceEach(t *testing.T, what string, seen map[string]int, total int) {
	t.Helper()
	if len(seen) != total {
		t.Errorf("%s: paging visited %d distinct items of %d", what, len(seen), total)
	}
	for id, n := range seen {
		if n != 1 {
			t.Errorf("%s: %s listed %d times", what, id, n)
		}
	}
}

// TestLargeListsAreBounded fills the change log, the metric list, a
// metric's history and a receipt far past a page and checks each tool's
// default answer stays under maxAnswer, and that paging visits every item
// exactly once.
func TestLargeListsAreBounded(t *testing.T) {
	s := newStory(t, "billing")
	cs := client(t, s)
	e := s.env()
	now := s.clk.Now()
	id := openBilling(s)

	// 600 changes, each with a longish summary.
	for i := range 600 {
		_, err := e.log.RecordChange(s.ctx, changelog.RecordChangeParams{Key: fmt.Sprintf("probe:%d", i), At: now.Add(-time.Duration(i+1) * time.Minute),
			Kind: "deploy", System: "dbt", Assets: []string{"duckdb://usage.usage_hourly"}, Actor: "probe", Source: "probe",
			Summary: fmt.Sprintf("deploy %d of a model whose change summary is long enough to matter %s", i, strings.Repeat("x", 200))})
		if err != nil {
			t.Fatal(err)
		}
	}
	var changes changelog.ChangeList
	if n := sizedCall(t, cs, "list_changes", map[string]any{}, &changes); n > maxAnswer || len(changes.Changes) != 50 || changes.Total < 600 || changes.NextCursor == "" {
		t.Errorf("list_changes default: %d characters, %d of %d listed", n, len(changes.Changes), changes.Total)
	}
	seen, total := pageAll(t, cs, "list_changes", "changes", map[string]any{"limit": 500})
	onceEach(t, "list_changes", seen, total)
	seen, total = pageAll(t, cs, "list_changes", "changes", map[string]any{"limit": 7, "system": "dbt", "since": now.Add(-100 * time.Minute).Format(time.RFC3339)})
	onceEach(t, "list_changes filtered", seen, total)
	if total != 99 && total != 100 {
		t.Errorf("filtered total %d, want the 100 minutes' changes", total)
	}

	// 130 metrics.
	for i := range 130 {
		if _, err := e.svc.DefineMetric(s.ctx, incidents.DefineMetricParams{Name: fmt.Sprintf("probe_%03d", i), Description: "probe",
			Asset: "duckdb://usage.usage_hourly"}); err != nil {
			t.Fatal(err)
		}
	}
	var metrics ListMetricsOut
	if n := sizedCall(t, cs, "list_metrics", map[string]any{}, &metrics); n > maxAnswer || len(metrics.Metrics) != 50 || metrics.Total < 130 {
		t.Errorf("list_metrics default: %d characters, %d of %d", n, len(metrics.Metrics), metrics.Total)
	}
	seen, total = pageAll(t, cs, "list_metrics", "metrics", map[string]any{"limit": 40})
	onceEach(t, "list_metrics", seen, total)

	// 2,000 points of one metric: first as history, then judged.
	points := func(from time.Time, n int, v func(i int) float64) []any {
		out := make([]any, n)
		for i := range n {
			out[i] = map[string]any{"at": from.Add(time.Duration(i) * time.Hour).Format(time.RFC3339), "value": v(i)}
		}
		return out
	}
	start := now.Truncate(time.Hour).Add(-4000 * time.Hour)
	var mon MonitorOut
	if n := sizedCall(t, cs, "monitor_metrics", map[string]any{"metric": "probe_000", "backfill": true,
		"points": points(start, 2000, func(i int) float64 { return 100 + float64(i%24) })}, &mon); n > maxAnswer || mon.Recorded != 2000 || len(mon.Points) != 0 {
		t.Errorf("backfill of 2000 points: %d characters, recorded %d, echoed %d", n, mon.Recorded, len(mon.Points))
	}
	judged := points(start.Add(2000*time.Hour), 2000, func(i int) float64 { return float64(1000 * (i % 2)) })
	if n := sizedCall(t, cs, "monitor_metrics", map[string]any{"metric": "probe_000", "points": judged}, &mon); n > maxAnswer {
		t.Errorf("2000 judged points: %d characters", n)
	}
	if mon.PointSummary.Count != 2000 || mon.PointSummary.Worst == nil || mon.PointSummary.Latest == nil || len(mon.Points) != 0 ||
		mon.AnomaliesTotal < 1000 || len(mon.Anomalies) != maxAnomalies {
		t.Errorf("summary %+v, points %d, anomalies %d of %d", mon.PointSummary, len(mon.Points), len(mon.Anomalies), mon.AnomaliesTotal)
	}
	// The incident those anomalies joined stays readable too.
	if len(mon.Incidents) == 0 {
		t.Fatal("1000 anomalies joined no incident")
	}
	for _, tool := range []string{"get_incident", "diagnose_incident"} {
		var got map[string]any
		if n := sizedCall(t, cs, tool, map[string]any{"incident": mon.Incidents[0].ID}, &got); n > maxAnswer {
			t.Errorf("%s on an incident with %d symptoms: %d characters", tool, mon.AnomaliesTotal, n)
		}
	}
	// Weeks of re-runs leave a status change each: 600 events with long
	// notes, about 300k characters if the timeline were listed whole.
	for i := range 600 {
		if _, err := s.db().ExecContext(s.ctx, `INSERT INTO incident_events (incident_id, at_ms, from_status, to_status, actor, note)
			VALUES (?, ?, 'diagnosed', 'diagnosed', 'probe', ?)`, mon.Incidents[0].ID, now.UnixMilli()+int64(i),
			fmt.Sprintf("re-run %d: %s", i, strings.Repeat("x", 480))); err != nil {
			t.Fatal(err)
		}
	}
	var closed IncidentOut
	if n := sizedCall(t, cs, "close_incident", map[string]any{"incident": mon.Incidents[0].ID, "note": "probe data"}, &closed); n > maxAnswer ||
		closed.SymptomsTotal < 1000 || len(closed.Incident.Symptoms) != symptomsHead+symptomsTail {
		t.Errorf("close_incident: %d characters, %d of %d symptoms", n, len(closed.Incident.Symptoms), closed.SymptomsTotal)
	}
	tl := closed.Incident.Timeline
	if closed.TimelineTotal < 602 || len(tl) != timelineHead+timelineTail {
		t.Fatalf("close_incident timeline: %d of %d events", len(tl), closed.TimelineTotal)
	}
	if tl[0].To != incidents.StatusOpen || tl[len(tl)-1].To != incidents.StatusClosed {
		t.Errorf("timeline shows %s … %s, want how it opened and the close", tl[0].To, tl[len(tl)-1].To)
	}
	var withPoints MonitorOut
	if n := sizedCall(t, cs, "monitor_metrics", map[string]any{"metric": "probe_001", "backfill": true, "include_points": true,
		"points": points(start, 2000, func(i int) float64 { return 1 })}, &withPoints); n > maxAnswer ||
		len(withPoints.Points) != maxEchoPoints || withPoints.PointsOmitted != 2000-maxEchoPoints || !withPoints.Points[0].At.Equal(start.Add(1800*time.Hour)) {
		t.Errorf("include_points: %d characters, %d points, %d omitted", n, len(withPoints.Points), withPoints.PointsOmitted)
	}

	// A receipt of 400 steps, some with large facts.
	db := s.db()
	for i := range 400 {
		facts := map[string]any{"step": i, "note": "ran"}
		if i%10 == 0 {
			facts["diff"] = strings.Repeat("+ a line of a long diff\n", 400)
		}
		if _, err := approvals.AppendReceipt(s.ctx, db, now, id, "step", "probe", facts); err != nil {
			t.Fatal(err)
		}
	}
	var rec ReceiptOut
	n := sizedCall(t, cs, "get_receipt", map[string]any{"id": id}, &rec)
	if n > maxAnswer || rec.EntriesTotal < 400 || len(rec.Entries) != approvals.ViewHeadEntries+approvals.ViewTailEntries ||
		rec.EntriesOmitted != rec.EntriesTotal-len(rec.Entries) || rec.EntryKinds["step"] != 400 || !rec.Intact {
		t.Errorf("get_receipt: %d characters, %d of %d entries, %d omitted, kinds %v, intact %v",
			n, len(rec.Entries), rec.EntriesTotal, rec.EntriesOmitted, rec.EntryKinds, rec.Intact)
	}
	if last := rec.Entries[len(rec.Entries)-1]; last.Seq != int64(rec.EntriesTotal) {
		t.Errorf("the last entry shown is %d, want the chain's last, %d", last.Seq, rec.EntriesTotal)
	}
	bigShown := false
	for _, en := range rec.Entries {
		if _, ok := en.Facts["omitted"]; ok {
			bigShown = true
		}
		if _, ok := en.Facts["diff"]; ok {
			t.Errorf("entry %d shows a 10 KB diff in full", en.Seq)
		}
	}
	if !bigShown {
		t.Error("no large entry was summarised")
	}
	if !strings.Contains(rec.Full, "--json") {
		t.Errorf("full = %q, want the command that prints it all", rec.Full)
	}
}
