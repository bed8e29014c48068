package approvals

import (
	"context"
	"testing"
	"time"

	"github.com/dataworkers/dw/internal/clock"
	"github.com/dataworkers/dw/internal/config"
	"github.com/dataworkers/dw/internal/store"
)

// testConfig is a small organisation: streaming (L2, two approvers in
// order), billing (L3 with reruns opened), loyalty (L1).
const testConfig = `
people:
  - {id: alice, name: Alice Stream, slack_id: U0ALICE, os_users: [alice]}
  - {id: bob, name: Bob Billing, slack_id: U0BOB, os_users: [bob]}
  - {id: carol, name: Carol Delegate, slack_id: U0CAROL, os_users: [carol]}
  - {id: dave, name: Dave Bystander, slack_id: U0DAVE, os_users: [dave]}
domains:
  - name: streaming
    assets: ["kafka://prod/*", "schema://*", "flink://*"]
    autonomy: L2
    owners: [alice]
    approvers: [alice, carol]
    copy: [bob]
    approval_expiry: 2h
  - name: billing
    assets: ["snowflake://usage.*", "dbt://model.billing.*", "airflow://dag/*"]
    autonomy: L3
    owners: [bob]
    approvers: [bob, carol]
    copy: [alice]
    open_classes: [rerun]
  - name: loyalty
    assets: ["bigquery://loyalty.*"]
    autonomy: L1
    owners: [carol]
`

var t0 = time.Date(2026, 3, 10, 15, 5, 0, 0, time.UTC)

func testCfg(t testing.TB) *config.Config {
	t.Helper()
	t.Setenv("DW_HOME", t.TempDir())
	cfg, err := config.Parse("test.yaml", []byte(testConfig))
	if err != nil {
		t.Fatalf("parse test config: %v", err)
	}
	return cfg
}

func fixture(t testing.TB, db *store.DB) (*Service, *clock.Fake) {
	t.Helper()
	clk := clock.NewFake(t0)
	return New(db, testCfg(t), clk, nil), clk
}

// cfgDomain is a domain as config defaults would leave it, without owners.
func cfgDomain(name, glob string) config.Domain {
	return config.Domain{Name: name, Assets: []string{glob}, Autonomy: "L2", ApprovalExpiry: time.Hour}
}

func holdDAG() NewProposal {
	return NewProposal{
		IncidentID: "INC-1",
		Kind:       KindHold,
		What:       "Pause the Stripe sync DAG until egress is fixed",
		Why:        "egress_bytes is null in 18% of today's rows; the 23:00 run would bill zero",
		Targets:    []string{"airflow://dag/sync_metered_usage_to_stripe"},
		Scope:      []string{"stripe invoices", "sigma://workbook/revenue-today"},
		Undo:       "unpause the DAG",
		Proposer:   "dw-incidents",
	}
}

func schemaV13() NewProposal {
	return NewProposal{
		Kind:     KindSchemaVersion,
		What:     "Register api-usage-value v13 restoring response_bytes",
		Why:      "v12 dropped response_bytes, which usage-hourly-rollup sums",
		Targets:  []string{"schema://api-usage-value"},
		Undo:     "soft-delete version 13",
		Proposer: "dw-connectors",
	}
}

func mustPropose(t testing.TB, s *Service, np NewProposal) *Proposal {
	t.Helper()
	p, err := s.Propose(context.Background(), np)
	if err != nil {
		t.Fatalf("Propose: %v", err)
	}
	return p
}

func term(t testing.TB, s *Service, login string) Decider {
	t.Helper()
	d, err := OSUserDecider(s.cfg, ChannelTerminal, login)
	if err != nil {
		t.Fatalf("OSUserDecider(%s): %v", login, err)
	}
	return d
}

func slackBy(t testing.TB, s *Service, user string) Decider {
	t.Helper()
	d, err := SlackDecider(s.cfg, user, map[string]string{"message_ts": "1.2"})
	if err != nil {
		t.Fatalf("SlackDecider(%s): %v", user, err)
	}
	return d
}

func entryKinds(t testing.TB, s *Service, receiptID string) []string {
	t.Helper()
	es, err := Entries(context.Background(), s.db, receiptID)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, e := range es {
		kinds = append(kinds, e.Kind)
	}
	return kinds
}
