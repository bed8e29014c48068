// Package packload loads a scenario pack (internal/demo) into a warehouse
// and the store: the tables, the context graph (dbt manifest, team notes,
// OpenLineage events, connectors), the change log, team metrics and the
// schema versions seen. `dw demo load` and the embedded default's first
// start run the same code, so what a newcomer sees is what the demo shows.
package packload

import (
	"context"
	"fmt"
	"github.com/dataworkers/dw/internal/changelog"
	"github.com/dataworkers/dw/internal/lineage/ingest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/dataworkers/dw/internal/clock"
	"github.com/dataworkers/dw/internal/compat"
	"github.com/dataworkers/dw/internal/demo"
	"github.com/dataworkers/dw/internal/incidents"
	"github.com/dataworkers/dw/internal/lineage"
	"github.com/dataworkers/dw/internal/schemahistory"
	"github.com/dataworkers/dw/internal/store"
)

// Report says what a load wrote, for the screen.
type Report struct {
	Pack        string `json:"pack"`
	GraphAssets int    `json:"graph_assets_created"`
	GraphEdges  int    `json:"graph_edges_created"`
	Changes     int    `json:"changes_recorded"`
	Metrics     int    `json:"metrics_defined"`
	Versions    int    `json:"schema_versions_seen"`
	Warehouse   string `json:"warehouse,omitempty"`
}

// Read generates a pack's files into a temporary directory and reads them
// with every time moved onto the incident day of now. Generating (rather
// than reading testdata/) lets an installed binary seed itself anywhere.
func Read(pack string, now time.Time) (*demo.Pack, demo.Instants, error) {
	tl := demo.Timeline(now)
	files, err := demo.PackFiles(pack)
	if err != nil {
		return nil, tl, err
	}
	dir, err := os.MkdirTemp("", "dw-pack-")
	if err != nil {
		return nil, tl, err
	}
	defer os.RemoveAll(dir)
	dir = filepath.Join(dir, pack)
	for name, data := range files {
		path := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return nil, tl, err
		}
		if err := os.WriteFile(path, data, 0o644); err != nil {
			return nil, tl, err
		}
	}
	p, err := demo.ReadPack(dir, tl)
	return p, tl, err
}

// LoadStore writes a pack's graph, changes, metrics and schema versions
// into the store. Loading twice changes nothing: every write is idempotent.
func LoadStore(ctx context.Context, db *store.DB, clk clock.Clock, p *demo.Pack, warehouseName string) (*Report, error) {
	rep := &Report{Pack: p.Name}
	g := lineage.New(db, clk)
	// Notes first: an asset a team names (airflow://dag/…) keeps that id
	// when the manifest's exposure for it merges in through the note's
	// aliases.
	note, err := convertNotes(p.Notes)
	if err != nil {
		return nil, fmt.Errorf("pack %s notes: %w", p.Name, err)
	}
	nres, err := g.RecordLineage(ctx, note)
	if err != nil {
		return nil, fmt.Errorf("pack %s notes: %w", p.Name, err)
	}
	rep.GraphAssets += nres.AssetsCreated
	rep.GraphEdges += nres.EdgesCreated
	if len(p.Manifest) > 0 {
		res, err := ingest.DBTManifest(ctx, g, strings.NewReader(string(p.Manifest)), ingest.DBTOptions{})
		if err != nil {
			return nil, fmt.Errorf("pack %s manifest: %w", p.Name, err)
		}
		rep.GraphAssets += res.AssetsCreated
		rep.GraphEdges += res.EdgesCreated
	}
	for i, ev := range p.LineageEvents {
		res, err := ingest.RunEvents(ctx, g, ev, ingest.OpenLineageOptions{})
		if err != nil {
			return nil, fmt.Errorf("pack %s OpenLineage event %d: %w", p.Name, i, err)
		}
		rep.GraphAssets += res.AssetsCreated
		rep.GraphEdges += res.EdgesCreated
	}
	if specs := connectorSpecs(p.Connectors); len(specs) > 0 {
		res, err := ingest.Connectors(ctx, g, specs, ingest.ConnectorOptions{Cluster: "prod"})
		if err != nil {
			return nil, fmt.Errorf("pack %s connectors: %w", p.Name, err)
		}
		rep.GraphAssets += res.AssetsCreated
		rep.GraphEdges += res.EdgesCreated
	}
	svc := &incidents.Service{DB: db, Clock: clk}
	for _, c := range p.Changes {
		params := changelog.RecordChangeParams{
			Key: "pack:" + p.Name + ":" + c.ID, At: c.At, Kind: c.Kind, System: c.System, Assets: c.Assets,
			Actor: c.Actor, Source: c.Source, Summary: c.Summary, Details: map[string]string{},
		}
		for k, v := range c.Details {
			if k == "state_skipped" {
				params.StateSkipped, _ = v.(bool)
			}
			params.Details[k] = fmt.Sprint(v)
		}
		for _, f := range c.Fields {
			how := changelog.FieldOp(f.Change)
			if f.Change == "changed" {
				how = changelog.FieldTypeChanged
			}
			params.Fields = append(params.Fields, changelog.FieldChange{Name: f.Name, How: how})
		}
		res, err := (&changelog.Log{DB: db, Clock: clk}).RecordChange(ctx, params)
		if err != nil {
			return nil, fmt.Errorf("pack %s change %s: %w", p.Name, c.ID, err)
		}
		if res.Created {
			rep.Changes++
		}
	}
	for _, m := range p.Notes.Metrics {
		if _, err := svc.GetMetric(ctx, m.Name); err == nil {
			continue
		}
		grain := "hour"
		if m.Grain == "1d" {
			grain = "day"
		}
		if _, err := svc.DefineMetric(ctx, incidents.DefineMetricParams{Name: m.Name, Description: m.Description, Asset: m.Asset,
			Warehouse: warehouseName, SQL: m.SQL, ValueColumn: "value", TimeColumn: "bucket", Grain: grain}); err != nil {
			return nil, fmt.Errorf("pack %s metric %s: %w", p.Name, m.Name, err)
		}
		rep.Metrics++
	}
	var seen []schemahistory.SubjectVersion
	for _, s := range p.Subjects {
		for _, v := range s.Versions {
			if v.State != "registered" {
				continue
			}
			sum := ""
			if can, err := compat.Canonicalize(compat.Avro, compat.Schema{Text: v.Schema}); err == nil {
				sum = can.SHA256
			}
			seen = append(seen, schemahistory.SubjectVersion{Subject: s.Subject, Version: v.Version, ID: v.ID, SchemaType: "AVRO", Schema: v.Schema, SHA256: sum})
		}
	}
	fresh, err := schemahistory.RecordVersions(ctx, db, seen, clk.Now())
	if err != nil {
		return nil, err
	}
	rep.Versions = len(fresh)
	return rep, nil
}

