package ingest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/dataworkers/dw/internal/lineage"
	"io"
	"net/url"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"
)

// OpenLineageOptions maps OpenLineage namespaces onto asset ids.
type OpenLineageOptions struct {
	KafkaClusters map[string]string `json:"kafka_clusters,omitempty" jsonschema:"Kafka bootstrap address (host:port as it appears in kafka:// namespaces) -> cluster name used in topic ids, e.g. {\"broker-1:9092\": \"prod\"}"`
	Namespaces    map[string]string `json:"namespaces,omitempty" jsonschema:"dataset namespace -> platform, for namespaces that are not a platform URL (e.g. {\"food_delivery\": \"postgres\"})"`
	Validate      bool              `json:"validate,omitempty" jsonschema:"reject the whole batch when an event fails the spec's required fields (off by default: integration test files omit runId or eventTime)"`
}

// OpenLineageImportResult says what a batch of run events changed.
type OpenLineageImportResult struct {
	lineage.ImportStats
	Events          int `json:"events" jsonschema:"events read, valid or not"`
	Imported        int `json:"imported" jsonschema:"events that named at least one dataset and were recorded"`
	WithoutDatasets int `json:"without_datasets" jsonschema:"events with no inputs or outputs (nothing to link)"`
	Jobs            int `json:"jobs" jsonschema:"distinct jobs recorded"`
	Datasets        int `json:"datasets" jsonschema:"distinct datasets recorded"`
	ColumnEdges     int `json:"column_edges" jsonschema:"edges that carry column lineage from a columnLineage facet"`
	// An event that is not a RunEvent, or names a dataset it cannot, is
	// left out and listed; the rest of the batch is recorded.
	InvalidCount int            `json:"invalid_count,omitempty" jsonschema:"events not recorded because they are not valid RunEvents"`
	Invalid      []InvalidEvent `json:"invalid,omitempty" jsonschema:"the first 20 events not recorded, by position, with what is wrong"`
}

// InvalidEvent is an event of a batch that was not recorded, and why.
type InvalidEvent struct {
	Index    int          `json:"index" jsonschema:"position of the event in the input, from 0"`
	Problems []FieldError `json:"problems" jsonschema:"what is wrong, each naming its field (at most 10)"`
}

// Bounds on what a batch's answer lists of its invalid events.
const (
	maxInvalidListed = 20
	maxEventProblems = 10
)

// notRunEvent says what an OpenLineage RunEvent holds, for a document
// that is something else.
const notRunEvent = "not an OpenLineage RunEvent: it has no job; a RunEvent has eventType, eventTime, run (with runId), " +
	"job (with namespace and name), inputs and outputs (datasets, each with namespace and name), producer and schemaURL"

// NoRunEventError refuses a batch in which no event is a valid RunEvent;
// nothing was recorded.
type NoRunEventError struct {
	Events  int            // events read
	Invalid []InvalidEvent // the first maxInvalidListed of them
}

func (e *NoRunEventError) Error() string {
	if e.Events == 0 {
		return "no OpenLineage events: the input holds none (an empty array); give one RunEvent, an array of them or one per line; nothing was recorded"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "no valid OpenLineage RunEvent among the %d events read, so nothing was recorded", e.Events)
	for i, ev := range e.Invalid {
		if i == 5 {
			fmt.Fprintf(&b, "; and %d more invalid events", e.Events-i)
			break
		}
		fmt.Fprintf(&b, "; event %d: ", ev.Index)
		for j, p := range ev.Problems {
			if j > 0 {
				b.WriteString(", ")
			}
			b.WriteString(p.Field + ": " + p.Message)
		}
	}
	return b.String()
}

type olField struct {
	Name        string    `json:"name"`
	Type        string    `json:"type"`
	Description string    `json:"description"`
	Fields      []olField `json:"fields"`
}

type olInputField struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Field     string `json:"field"`
}

type olDataset struct {
	Namespace string                     `json:"namespace"`
	Name      string                     `json:"name"`
	Facets    map[string]json.RawMessage `json:"facets"`
}

