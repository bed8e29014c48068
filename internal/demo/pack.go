package demo

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/dataworkers/dw/internal/config"
)

// Pack is a scenario pack's metadata (everything but the warehouse
// tables), read from testdata/scenarios/<name>/ with every time moved onto
// one Instants' incident day.
type Pack struct {
	// Name is the pack's directory name (billing, loyalty).
	Name string `json:"name"`
	// Dir is where the files were read from.
	Dir string `json:"dir"`
	// Manifest is the dbt manifest (schema v12), times moved.
	Manifest json.RawMessage `json:"manifest,omitempty"`
	// Notes are the team's lineage notes: assets and edges no tool reports.
	Notes Notes `json:"notes"`
	// People and Domains are the dw.yaml fragment (people.yaml).
	People  []config.Person `json:"people"`
	Domains []config.Domain `json:"domains"`
	// Subjects are the Schema Registry subjects with their versions.
	Subjects []Subject `json:"subjects,omitempty"`
	// Changes are the change log, oldest first.
	Changes []Change `json:"changes"`
	// Connectors are Kafka Connect connectors as GET
	// /connectors?expand=info&expand=status returns them.
	Connectors []Connector `json:"connectors,omitempty"`
	// LineageEvents are OpenLineage RunEvents, in file order.
	LineageEvents []json.RawMessage `json:"lineage_events,omitempty"`
}

// Notes are lineage a team records once: the parts of the graph no
// system reports (a Flink statement's SQL and the fields it reads, a
// Tableflow landing, a dashboard or DAG outside dbt).
type Notes struct {
	Assets  []NoteAsset `json:"assets"`
	Edges   []NoteEdge  `json:"edges"`
	Metrics []MetricDef `json:"metrics,omitempty"`
}

// NoteAsset is one node of the context graph.
type NoteAsset struct {
	// ID is platform://path, e.g. kafka://prod/api-usage.
	ID string `json:"id"`
	// Kind is topic, schema_subject, flink_statement, flink_job, table,
	// connector, dashboard, dag, sync, dbt_job or service.
	Kind     string `json:"kind"`
	Platform string `json:"platform"`
	Name     string `json:"name"`
	// Description says what the asset is for.
	Description string `json:"description,omitempty"`
	// Owner is a person id from people.yaml.
	Owner  string `json:"owner,omitempty"`
	Domain string `json:"domain,omitempty"`
	// Tags include outbound, money, customer-facing.
	Tags []string `json:"tags,omitempty"`
	// Schedule is a cron expression in UTC, for jobs.
	Schedule string `json:"schedule,omitempty"`
	// Aliases are the same asset's ids in other sources (dbt unique ids
	// prefixed dbt://, warehouse tables), for merging.
	Aliases []string `json:"aliases,omitempty"`
	// SQL is a statement's or job's query text.
	SQL string `json:"sql,omitempty"`
	// Properties are platform details (cluster, value subject, version).
	Properties map[string]string `json:"properties,omitempty"`
}

// NoteEdge is a directed edge: data flows From -> To.
type NoteEdge struct {
	From string `json:"from"`
	To   string `json:"to"`
	// Kind is reads (To reads From), writes (From writes To),
	// materializes (From is landed as the table To) or feeds (From shapes
	// To, e.g. a topic's value schema).
	Kind string `json:"kind"`
	// Fields are the fields of From that To uses.
	Fields []string `json:"fields,omitempty"`
	// ColumnMap maps a column of To to the fields of From it comes from.
	ColumnMap map[string][]string `json:"column_map,omitempty"`
	// Via names the mechanism (tableflow, kafka-connect, hightouch).
	Via  string `json:"via,omitempty"`
	Note string `json:"note,omitempty"`
}

// MetricDef is a team metric computed in the warehouse: SQL returning one
// row per bucket with columns bucket and value.
type MetricDef struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	// Asset is the asset the metric is about.
	Asset string `json:"asset"`
	SQL   string `json:"sql"`
	// Grain is the bucket size (1h, 1d).
	Grain string `json:"grain"`
	Owner string `json:"owner"`
}

