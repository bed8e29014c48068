package seeded

import (
	"fmt"
	"time"

	"github.com/dataworkers/dw/internal/incidents"
	"github.com/dataworkers/dw/internal/lineage"
)

// replay: a logistics team lands shipment tracking events from a topic
// through a sink connector. On the incident day the connector is moved to
// at-least-once delivery and its offsets are reset a few minutes back, so
// it replays what it had written and, from then on, redelivers a share of
// each batch: event ids appear twice. The decoys: a deploy of an unrelated
// notification service, a dbt deploy of the model downstream of the table,
// and a change of the same connector two days earlier.
func (g *gen) replay() {
	r, s := g.r, g.s
	schema := pick(r, "logistics", "fleet", "parcels")
	name := pick(r, "shipment_events", "tracking_events", "parcel_scans")
	topic := pick(r, "shipment-tracking", "parcel-scans", "courier-events")
	connector := "connect://" + pick(r, "sink-", "wh-sink-") + topic
	model := fmt.Sprintf("dbt://model.%s.fct_delivery_times", schema)
	dashboard := "looker://dashboard/" + pick(r, "on-time-delivery", "courier-sla")
	export := "airflow://dag/" + pick(r, "carrier_invoice_export", "send_sla_credits_to_carriers")
	service := "service://" + pick(r, "notification-sender", "eta-predictor")

	t := &Table{Schema: schema, Name: name, Columns: `(
		event_id    VARCHAR   NOT NULL,
		shipment_id VARCHAR   NOT NULL,
		status      VARCHAR   NOT NULL,
		carrier     VARCHAR   NOT NULL,
		weight_kg   DOUBLE,
		event_at    TIMESTAMP NOT NULL,
		ingested_at TIMESTAMP NOT NULL
	)`}
	s.Table, s.Asset, s.Symptom = t, "duckdb://"+t.Ref(), incidents.SymptomUniqueness

	fh, fm := 8+r.IntN(4), 5+r.IntN(45)
	s.FaultAt = g.at(fh, fm)
	s.CheckAt = g.at(fh+3+r.IntN(2), 5+r.IntN(40))
	replayBack := time.Duration(2+r.IntN(8)) * time.Minute // offsets reset this far back
	dupShare := 0.06 + 0.09*r.Float64()                    // redelivered share after the change
	base := 80 + float64(r.IntN(120))
	carriers := []string{"dhl", "ups", "fedex", "gls", "dpd"}
	statuses := []string{"picked_up", "in_transit", "out_for_delivery", "delivered", "exception"}

	for h := s.HistoryStart; h.Before(s.dataEnd()); h = h.Add(time.Hour) {
		n := g.poisson(g.level(base, h))
		for range n {
			at := h.Add(time.Duration(r.Int64N(int64(time.Hour))))
			landed := at.Add(time.Duration(5+r.IntN(90)) * time.Second)
			vals := []any{g.id("ev-"), g.id("sh-"), pick(r, statuses...), pick(r, carriers...), 0.2 + 30*r.Float64()*r.Float64(), at, landed}
			g.keep(t, landed, vals...)
			if s.Healthy {
				continue
			}
			again := time.Time{}
			switch {
			case !landed.Before(s.FaultAt.Add(-replayBack)) && landed.Before(s.FaultAt):
				again = s.FaultAt.Add(time.Duration(r.IntN(60)) * time.Second) // the replay
			case !landed.Before(s.FaultAt) && r.Float64() < dupShare:
				again = landed.Add(time.Duration(30+r.IntN(600)) * time.Second) // redelivered
			}
			if !again.IsZero() {
				dup := append([]any(nil), vals...)
				dup[6] = again
				g.keep(t, again, dup...)
			}
		}
	}

	s.Lineage = lineage.Note{
		Assets: []lineage.NoteAsset{
			{ID: "kafka://prod/" + topic, Kind: "topic", Owner: "ops-platform", Domain: "logistics"},
			{ID: connector, Kind: "connector", Owner: "ops-platform", Domain: "logistics"},
			{ID: s.Asset, Kind: "table", Owner: "logistics-data", Domain: "logistics"},
			{ID: model, Kind: "dbt_model", Owner: "logistics-data", Domain: "logistics"},
			{ID: dashboard, Kind: "dashboard", Owner: "ops-analytics", Domain: "logistics", Tags: []string{"customer-facing"}},
			{ID: export, Kind: "orchestrator_job", Owner: "finance-ops", Domain: "logistics", Tags: []string{"outbound", "money"},
				Schedule: &lineage.Schedule{Cron: "0 23 * * *", Timezone: "UTC"}},
			{ID: "kafka://prod/notification-requests", Kind: "topic", Owner: "comms"},
			{ID: service, Kind: "application", Owner: "comms"},
		},
		Edges: []lineage.NoteEdge{
			{From: "kafka://prod/" + topic, To: connector},
			{From: connector, To: s.Asset},
			{From: s.Asset, To: model},
			{From: model, To: dashboard},
			{From: model, To: export},
			{From: "kafka://prod/notification-requests", To: service},
		},
	}
	s.Downstream = []string{model, dashboard, export}

	s.CauseKey = fmt.Sprintf("kafka-connect:%s:%d", connector, s.Seed)
	if !s.Healthy {
		g.change(s.CauseKey, s.FaultAt, "connector", "kafka-connect", []string{connector}, "ravi",
			"delivery guarantee set to at-least-once; consumer offsets reset to replay the last minutes",
			map[string]string{"delivery.guarantee": "at_least_once", "offset_reset": "-" + replayBack.String()})
	}
	g.change(fmt.Sprintf("deploy:%s:%d", service, s.Seed), s.FaultAt.Add(time.Duration(r.IntN(40)-20)*time.Minute), "deploy", "kubernetes",
		[]string{service}, "mia", "notification templates v"+fmt.Sprint(40+r.IntN(20)), nil)
	g.change(fmt.Sprintf("dbt:%s:%d", model, s.Seed), s.FaultAt.Add(time.Duration(5+r.IntN(30))*time.Minute), "deploy", "dbt",
		[]string{model}, "lena", "fct_delivery_times: add the promised_by column", nil)
	g.change(fmt.Sprintf("kafka-connect:%s:tasks:%d", connector, s.Seed), s.FaultAt.Add(-time.Duration(44+r.IntN(8))*time.Hour), "connector", "kafka-connect",
		[]string{connector}, "ravi", "tasks.max raised from 2 to 4", map[string]string{"tasks.max": "4"})
	g.sortChanges()
}