type olEvent struct {
	EventType string `json:"eventType"`
	EventTime string `json:"eventTime"`
	Producer  string `json:"producer"`
	SchemaURL string `json:"schemaURL"`
	Run       struct {
		RunID string `json:"runId"`
	} `json:"run"`
	Job struct {
		Namespace string                     `json:"namespace"`
		Name      string                     `json:"name"`
		Facets    map[string]json.RawMessage `json:"facets"`
	} `json:"job"`
	Inputs  []olDataset `json:"inputs"`
	Outputs []olDataset `json:"outputs"`
}

// standInRE matches the stand-ins integration test files use for
// values they don't pin: ${json-unit.any-string}, {{ any(result) }}.
var standInRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`\$\{json-unit\.[^}]*\}|\{\{[^}]*\}\}`) })

func isStandIn(s string) bool { return standInRE().MatchString(s) }

// splitEvents reads one event, a JSON array of events, or newline-delimited
// events.
func splitEvents(data []byte) ([]json.RawMessage, error) {
	data = bytes.TrimSpace(data)
	if len(data) == 0 {
		return nil, errors.New("no OpenLineage events: the input is empty")
	}
	switch data[0] {
	case '[':
		var arr []json.RawMessage
		if err := json.Unmarshal(data, &arr); err != nil {
			return nil, fmt.Errorf("OpenLineage events: the JSON array does not parse: %w", err)
		}
		return arr, nil
	case '{':
		dec := json.NewDecoder(bytes.NewReader(data))
		var out []json.RawMessage
		for {
			var one json.RawMessage
			err := dec.Decode(&one)
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			if err != nil {
				return nil, fmt.Errorf("OpenLineage event %d does not parse: %w", len(out), err)
			}
			out = append(out, one)
		}
	}
	return nil, fmt.Errorf("OpenLineage events must be a JSON object, an array of objects or one object per line; found %s", rawKind(data))
}