// Subject is a Schema Registry subject with its versions.
type Subject struct {
	Subject       string          `json:"subject"`
	Compatibility string          `json:"compatibility"`
	Versions      []SchemaVersion `json:"versions"`
}

// SchemaVersion is one version of a subject. Proposed versions (not yet
// registered) have no id or registration time.
type SchemaVersion struct {
	Version      int        `json:"version"`
	ID           int        `json:"id,omitempty"`
	State        string     `json:"state"` // registered or proposed
	RegisteredAt *time.Time `json:"registered_at,omitempty"`
	RegisteredBy string     `json:"registered_by,omitempty"`
	// File is the .avsc path relative to the pack directory.
	File string `json:"file"`
	// Schema is the file's content (filled by ReadPack).
	Schema string `json:"schema,omitempty"`
}

// Change is one entry of the change log.
type Change struct {
	ID string    `json:"id"`
	At time.Time `json:"at"`
	// Kind is deploy, schema_version, restore, config, connector or pipeline.
	Kind string `json:"kind"`
	// System is where the change happened (schema-registry, flink, dbt, …).
	System string `json:"system"`
	// Assets are the asset ids touched.
	Assets []string `json:"assets"`
	// Fields are the fields touched, with how.
	Fields []FieldChange `json:"fields,omitempty"`
	// Actor is a person id from people.yaml.
	Actor   string `json:"actor"`
	Source  string `json:"source"`
	Summary string `json:"summary"`
	// Details are the system's own facts about the change (versions,
	// savepoints, flags such as state_skipped).
	Details map[string]any `json:"details,omitempty"`
}

// FieldChange is a field a change touched: added, removed or changed.
type FieldChange struct {
	Name   string `json:"name"`
	Change string `json:"change"`
}

// Connector is a Kafka Connect connector's info and status.
type Connector struct {
	Info   ConnectorInfo   `json:"info"`
	Status ConnectorStatus `json:"status"`
}

// ConnectorInfo is GET /connectors/{name}.
type ConnectorInfo struct {
	Name   string            `json:"name"`
	Config map[string]string `json:"config"`
	Tasks  []ConnectorTaskID `json:"tasks"`
	Type   string            `json:"type"`
}

// ConnectorTaskID names one task.
type ConnectorTaskID struct {
	Connector string `json:"connector"`
	Task      int    `json:"task"`
}

// ConnectorStatus is GET /connectors/{name}/status.
type ConnectorStatus struct {
	Name      string `json:"name"`
	Connector struct {
		State    string `json:"state"`
		WorkerID string `json:"worker_id"`
	} `json:"connector"`
	Tasks []ConnectorTaskStatus `json:"tasks"`
	Type  string                `json:"type"`
}

// ConnectorTaskStatus is one task's state.
type ConnectorTaskStatus struct {
	ID       int    `json:"id"`
	State    string `json:"state"`
	WorkerID string `json:"worker_id"`
	Trace    string `json:"trace,omitempty"`
}

// Pack file names, relative to the pack directory.
const (
	fileManifest   = "manifest.json"
	fileNotes      = "notes.json"
	filePeople     = "people.yaml"
	fileRegistry   = "registry.json"
	fileChanges    = "changes.json"
	fileConnectors = "connectors.json"
	fileLineage    = "openlineage.json"
)

