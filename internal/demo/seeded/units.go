package seeded

import (
	"fmt"
	"math"
	"time"

	"github.com/dataworkers/dw/internal/incidents"
	"github.com/dataworkers/dw/internal/lineage"
)

// units: a marketplace pays its sellers; a stream job normalizes payout
// requests into a warehouse table with amounts in minor units (cents). On
// the incident day a deploy of that job starts writing currency units
// (amount / 100): row counts, nulls and keys stay healthy, only the
// amount's distribution moves a hundredfold. The decoys: a deploy of the
// sibling refunds job (its own table, no path to payouts), and a config
// change of the payout dashboard downstream.
func (g *gen) units() {
	r, s := g.r, g.s
	schema := pick(r, "payouts", "marketplace", "settlements")
	name := pick(r, "seller_payouts", "payout_lines", "vendor_payouts")
	topic := pick(r, "payout-requests", "seller-payouts", "settlement-events")
	job := "flink://" + pick(r, "payout-normalizer", "settlement-enricher")
	refundJob := "flink://refund-normalizer"
	model := fmt.Sprintf("dbt://model.%s.fct_seller_balances", schema)
	workbook := "sigma://workbook/" + pick(r, "seller-payouts", "marketplace-cash")
	sync := "hightouch://sync/" + pick(r, "bank-payout-file", "payout-instructions")

	t := &Table{Schema: schema, Name: name, Columns: `(
		payout_id   VARCHAR   NOT NULL,
		seller_id   VARCHAR   NOT NULL,
		currency    VARCHAR   NOT NULL,
		amount      DOUBLE    NOT NULL,
		created_at  TIMESTAMP NOT NULL,
		loaded_at   TIMESTAMP NOT NULL
	)`}
	s.Table, s.Asset, s.Symptom = t, "duckdb://"+t.Ref(), incidents.SymptomValue

	fh, fm := 8+r.IntN(5), r.IntN(60)
	s.FaultAt = g.at(fh, fm)
	s.CheckAt = g.at(fh+3+r.IntN(3), 5+r.IntN(50))
	base := 60 + float64(r.IntN(150))
	// Amounts in cents: log-normal around a seed-drawn median (€20–€120).
	median := 2000 + float64(r.IntN(10000))
	sigma := 0.5 + 0.4*r.Float64()
	currencies := []string{"EUR", "EUR", "EUR", "GBP", "SEK", "PLN"}

	for h := s.HistoryStart; h.Before(s.dataEnd()); h = h.Add(time.Hour) {
		n := g.poisson(g.level(base, h))
		for range n {
			at := h.Add(time.Duration(r.Int64N(int64(time.Hour))))
			landed := at.Add(time.Duration(2+r.IntN(40)) * time.Second)
			cents := math.Round(median * math.Exp(sigma*r.NormFloat64()))
			amount := cents
			if !s.Healthy && !landed.Before(s.FaultAt) {
				amount = math.Round(cents) / 100
			}
			g.keep(t, landed, g.id("po-"), fmt.Sprintf("seller-%04d", r.IntN(3000)), pick(r, currencies...), amount, at, landed)
		}
	}

	s.Lineage = lineage.Note{
		Assets: []lineage.NoteAsset{
			{ID: "kafka://prod/" + topic, Kind: "topic", Owner: "payments-platform", Domain: "marketplace"},
			{ID: job, Kind: "stream_job", Owner: "payments-platform", Domain: "marketplace",
				SQL: fmt.Sprintf("INSERT INTO %s SELECT payout_id, seller_id, currency, amount_minor AS amount, created_at, NOW() FROM `%s`", t.Ref(), topic)},
			{ID: s.Asset, Kind: "table", Owner: "marketplace-data", Domain: "marketplace"},
			{ID: model, Kind: "dbt_model", Owner: "marketplace-data", Domain: "marketplace"},
			{ID: workbook, Kind: "dashboard", Owner: "finance", Domain: "marketplace", Tags: []string{"money"}},
			{ID: sync, Kind: "reverse_etl_sync", Owner: "treasury", Domain: "marketplace", Tags: []string{"outbound", "money"},
				Schedule: &lineage.Schedule{Cron: "0 18 * * 1-5", Timezone: "UTC"}},
			{ID: "kafka://prod/refund-requests", Kind: "topic", Owner: "payments-platform"},
			{ID: refundJob, Kind: "stream_job", Owner: "payments-platform"},
			{ID: "duckdb://" + schema + ".refunds", Kind: "table", Owner: "marketplace-data"},
		},
		Edges: []lineage.NoteEdge{
			{From: "kafka://prod/" + topic, To: job},
			{From: job, To: s.Asset},
			{From: s.Asset, To: model},
			{From: model, To: workbook},
			{From: model, To: sync},
			{From: "kafka://prod/refund-requests", To: refundJob},
			{From: refundJob, To: "duckdb://" + schema + ".refunds"},
		},
	}
	s.Downstream = []string{model, workbook, sync}

	s.CauseKey = fmt.Sprintf("deploy:%s:%d", job, s.Seed)
	if !s.Healthy {
		g.change(s.CauseKey, s.FaultAt, "deploy", "flink", []string{job}, "tomas",
			"payout normalizer v3.2: amounts normalized to currency units", map[string]string{"version": "3.2"})
	}
	g.change(fmt.Sprintf("deploy:%s:%d", refundJob, s.Seed), s.FaultAt.Add(-time.Duration(10+r.IntN(30))*time.Minute), "deploy", "flink",
		[]string{refundJob}, "tomas", "refund normalizer v1.9: amounts normalized to currency units", map[string]string{"version": "1.9"})
	g.change(fmt.Sprintf("config:%s:%d", workbook, s.Seed), s.FaultAt.Add(time.Duration(r.IntN(50)-25)*time.Minute), "config", "sigma",
		[]string{workbook}, "noor", "payout workbook: default filter set to the last 30 days", nil)
	g.sortChanges()
}
