package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/dataworkers/dw/internal/config"
)

// TestZeroConfigStory is the README's first hour with nothing configured
// and no DW_CLOCK, whatever the wall clock: "check usage.usage_hourly for
// today" finds the incident on the demo's incident day (and no volume
// problem, though the demo's data stops at 15:05), the answers say the demo
// time, and propose → dw approve (as the local OS user, the demo's
// approver) → remediate → receipt goes through.
func TestZeroConfigStory(t *testing.T) {
	if testing.Short() {
		t.Skip("drives two agents and dw; skipped with -short")
	}
	login := config.CurrentOSUser()
	if login == "" {
		t.Skip("this uid has no account, so nobody can approve at the terminal")
	}
	home := t.TempDir()
	env := map[string]string{"DW_HOME": home}
	q := spawn(t, "dw-quality", env)
	if ins := q.session.InitializeResult().Instructions; !strings.Contains(ins, "Demo time") || !strings.Contains(ins, config.DemoIncidentDay(time.Now()).Format("2006-01-02")+" 15:") {
		t.Errorf("the instructions do not tell the client the demo time:\n%s", ins)
	}

	res := q.call(t, "run_quality_check", map[string]any{"table": "usage.usage_hourly", "period": "today", "bucket": "hour"})
	if res.IsError {
		t.Fatalf("check: %s\nstderr:\n%s", text(res), q.stderr)
	}
	t.Logf("run_quality_check text:\n%s", text(res))
	var check struct {
		Status    string                    `json:"status"`
		Problems  []string                  `json:"problems"`
		Window    struct{ Start time.Time } `json:"window"`
		Incidents []struct {
			ID string `json:"id"`
		} `json:"incidents"`
		Results []struct {
			Metric, Dimension, Status string
		} `json:"results"`
	}
	decode(t, res, &check)
	day := config.DemoIncidentDay(time.Now())
	if !check.Window.Start.Equal(day) {
		t.Errorf("today's window starts %s, want the demo's incident day %s", check.Window.Start, day)
	}
	if check.Status != "anomalous" && check.Status != "fail" {
		t.Errorf("status %q, want the incident found (anomalous): %s", check.Status, text(res))
	}
	if !slices.Contains(check.Problems, "nulls") || slices.Contains(check.Problems, "volume") {
		t.Errorf("problems %v, want nulls and no volume problem (the demo's data stops at 15:05)", check.Problems)
	}
	if len(check.Incidents) == 0 {
		t.Fatalf("no incident opened: %s", text(res))
	}
	incident := check.Incidents[0].ID
	if want := "demo time: " + day.Format("2006-01-02") + " 15:"; !strings.Contains(text(res), want) {
		t.Errorf("the answer does not say the demo time (%q):\n%s", want, text(res))
	}

	inc := spawn(t, "dw-incidents", env)
	if r := inc.call(t, "diagnose_incident", map[string]any{"incident": incident}); r.IsError {
		t.Fatalf("diagnose: %s", text(r))
	}
	r := inc.call(t, "propose_remediation", map[string]any{"incident": incident, "proposals": []map[string]any{{
		"kind": "hold", "targets": []string{"airflow://dag/sync_metered_usage_to_stripe"},
		"what": "Pause the Stripe sync DAG until today's usage is corrected", "undo": "unpause sync_metered_usage_to_stripe"}}})
	if r.IsError {
		t.Fatalf("propose_remediation on the embedded default: %s", text(r))
	}
	var proposed struct {
		Proposals []struct{ ID, Approver, Domain string } `json:"proposals"`
	}
	decode(t, r, &proposed)
	if len(proposed.Proposals) != 1 || proposed.Proposals[0].Approver != "bea" || proposed.Proposals[0].Domain != "billing" {
		t.Fatalf("proposal %+v, want one for bea in billing", proposed.Proposals)
	}

	dw := exec.Command(filepath.Join(binDir, "dw"), "approve", proposed.Proposals[0].ID, "--reason", "zero-config test")
	dw.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "DW_HOME=" + home}
	if out, err := dw.CombinedOutput(); err != nil {
		t.Fatalf("dw approve as %s: %v\n%s", login, err, out)
	}

	r = inc.call(t, "remediate", map[string]any{"incident": incident})
	if r.IsError {
		t.Fatalf("remediate: %s", text(r))
	}
	r = inc.call(t, "get_receipt", map[string]any{"id": incident})
	if r.IsError {
		t.Fatalf("get_receipt: %s", text(r))
	}
	var receipt struct {
		Intact bool `json:"intact"`
	}
	decode(t, r, &receipt)
	if !receipt.Intact {
		t.Errorf("receipt not intact: %s", text(r))
	}
	raw, _ := json.Marshal(r.StructuredContent)
	if !strings.Contains(string(raw), `"bea"`) {
		t.Errorf("the receipt does not record bea's decision: %s", raw)
	}
}

// decode unmarshals a result's structured content into v.
func decode(t *testing.T, res *mcp.CallToolResult, v any) {
	t.Helper()
	raw, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, v); err != nil {
		t.Fatalf("structured content does not decode: %v\n%s", err, raw)
	}
}