// ReadPack reads the pack in dir and moves every time in it from PackDay
// onto tl.Day. notes.json, people.yaml and changes.json are required; the
// others are read when present.
func ReadPack(dir string, tl Instants) (*Pack, error) {
	st, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("scenario pack: %w", err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("scenario pack %s is not a directory", dir)
	}
	p := &Pack{Name: filepath.Base(dir), Dir: dir}
	delta := tl.Day.Sub(PackDay)
	read := func(name string, required bool, into any) error {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if errors.Is(err, fs.ErrNotExist) && !required {
			return nil
		}
		if err != nil {
			return fmt.Errorf("scenario pack %s: %w", p.Name, err)
		}
		shifted, err := shiftTimes(data, delta)
		if err != nil {
			return fmt.Errorf("scenario pack %s: %s: %w", p.Name, name, err)
		}
		if raw, ok := into.(*json.RawMessage); ok {
			*raw = shifted
			return nil
		}
		dec := json.NewDecoder(bytes.NewReader(shifted))
		dec.DisallowUnknownFields()
		if err := dec.Decode(into); err != nil {
			return fmt.Errorf("scenario pack %s: %s: %w", p.Name, name, err)
		}
		return nil
	}
	if err := read(fileManifest, false, &p.Manifest); err != nil {
		return nil, err
	}
	if err := read(fileNotes, true, &p.Notes); err != nil {
		return nil, err
	}
	if err := read(fileChanges, true, &p.Changes); err != nil {
		return nil, err
	}
	sort.SliceStable(p.Changes, func(i, j int) bool { return p.Changes[i].At.Before(p.Changes[j].At) })
	var connectors map[string]Connector
	if err := read(fileConnectors, false, &connectors); err != nil {
		return nil, err
	}
	for _, name := range sortedKeys(connectors) {
		p.Connectors = append(p.Connectors, connectors[name])
	}
	var events json.RawMessage
	if err := read(fileLineage, false, &events); err != nil {
		return nil, err
	}
	if len(events) > 0 {
		if err := json.Unmarshal(events, &p.LineageEvents); err != nil {
			return nil, fmt.Errorf("scenario pack %s: %s must be a JSON array of RunEvents: %w", p.Name, fileLineage, err)
		}
	}
	var registry struct {
		Subjects []Subject `json:"subjects"`
	}
	if err := read(fileRegistry, false, &registry); err != nil {
		return nil, err
	}
	for si := range registry.Subjects {
		s := &registry.Subjects[si]
		for vi := range s.Versions {
			v := &s.Versions[vi]
			data, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(v.File)))
			if err != nil {
				return nil, fmt.Errorf("scenario pack %s: subject %s version %d: %w", p.Name, s.Subject, v.Version, err)
			}
			v.Schema = string(data)
		}
	}
	p.Subjects = registry.Subjects
	peopleData, err := os.ReadFile(filepath.Join(dir, filePeople))
	if err != nil {
		return nil, fmt.Errorf("scenario pack %s: %w", p.Name, err)
	}
	cfg, err := config.Parse(filepath.Join(dir, filePeople), peopleData)
	if err != nil {
		return nil, err
	}
	p.People, p.Domains = cfg.People, cfg.Domains
	return p, nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// shiftTimes moves every RFC 3339 timestamp string in a JSON document by
// delta. Pack files keep times nowhere else (no epoch numbers), so this one
// rule places a whole file on the timeline.
func shiftTimes(data []byte, delta time.Duration) ([]byte, error) {
	if delta == 0 {
		return data, nil
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var doc any
	if err := dec.Decode(&doc); err != nil {
		return nil, err
	}
	doc = shiftValue(doc, delta)
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(doc); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func shiftValue(v any, delta time.Duration) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = shiftValue(e, delta)
		}
	case []any:
		for i, e := range x {
			x[i] = shiftValue(e, delta)
		}
	case string:
		if t, ok := parseStamp(x); ok {
			return formatStamp(t.Add(delta), x)
		}
	}
	return v
}

// parseStamp accepts a full RFC 3339 date-time and nothing shorter.
func parseStamp(s string) (time.Time, bool) {
	if len(s) < len("2006-01-02T15:04:05Z") || s[4] != '-' || s[10] != 'T' {
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	return t, err == nil
}

// formatStamp keeps the original's precision and zone style.
func formatStamp(t time.Time, orig string) string {
	layout := time.RFC3339
	if strings.Contains(orig, ".") {
		frac := orig[strings.IndexByte(orig, '.')+1:]
		n := strings.IndexAny(frac, "Z+-")
		if n < 0 {
			n = len(frac)
		}
		layout = "2006-01-02T15:04:05." + strings.Repeat("0", n) + "Z07:00"
	}
	return t.Format(layout)
}