// RunEvents records OpenLineage run events: each input and output
// dataset and the job become assets, inputs -> job -> outputs become edges,
// the schema facet gives columns and the columnLineage facet gives column
// edges (the fields a job reads from each input, and which input field
// feeds which output field). Events from integration tests are tolerated:
// stand-ins like ${json-unit.any-string} mean absent values, and an
// event with no job name links its inputs straight to its outputs.
// An event that is not a RunEvent (no job object, fields of the wrong
// kind, a dataset without namespace and name) is left out and listed in
// Invalid while the rest is recorded; a batch with no valid event is
// refused with a *NoRunEventError and records nothing. With
// opts.Validate, any invalid event refuses the whole batch.
func RunEvents(ctx context.Context, g *lineage.Graph, data []byte, opts OpenLineageOptions) (*OpenLineageImportResult, error) {
	raws, err := splitEvents(data)
	if err != nil {
		return nil, err
	}
	res := &OpenLineageImportResult{Events: len(raws)}
	// Work out every event's assets and edges before writing, so a batch
	// refused whole changes nothing.
	var plans []*olPlan
	valid := 0
	for i, raw := range raws {
		if opts.Validate {
			if err := ValidateRunEvent(raw); err != nil {
				return nil, fmt.Errorf("event %d: %w; nothing was recorded", i, err)
			}
		}
		ev, probs := readEvent(raw)
		switch {
		case probs != nil:
		case len(ev.Inputs) == 0 && len(ev.Outputs) == 0:
			res.WithoutDatasets++
		default:
			p, err := planEvent(ev, opts)
			if err != nil {
				probs = eventProblems(err)
				break
			}
			plans = append(plans, p)
		}
		if probs == nil {
			valid++
			continue
		}
		if opts.Validate {
			return nil, fmt.Errorf("event %d: %w; nothing was recorded", i, &ValidationError{Problems: probs})
		}
		res.InvalidCount++
		if len(res.Invalid) < maxInvalidListed {
			res.Invalid = append(res.Invalid, InvalidEvent{Index: i, Problems: probs})
		}
	}
	if valid == 0 {
		return nil, &NoRunEventError{Events: len(raws), Invalid: res.Invalid}
	}
	jobs, datasets := map[string]bool{}, map[string]bool{}
	var warnings []string
	stats, err := g.Write(ctx, func(w *lineage.Writer) error {
		res.ColumnEdges = 0
		for _, p := range plans {
			seqs := map[string]int64{}
			for _, in := range p.assets {
				seq, err := w.UpsertAsset(in)
				if err != nil {
					return err
				}
				seqs[in.ID] = seq
			}
			for _, e := range p.edges {
				if e.cols != nil {
					res.ColumnEdges++
				}
				if err := w.Link(seqs[e.from], seqs[e.to], e.kind, lineage.SourceOpenLineage, e.cols, false); err != nil {
					return fmt.Errorf("edge %s -> %s: %w", e.from, e.to, err)
				}
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	for _, p := range plans {
		if p.job != "" {
			jobs[p.job] = true
		}
		for _, d := range p.datasets {
			datasets[d] = true
		}
		warnings = append(warnings, p.warnings...)
	}
	res.ImportStats = stats
	res.AddWarnings(warnings...)
	res.Imported, res.Jobs, res.Datasets = len(plans), len(jobs), len(datasets)
	return res, nil
}

// readEvent reads one event for import. It is as lenient as integration
// test files need (stand-ins, no runId or eventTime) but refuses what is
// not a RunEvent at all: a document without a job object (a credentials
// file, say), or fields of the wrong JSON kind.
func readEvent(raw json.RawMessage) (*olEvent, []FieldError) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(raw, &top); err != nil || top == nil {
		return nil, []FieldError{{"(event)", "must be a JSON object (an OpenLineage RunEvent), found " + rawKind(raw)}}
	}
	job, ok := top["job"]
	if !ok {
		return nil, []FieldError{{"(event)", notRunEvent}}
	}
	if k := rawKind(job); k != "an object" {
		return nil, []FieldError{{"job", "must be an object with namespace and name, found " + k}}
	}
	var ev olEvent
	if err := json.Unmarshal(raw, &ev); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return nil, []FieldError{{te.Field, "must be " + expectedKind(te.Type) + ", found " + foundKind(te.Value)}}
		}
		return nil, []FieldError{{"(event)", "does not decode as an OpenLineage RunEvent"}}
	}
	return &ev, nil
}

// eventProblems turns a planning error into the event's problems.
func eventProblems(err error) []FieldError {
	var ve *ValidationError
	if errors.As(err, &ve) {
		return ve.Problems
	}
	return []FieldError{{"(event)", err.Error()}}
}

type olEdge struct {
	from, to string
	kind     lineage.EdgeKind
	cols     []lineage.ColumnMapping
}

// olPlan is one event turned into asset inputs and edges (by asset id).
type olPlan struct {
	assets   []*lineage.AssetInput
	edges    []olEdge
	job      string
	datasets []string
	warnings []string
}

// facet decodes one facet, tolerating facets whose shape differs from the
// spec (producers extend them); a facet that doesn't fit is ignored.
func facet[T any](facets map[string]json.RawMessage, name string) *T {
	raw, ok := facets[name]
	if !ok {
		return nil
	}
	var v T
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil
	}
	return &v
}

// datasetAsset maps an OpenLineage dataset (namespace + name) to an asset:
// warehouse namespaces (snowflake://account, bigquery, postgres://host:port)
// become canonical table ids without the account or host, so they meet the
// same table seen by dbt; kafka://broker:port becomes kafka://cluster/topic.
func datasetAsset(ns, name string, opts OpenLineageOptions) (*lineage.AssetInput, error) {
	ns, name = strings.TrimSpace(ns), strings.TrimSpace(name)
	if ns == "" || name == "" || isStandIn(ns) || isStandIn(name) {
		return nil, fmt.Errorf("namespace and name are both required (a stand-in like ${json-unit.any-string} counts as absent); found namespace %s, name %s", safeName(ns), safeName(name))
	}
	// Both go into the dataset's ids; an *lineage.IDTextError names which.
	if err := lineage.CheckIDText("namespace", ns); err != nil {
		return nil, err
	}
	if err := lineage.CheckIDText("name", name); err != nil {
		return nil, err
	}
	alias := "openlineage://" + ns + "/" + name
	platform := opts.Namespaces[ns]
	scheme, auth := lineage.NamespaceAuthority(ns)
	if platform == "" {
		platform = lineage.NormalizePlatform(scheme)
	} else {
		platform = lineage.NormalizePlatform(platform)
	}
	in := &lineage.AssetInput{Source: lineage.SourceOpenLineage, Platform: platform, Kind: lineage.KindDataset}
	switch {
	case platform == "kafka":
		cluster := auth
		if c, ok := opts.KafkaClusters[auth]; ok {
			cluster = c
		}
		if strings.TrimSpace(cluster) == "" {
			return nil, errors.New("a kafka namespace needs the broker address (kafka://host:port) to name the cluster in topic ids")
		}
		id, err := lineage.TopicID(cluster, name)
		if err != nil {
			return nil, quotedNamesSafe(err, name)
		}
		in.ID, in.Kind = id, lineage.KindTopic
	case lineage.IsWarehouse(platform):
		id, weak, err := lineage.TableID(platform, name)
		if err != nil {
			return nil, fmt.Errorf("not a %s table name: %w", platform, quotedNamesSafe(err, name))
		}
		in.ID, in.Kind = id, lineage.KindTable
		if weak != "" {
			in.Weak = []string{weak}
		}
	case scheme != "" && strings.Contains(ns, "://") || scheme == "file":
		sep := ""
		if auth != "" && !strings.HasPrefix(name, "/") {
			sep = "/"
		}
		in.ID = scheme + "://" + auth + sep + name
	default:
		in.ID = alias
		in.Platform = strings.ToLower(ns)
	}
	in.Names = []string{in.ID, alias}
	return in, nil
}

