package seeded

import (
	"fmt"
	"time"

	"github.com/dataworkers/dw/internal/incidents"
	"github.com/dataworkers/dw/internal/lineage"
)

// partition: an IoT fleet's sensor readings land from a topic in object
// storage and an orchestrator loads each hour as a partition shortly after
// the hour ends. On the incident day the loading DAG's schedule is changed
// (hourly to every six hours, waiting for a complete batch), so every
// partition due after the change stays unloaded until a batch long after
// the team's check: the day's later hours are missing. The decoys: a
// config change of an unrelated DAG, a dbt deploy of the model downstream,
// and a change of the sink connector upstream three days earlier.
func (g *gen) partition() {
	r, s := g.r, g.s
	schema := pick(r, "telemetry", "iot", "fleet_sensors")
	name := pick(r, "sensor_readings", "device_metrics", "meter_readings")
	topic := pick(r, "sensor-readings", "device-telemetry", "meter-pings")
	connector := "connect://gcs-sink-" + topic
	landing := "gcs://iot-landing/" + topic
	dag := "airflow://dag/" + pick(r, "load_sensor_partitions", "hourly_telemetry_load")
	otherDAG := "airflow://dag/" + pick(r, "compact_firmware_logs", "rotate_device_certs")
	model := fmt.Sprintf("dbt://model.%s.fct_device_health", schema)
	dashboard := "metabase://dashboard/" + pick(r, "fleet-health", "device-uptime")
	sync := "hightouch://sync/" + pick(r, "uptime-to-partner-portal", "sla-report-to-utilities")

	t := &Table{Schema: schema, Name: name, Columns: `(
		reading_id  VARCHAR   NOT NULL,
		device_id   VARCHAR   NOT NULL,
		metric      VARCHAR   NOT NULL,
		value       DOUBLE    NOT NULL,
		read_at     TIMESTAMP NOT NULL,
		loaded_at   TIMESTAMP NOT NULL
	)`}
	s.Table, s.Asset, s.Symptom = t, "duckdb://"+t.Ref(), incidents.SymptomVolume

	fh, fm := 6+r.IntN(5), 20+r.IntN(35)
	s.FaultAt = g.at(fh, fm)
	s.CheckAt = g.at(fh+3+r.IntN(3), 30+r.IntN(25))
	base := 100 + float64(r.IntN(200))
	devices := 200 + r.IntN(800)
	metrics := []string{"temperature_c", "humidity_pct", "battery_v", "rssi_dbm"}

	for h := s.HistoryStart; h.Before(s.dataEnd()); h = h.Add(time.Hour) {
		// The partition of hour h loads when the hour is over, a few
		// minutes past the next hour; after the schedule change it waits
		// for the six-hourly batch, long after the check.
		load := h.Add(time.Hour + time.Duration(4+r.IntN(14))*time.Minute)
		if !s.Healthy && !load.Before(s.FaultAt) {
			load = load.Add(7 * time.Hour)
		}
		n := g.poisson(g.level(base, h))
		for range n {
			at := h.Add(time.Duration(r.Int64N(int64(time.Hour))))
			m := pick(r, metrics...)
			g.keep(t, load.Add(time.Duration(r.IntN(90))*time.Second), g.id("rd-"), fmt.Sprintf("dev-%05d", r.IntN(devices)), m, 20+10*r.NormFloat64(), at, load)
		}
	}

	s.Lineage = lineage.Note{
		Assets: []lineage.NoteAsset{
			{ID: "kafka://prod/" + topic, Kind: "topic", Owner: "iot-platform", Domain: "iot"},
			{ID: connector, Kind: "connector", Owner: "iot-platform", Domain: "iot"},
			{ID: landing, Kind: "dataset", Owner: "iot-platform", Domain: "iot"},
			{ID: dag, Kind: "orchestrator_job", Owner: "iot-data", Domain: "iot", Schedule: &lineage.Schedule{Cron: "10 * * * *", Timezone: "UTC"}},
			{ID: s.Asset, Kind: "table", Owner: "iot-data", Domain: "iot"},
			{ID: model, Kind: "dbt_model", Owner: "iot-data", Domain: "iot"},
			{ID: dashboard, Kind: "dashboard", Owner: "fleet-ops", Domain: "iot", Tags: []string{"customer-facing"}},
			{ID: sync, Kind: "reverse_etl_sync", Owner: "partner-success", Domain: "iot", Tags: []string{"outbound"},
				Schedule: &lineage.Schedule{Cron: "0 20 * * *", Timezone: "UTC"}},
			{ID: otherDAG, Kind: "orchestrator_job", Owner: "device-security"},
			{ID: "gcs://iot-landing/firmware-logs", Kind: "dataset", Owner: "device-security"},
		},
		Edges: []lineage.NoteEdge{
			{From: "kafka://prod/" + topic, To: connector},
			{From: connector, To: landing},
			{From: landing, To: dag},
			{From: dag, To: s.Asset},
			{From: s.Asset, To: model},
			{From: model, To: dashboard},
			{From: model, To: sync},
			{From: "gcs://iot-landing/firmware-logs", To: otherDAG},
		},
	}
	s.Downstream = []string{model, dashboard, sync}

	s.CauseKey = fmt.Sprintf("airflow:%s:%d", dag, s.Seed)
	if !s.Healthy {
		g.change(s.CauseKey, s.FaultAt, "pipeline", "airflow", []string{dag}, "jonas",
			"schedule changed from hourly to every 6 hours; partitions wait for a complete batch",
			map[string]string{"schedule": "10 */6 * * *", "previous_schedule": "10 * * * *"})
	}
	g.change(fmt.Sprintf("airflow:%s:%d", otherDAG, s.Seed), s.FaultAt.Add(time.Duration(r.IntN(30)-15)*time.Minute), "pipeline", "airflow",
		[]string{otherDAG}, "jonas", "schedule changed from daily to every 12 hours", map[string]string{"schedule": "0 */12 * * *"})
	g.change(fmt.Sprintf("dbt:%s:%d", model, s.Seed), s.FaultAt.Add(time.Duration(10+r.IntN(40))*time.Minute), "deploy", "dbt",
		[]string{model}, "ada", "fct_device_health: uptime counted per device-hour", nil)
	g.change(fmt.Sprintf("kafka-connect:%s:%d", connector, s.Seed), s.FaultAt.Add(-time.Duration(70+r.IntN(6))*time.Hour), "connector", "kafka-connect",
		[]string{connector}, "jonas", "flush.size raised from 1000 to 5000 records", map[string]string{"flush.size": "5000"})
	g.sortChanges()
}
