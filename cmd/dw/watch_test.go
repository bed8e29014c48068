package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/dataworkers/dw/internal/clock"
	"github.com/dataworkers/dw/internal/config"
)

// defaultDW runs dw on the embedded default in a fresh data directory.
func defaultDW(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	e := &env{stdout: &out, stderr: &errb, osUser: "nobody", clock: clock.System{}, loadConfig: config.Default,
		log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	code := run(context.Background(), e, args)
	return out.String(), errb.String(), code
}

type onceSummary struct {
	Runs []struct {
		Routine   string    `json:"routine"`
		Status    string    `json:"status"`
		Started   time.Time `json:"started"`
		Finished  time.Time `json:"finished"`
		Incidents []struct {
			ID     string `json:"id"`
			Opened bool   `json:"opened"`
			Asset  string `json:"asset"`
		} `json:"incidents"`
		Notified []struct {
			Person   string `json:"person"`
			Incident string `json:"incident"`
			Via      string `json:"via"`
			Sent     bool   `json:"sent"`
		} `json:"notified"`
	} `json:"runs"`
}

// On a fresh machine, `dw watch --once --at <the demo's incident time>`
// opens the demo incident and names who would be told; the same instant
// again runs nothing (each tick runs once).
func TestWatchOnceOpensTheDemoIncident(t *testing.T) {
	t.Setenv("DW_HOME", t.TempDir())
	stdout, stderr, code := defaultDW(t, "watch", "--once", "--at", "2026-03-10T15:05:00Z")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var sum onceSummary
	if err := json.Unmarshal([]byte(stdout), &sum); err != nil {
		t.Fatalf("stdout is not the JSON summary: %v\n%s", err, stdout)
	}
	found := false
	for _, r := range sum.Runs {
		if r.Started.IsZero() || r.Finished.Before(r.Started) {
			t.Errorf("%s: started %s finished %s", r.Routine, r.Started, r.Finished)
		}
		if r.Routine != "usage-billing" {
			continue
		}
		found = true
		if r.Status != "flagged" || len(r.Incidents) != 1 || !r.Incidents[0].Opened || r.Incidents[0].Asset != "duckdb://usage.usage_hourly" {
			t.Fatalf("usage-billing run: %+v", r)
		}
		if len(r.Notified) != 1 || r.Notified[0].Person != "sam" || r.Notified[0].Via != "none" || r.Notified[0].Sent ||
			r.Notified[0].Incident != r.Incidents[0].ID {
			t.Fatalf("who would be told: %+v, want sam (owner of usage.usage_hourly), not messaged without Slack", r.Notified)
		}
	}
	if !found {
		t.Fatalf("no usage-billing run in %s", stdout)
	}
	stdout, _, code = defaultDW(t, "watch", "--once", "--at", "2026-03-10T15:05:40Z")
	if code != 0 {
		t.Fatal(code)
	}
	sum = onceSummary{}
	if err := json.Unmarshal([]byte(stdout), &sum); err != nil || len(sum.Runs) != 0 {
		t.Fatalf("the same tick ran again: %v %s", err, stdout)
	}
	out, _, code := defaultDW(t, "routines", "list", "--json")
	var list struct {
		Runs  []struct{ ID int64 } `json:"runs"`
		Total int                  `json:"total"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &list) != nil || list.Total != len(list.Runs) || list.Total < 2 {
		t.Fatalf("routines list: %d %s", code, out)
	}
	out, _, code = defaultDW(t, "routines", "show", "1")
	if code != 0 || !strings.Contains(out, "Run 1 of") {
		t.Fatalf("routines show: %d %s", code, out)
	}
}

func TestWatchRefusesBadArguments(t *testing.T) {
	t.Setenv("DW_HOME", t.TempDir())
	for _, args := range [][]string{
		{"watch", "--at", "2026-03-10T15:05:00Z"},
		{"watch", "--once", "--at", "yesterday"},
		{"watch", "--once", "--parallel", "0"},
		{"watch", "--once", "--lease", "1ms"},
		{"watch", "extra"},
		{"routines", "show", "../../etc/passwd"},
		{"routines", "show", "-5"},
		{"routines", "list", "--status", "sideways"},
		{"routines", "list", "--limit", "100000"},
	} {
		_, stderr, code := defaultDW(t, args...)
		if code == 0 || strings.TrimSpace(stderr) == "" {
			t.Errorf("%v: exit %d, stderr %q; want a refusal that says why", args, code, stderr)
		}
	}
}