func flattenFields(prefix string, fs []olField, out *[]lineage.Column) {
	for _, f := range fs {
		if f.Name == "" {
			continue
		}
		name := prefix + f.Name
		*out = append(*out, lineage.Column{Name: name, Type: f.Type, Description: f.Description})
		flattenFields(name+".", f.Fields, out)
	}
}

func jobAsset(ev *olEvent) *lineage.AssetInput {
	ns, name := strings.TrimSpace(ev.Job.Namespace), strings.TrimSpace(ev.Job.Name)
	if name == "" || isStandIn(name) {
		return nil
	}
	type jobType struct {
		ProcessingType string `json:"processingType"`
		Integration    string `json:"integration"`
		JobType        string `json:"jobType"`
	}
	jt := facet[jobType](ev.Job.Facets, "jobType")
	if jt == nil {
		jt = &jobType{}
	}
	integration := strings.ToLower(strings.TrimSpace(jt.Integration))
	streaming := strings.EqualFold(jt.ProcessingType, "STREAMING")
	kind := lineage.KindJob
	if streaming {
		kind = lineage.KindStreamJob
	}
	alias := "openlineage://" + ns + "/" + name
	in := &lineage.AssetInput{Source: lineage.SourceOpenLineage, Kind: kind, Platform: integration}
	switch {
	case integration == "dbt" && (strings.HasPrefix(name, "model.") || strings.HasPrefix(name, "seed.") || strings.HasPrefix(name, "snapshot.")):
		in.ID = "dbt://" + name
		in.Kind = map[string]lineage.Kind{"model": lineage.KindDBTModel, "seed": lineage.KindSeed, "snapshot": lineage.KindSnapshot}[name[:strings.Index(name, ".")]]
		in.Platform = ""
	case integration == "airflow":
		in.Kind = lineage.KindOrchestratorJob
		if strings.EqualFold(jt.JobType, "DAG") {
			in.ID = "airflow://dag/" + name
		} else {
			in.ID = "airflow://task/" + name
		}
	case integration == "dagster" || integration == "prefect":
		in.Kind = lineage.KindOrchestratorJob
		in.ID = integration + "://" + name
	case integration == "flink":
		in.Kind = lineage.KindStreamJob
		in.ID = "flink://" + name
	case integration != "" && lineage.PlatformToken().MatchString(integration):
		in.ID = integration + "://" + name
	default:
		in.ID = alias
		in.Platform = strings.ToLower(ns)
	}
	in.Names = []string{in.ID, alias}
	if sq := facet[struct {
		Query string `json:"query"`
	}](ev.Job.Facets, "sql"); sq != nil {
		in.SQL = strings.TrimSpace(sq.Query)
	}
	if doc := facet[struct {
		Description string `json:"description"`
	}](ev.Job.Facets, "documentation"); doc != nil {
		in.Description = strings.TrimSpace(doc.Description)
	}
	in.Owner = ownershipFacet(ev.Job.Facets)
	return in
}