// kinds maps the packs' note kinds onto the graph's.
var kinds = map[string]string{
	"flink_statement": "stream_job", "flink_job": "stream_job", "dag": "orchestrator_job", "dbt_job": "orchestrator_job",
	"sync": "reverse_etl_sync", "service": "application",
}

func convertNotes(n demo.Notes) (lineage.Note, error) {
	var out lineage.Note
	for _, a := range n.Assets {
		kind := a.Kind
		if k, ok := kinds[kind]; ok {
			kind = k
		}
		na := lineage.NoteAsset{ID: a.ID, Kind: kind, Title: a.Name, Owner: a.Owner, Domain: a.Domain,
			Description: a.Description, Tags: a.Tags, SQL: a.SQL, Aliases: a.Aliases}
		if a.Schedule != "" {
			na.Schedule = &lineage.Schedule{Cron: a.Schedule, Timezone: "UTC"}
		}
		out.Assets = append(out.Assets, na)
	}
	for _, e := range n.Edges {
		ne := lineage.NoteEdge{From: e.From, To: e.To, Kind: e.Kind, ReadsFields: e.Fields}
		tos := make([]string, 0, len(e.ColumnMap))
		for to := range e.ColumnMap {
			tos = append(tos, to)
		}
		sort.Strings(tos)
		for _, to := range tos {
			for _, from := range e.ColumnMap[to] {
				ne.Columns = append(ne.Columns, lineage.ColumnMapping{From: from, To: to})
			}
		}
		out.Edges = append(out.Edges, ne)
	}
	return out, nil
}

// connectorSpecs turns the pack's connectors into graph hops. In the packs
// the warehouse the connectors write to is the demo DuckDB file, so the
// tables are recorded on the duckdb platform where the checks find them.
func connectorSpecs(cs []demo.Connector) []ingest.ConnectorSpec {
	var out []ingest.ConnectorSpec
	for _, c := range cs {
		cfg := c.Info.Config
		dataset := cfg["defaultDataset"]
		for _, topic := range strings.Split(cfg["topics"], ",") {
			topic = strings.TrimSpace(topic)
			if topic == "" {
				continue
			}
			table := strings.ReplaceAll(topic, "-", "_")
			if dataset != "" {
				table = dataset + "." + table
			}
			out = append(out, ingest.ConnectorSpec{Name: c.Info.Name, Class: cfg["connector.class"], Direction: c.Info.Type,
				Topic: topic, Table: table, Platform: "duckdb"})
		}
	}
	return out
}