func ownershipFacet(facets map[string]json.RawMessage) string {
	own := facet[struct {
		Owners []struct {
			Name string `json:"name"`
		} `json:"owners"`
	}](facets, "ownership")
	if own == nil || len(own.Owners) == 0 {
		return ""
	}
	return strings.TrimPrefix(own.Owners[0].Name, "team:")
}

// planEvent turns one event into assets and edges.
func planEvent(ev *olEvent, opts OpenLineageOptions) (*olPlan, error) {
	p := &olPlan{}
	byID := map[string]*lineage.AssetInput{}
	var inputs, outputs []string
	add := func(d olDataset, side string, i int) (string, error) {
		in, err := datasetAsset(d.Namespace, d.Name, opts)
		if err != nil {
			field := fmt.Sprintf("%s[%d]", side, i)
			if te, ok := errors.AsType[*lineage.IDTextError](err); ok {
				return "", &ValidationError{Problems: []FieldError{{field + "." + te.Field, te.Reason()}}}
			}
			return "", &ValidationError{Problems: []FieldError{{field, err.Error()}}}
		}
		if sch := facet[struct {
			Fields []olField `json:"fields"`
		}](d.Facets, "schema"); sch != nil {
			flattenFields("", sch.Fields, &in.Columns)
		}
		if doc := facet[struct {
			Description string `json:"description"`
		}](d.Facets, "documentation"); doc != nil {
			in.Description = strings.TrimSpace(doc.Description)
		}
		in.Owner = ownershipFacet(d.Facets)
		if sl := facet[struct {
			Identifiers []struct {
				Namespace string `json:"namespace"`
				Name      string `json:"name"`
			} `json:"identifiers"`
		}](d.Facets, "symlinks"); sl != nil {
			for _, s := range sl.Identifiers {
				if alt, err := datasetAsset(s.Namespace, s.Name, opts); err == nil {
					// A symlink is another name of the same dataset.
					in.Names = append(in.Names, alt.Names...)
				}
			}
		}
		if prev, ok := byID[in.ID]; ok {
			prev.Columns = lineage.MergeColumns(prev.Columns, in.Columns)
			return in.ID, nil
		}
		byID[in.ID] = in
		p.assets = append(p.assets, in)
		p.datasets = append(p.datasets, in.ID)
		return in.ID, nil
	}
	for i, d := range ev.Inputs {
		id, err := add(d, "inputs", i)
		if err != nil {
			return nil, err
		}
		inputs = appendUnique(inputs, id)
	}
	for i, d := range ev.Outputs {
		id, err := add(d, "outputs", i)
		if err != nil {
			return nil, err
		}
		outputs = appendUnique(outputs, id)
	}

	// Column lineage, per output: which input fields feed which output
	// fields (to "*" for dataset-wide influence such as filters and joins).
	type pair struct{ in, out string }
	reads := map[string][]lineage.ColumnMapping{}
	viaJob := map[string][]lineage.ColumnMapping{}
	direct := map[pair][]lineage.ColumnMapping{}
	type cll struct {
		Fields map[string]struct {
			InputFields []olInputField `json:"inputFields"`
		} `json:"fields"`
		Dataset []olInputField `json:"dataset"`
	}
	for _, d := range ev.Outputs {
		c := facet[cll](d.Facets, "columnLineage")
		if c == nil {
			continue
		}
		outIn, err := datasetAsset(d.Namespace, d.Name, opts)
		if err != nil {
			continue
		}
		out := outIn.ID
		viaJob[out] = []lineage.ColumnMapping{}
		note := func(f olInputField, to string) {
			src, err := datasetAsset(f.Namespace, f.Name, opts)
			if err != nil || strings.TrimSpace(f.Field) == "" {
				p.warnings = append(p.warnings, fmt.Sprintf("column lineage of %s names an input field whose namespace, name or field is missing or not a valid name; skipped", out))
				return
			}
			if _, ok := byID[src.ID]; !ok {
				// Column lineage may name an input the event didn't list.
				byID[src.ID] = src
				p.assets = append(p.assets, src)
				p.datasets = append(p.datasets, src.ID)
				inputs = appendUnique(inputs, src.ID)
			}
			reads[src.ID] = append(reads[src.ID], lineage.ColumnMapping{From: f.Field})
			viaJob[out] = append(viaJob[out], lineage.ColumnMapping{From: f.Field, To: to})
			k := pair{src.ID, out}
			direct[k] = append(direct[k], lineage.ColumnMapping{From: f.Field, To: to})
		}
		cols := make([]string, 0, len(c.Fields))
		for k := range c.Fields {
			cols = append(cols, k)
		}
		sort.Strings(cols)
		for _, col := range cols {
			for _, f := range c.Fields[col].InputFields {
				note(f, col)
			}
		}
		for _, f := range c.Dataset {
			note(f, "*")
		}
	}

	for _, f := range []struct{ field, s string }{{"job.namespace", ev.Job.Namespace}, {"job.name", ev.Job.Name}} {
		// The job's namespace and name become its ids.
		if err := lineage.CheckIDText("", strings.TrimSpace(f.s)); err != nil {
			return nil, &ValidationError{Problems: []FieldError{{f.field, err.(*lineage.IDTextError).Reason()}}}
		}
	}
	job := jobAsset(ev)
	if job == nil {
		for _, in := range inputs {
			for _, out := range outputs {
				e := olEdge{from: in, to: out}
				if cols, ok := direct[pair{in, out}]; ok {
					e.cols = cols
				}
				p.edges = append(p.edges, e)
			}
		}
		return p, nil
	}
	// A dbt model's run writes the model's own relation: they are one asset.
	if job.Kind == lineage.KindDBTModel || job.Kind == lineage.KindSeed || job.Kind == lineage.KindSnapshot {
		if len(outputs) == 1 {
			out := byID[outputs[0]]
			job.Names = append(job.Names, out.Names...)
			job.Weak = append(job.Weak, out.Weak...)
			job.Columns = out.Columns
			job.Platform = out.Platform
			p.assets = removeAsset(p.assets, out.ID)
			p.datasets = removeString(p.datasets, out.ID)
			inputs = removeString(inputs, out.ID) // a model reading its own relation (incremental)
			outputs = nil
			viaJob = nil
		}
	}
	p.job = job.ID
	p.assets = append(p.assets, job)
	for _, in := range inputs {
		e := olEdge{from: in, to: job.ID}
		if r, ok := reads[in]; ok {
			e.cols = r
		}
		p.edges = append(p.edges, e)
	}
	for _, out := range outputs {
		e := olEdge{from: job.ID, to: out}
		if cols, ok := viaJob[out]; ok {
			e.cols = cols
		}
		p.edges = append(p.edges, e)
	}
	return p, nil
}

func appendUnique(list []string, s string) []string {
	for _, x := range list {
		if x == s {
			return list
		}
	}
	return append(list, s)
}

func removeString(list []string, s string) []string {
	out := list[:0:0]
	for _, x := range list {
		if x != s {
			out = append(out, x)
		}
	}
	return out
}

func removeAsset(list []*lineage.AssetInput, id string) []*lineage.AssetInput {
	out := list[:0:0]
	for _, x := range list {
		if x.ID != id {
			out = append(out, x)
		}
	}
	return out
}

// RunEvent event types the spec allows.
var runEventTypes = []string{"START", "RUNNING", "COMPLETE", "ABORT", "FAIL", "OTHER"}

// uuidRE is compiled on first use: every agent links this package, few calls need it.
var uuidRE = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)
})

// FieldError is one problem with an event, naming the field.
type FieldError struct {
	Field   string `json:"field" jsonschema:"JSON path of the field, e.g. run.runId"`
	Message string `json:"message" jsonschema:"what is wrong and what is valid"`
}

// ValidationError lists every problem found in a run event.
type ValidationError struct {
	Problems []FieldError `json:"problems" jsonschema:"every problem found, each naming its field"`
}

// Error lists the problems, each prefixed by its field.
func (e *ValidationError) Error() string {
	parts := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		parts[i] = p.Field + ": " + p.Message
	}
	return "invalid OpenLineage RunEvent: " + strings.Join(parts, "; ")
}

// ValidateRunEvent checks the fields the OpenLineage spec requires of a
// RunEvent: eventTime (an ISO-8601 date-time with offset), producer and
// schemaURL (URIs), run.runId (a UUID), job.namespace and job.name, a
// known eventType when one is given, and a namespace and name on every
// dataset. Every problem is reported, each naming its field.
func ValidateRunEvent(raw json.RawMessage) error {
	var ev map[string]any
	if err := json.Unmarshal(raw, &ev); err != nil || ev == nil {
		return &ValidationError{Problems: []FieldError{{Field: "(event)", Message: "must be a JSON object (an OpenLineage RunEvent), found " + rawKind(raw)}}}
	}
	// Values are described, never quoted: the event may come from any file.
	var probs []FieldError
	more := 0
	bad := func(field, msg string) {
		if len(probs) < maxEventProblems {
			probs = append(probs, FieldError{field, msg})
		} else {
			more++
		}
	}
	str := func(m map[string]any, key, field string) (string, bool) {
		v, ok := m[key]
		if !ok || v == nil {
			bad(field, "is required")
			return "", false
		}
		s, ok := v.(string)
		if !ok {
			bad(field, "must be a string, found "+jsonKind(v))
			return "", false
		}
		if strings.TrimSpace(s) == "" {
			bad(field, "must not be empty")
			return "", false
		}
		return s, true
	}
	obj := func(m map[string]any, key, field string) map[string]any {
		v, ok := m[key]
		if !ok || v == nil {
			bad(field, "is required")
			return nil
		}
		o, ok := v.(map[string]any)
		if !ok {
			bad(field, "must be an object, found "+jsonKind(v))
			return nil
		}
		return o
	}
	uri := func(field, s string) {
		u, err := url.Parse(s)
		if err != nil || u.Scheme == "" {
			bad(field, "must be a URI with a scheme (e.g. https://github.com/org/repo), found "+describeString(s))
		}
	}
	if s, ok := str(ev, "eventTime", "eventTime"); ok {
		if _, err := time.Parse(time.RFC3339Nano, s); err != nil {
			bad("eventTime", "must be an ISO-8601 date-time with offset (e.g. 2024-11-26T13:05:29.606Z), found "+describeString(s))
		}
	}
	if s, ok := str(ev, "producer", "producer"); ok {
		uri("producer", s)
	}
	if s, ok := str(ev, "schemaURL", "schemaURL"); ok {
		uri("schemaURL", s)
	}
	if v, ok := ev["eventType"]; ok && v != nil {
		s, isString := v.(string)
		valid := false
		for _, t := range runEventTypes {
			valid = valid || s == t
		}
		if !valid {
			found := jsonKind(v)
			if isString {
				found = describeString(s)
			}
			bad("eventType", "must be one of "+strings.Join(runEventTypes, ", ")+", found "+found)
		}
	}
	if run := obj(ev, "run", "run"); run != nil {
		if s, ok := str(run, "runId", "run.runId"); ok && !uuidRE().MatchString(s) {
			bad("run.runId", "must be a UUID (e.g. 0192963f-f6f8-71c0-8380-500bc70883ee), found "+describeString(s))
		}
	}
	// Names that become asset ids follow the id text rule
	// (lineage.CheckIDText); the refused character is named, not the value.
	idText := func(field, s string) {
		if err := lineage.CheckIDText("", strings.TrimSpace(s)); err != nil {
			bad(field, err.(*lineage.IDTextError).Reason())
		}
	}
	if job := obj(ev, "job", "job"); job != nil {
		if s, ok := str(job, "namespace", "job.namespace"); ok {
			idText("job.namespace", s)
		}
		if s, ok := str(job, "name", "job.name"); ok {
			idText("job.name", s)
		}
	}
	for _, side := range []string{"inputs", "outputs"} {
		v, ok := ev[side]
		if !ok || v == nil {
			continue
		}
		list, ok := v.([]any)
		if !ok {
			bad(side, "must be an array, found "+jsonKind(v))
			continue
		}
		for i, d := range list {
			field := fmt.Sprintf("%s[%d]", side, i)
			m, ok := d.(map[string]any)
			if !ok {
				bad(field, "must be an object with namespace and name, found "+jsonKind(d))
				continue
			}
			if s, ok := str(m, "namespace", field+".namespace"); ok {
				idText(field+".namespace", s)
			}
			if s, ok := str(m, "name", field+".name"); ok {
				idText(field+".name", s)
			}
		}
	}
	if more > 0 {
		probs = append(probs, FieldError{"(event)", fmt.Sprintf("and %d more problems", more)})
	}
	if len(probs) > 0 {
		return &ValidationError{Problems: probs}
	}
	return nil
}
