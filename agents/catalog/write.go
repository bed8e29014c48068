package catalog

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/dataworkers/dw/internal/bound"
	"github.com/dataworkers/dw/internal/checks"
	"github.com/dataworkers/dw/internal/fileinput"
	"github.com/dataworkers/dw/internal/lineage"
	"github.com/dataworkers/dw/internal/lineage/ingest"
	"github.com/dataworkers/dw/internal/mcpserver"
)

// maxNoteItems bounds each list of one note (path entries, edges,
// assets): the whole note is written in one transaction, and a larger
// graph is imported in several notes or from a dbt manifest or
// OpenLineage events.
const maxNoteItems = 10000

var recordLineageTool = mcpserver.Tool{
	Name:  "record_lineage",
	Title: "Record what a team knows about lineage",
	Description: "Records the lineage a team knows and no tool reports, once: a hop (topic -> stream job -> table), the fields a job reads and the SQL it runs " +
		"(e.g. a Flink statement that sums response_bytes), a schedule, an owner, a domain, tags (outbound, money, regulator, customer-facing). Recording the same note again changes nothing. " +
		"It overwrites: a given owner, domain, title, description, schedule or SQL replaces the recorded one, and remove_tags drops tags. " +
		fmt.Sprintf("At most %d path entries, %d edges and %d assets per call; the answer counts everything and lists the first ids (assets_total, edges_total).", maxNoteItems, maxNoteItems, maxNoteItems),
	ReadOnly: false, Destructive: true, Idempotent: true, OpenWorld: false,
	InputSchema: mcpserver.InputSchema[lineage.Note](func(s *jsonschema.Schema) {
		for _, name := range []string{"path", "edges", "assets"} {
			p := s.Properties[name]
			p.MaxItems = ptr(maxNoteItems)
			p.Description += fmt.Sprintf("; at most %d", maxNoteItems)
		}
		// A table or topic may have thousands of columns, and a job read
		// or map every one: those lists take the note's own bound.
		for _, name := range []string{"assets.columns", "assets.reads_fields", "edges.columns", "edges.reads_fields"} {
			mcpserver.Items(s, name, 0, maxNoteItems)
		}
	}),
}

// RecordLineageOut is what a note wrote, bounded: every count, and the
// first ids of each list within a character budget, so a 100,000-edge note
// answers in a few kilobytes (the graph tools read the rest).
type RecordLineageOut struct {
	lineage.ImportStats
	Assets           []string            `json:"assets" jsonschema:"ids of the assets the note touched: the first ones, when assets_total is larger"`
	AssetsTotal      int                 `json:"assets_total" jsonschema:"assets the note touched in all"`
	Edges            []lineage.EdgeRef   `json:"edges" jsonschema:"edges the note recorded: the first ones, when edges_total is larger"`
	EdgesTotal       int                 `json:"edges_total" jsonschema:"edges the note recorded in all"`
	ReadsFields      map[string][]string `json:"reads_fields,omitempty" jsonschema:"per edge (from -> to), the fields recorded as read: the first edges, when reads_fields_total is larger"`
	ReadsFieldsTotal int                 `json:"reads_fields_total,omitempty" jsonschema:"edges with fields recorded as read, in all"`
}

// Budgets of the answer's lists, in characters of id text: an id may be
// 512 characters, so a count alone would not bound the answer.
const (
	maxListed       = 100
	listBudget      = 8000
	readsBudget     = 6000
	maxFieldsListed = 20
)

func boundNoteResult(res *lineage.NoteResult) *RecordLineageOut {
	out := &RecordLineageOut{ImportStats: res.ImportStats, AssetsTotal: len(res.Assets), EdgesTotal: len(res.Edges), ReadsFieldsTotal: len(res.ReadsFields)}
	k := bound.First(len(res.Assets), maxListed, listBudget, func(i int) int { return len(res.Assets[i]) + 3 })
	out.Assets = res.Assets[:k]
	k = bound.First(len(res.Edges), maxListed, listBudget, func(i int) int { return len(res.Edges[i].From) + len(res.Edges[i].To) + 20 })
	out.Edges = res.Edges[:k]
	if len(res.ReadsFields) > 0 {
		keys := make([]string, 0, len(res.ReadsFields))
		for key := range res.ReadsFields {
			keys = append(keys, key)
		}
		slices.Sort(keys)
		fields := func(key string) []string { f := res.ReadsFields[key]; return f[:min(len(f), maxFieldsListed)] }
		k = bound.First(len(keys), maxListed, readsBudget, func(i int) int {
			n := len(keys[i]) + 6
			for _, f := range fields(keys[i]) {
				n += len(f) + 3
			}
			return n
		})
		out.ReadsFields = make(map[string][]string, k)
		for _, key := range keys[:k] {
			out.ReadsFields[key] = fields(key)
		}
	}
	return out
}

func (h *handlers) recordLineage(ctx context.Context, in lineage.Note) (*RecordLineageOut, string, error) {
	g, err := h.graph(ctx)
	if err != nil {
		return nil, "", err
	}
	res, err := g.RecordLineage(ctx, in)
	if err != nil {
		return nil, "", err
	}
	out := boundNoteResult(res)
	return out, statsLine("note", out.ImportStats), nil
}

// ImportDBTIn is a manifest by path or inline.
type ImportDBTIn struct {
	Path     string `json:"path,omitempty" jsonschema:"path of a dbt target/manifest.json on this machine; give this or manifest"`
	Manifest string `json:"manifest,omitempty" jsonschema:"the manifest.json content itself; give this or path"`
	Domain   string `json:"domain,omitempty" jsonschema:"domain for nodes whose meta names none"`
	Owner    string `json:"owner,omitempty" jsonschema:"owner for nodes whose meta, group or exposure names none"`
}

var importDBTTool = mcpserver.Tool{
	Name:  "import_dbt_manifest",
	Title: "Import a dbt manifest",
	Description: "Imports a dbt manifest.json (schema versions v9 to v12) into the context graph: models, seeds, snapshots, sources, exposures (as dashboards and other consumers, with owners), " +
		"the dependencies, columns, and owners and tags from meta. Importing the same manifest twice changes nothing; an owner, description or title in the manifest replaces the recorded one. " +
		"Its unique, not_null, accepted_values and relationships tests become quality expectations (source dbt) for the configured warehouses of the manifest's adapter, checked by run_quality_check (dw-quality); " +
		"they replace what an earlier import of the project recorded and never overwrite a team's own (set_quality_expectations wins where both speak of a column). The answer says how many were recorded.",
	ReadOnly: false, Destructive: true, Idempotent: true, OpenWorld: false,
}

// readInput reads a document given by path (through fileinput: regular
// JSON files only, capped by DW_MAX_FILE_BYTES) or inline.
func readInput(ctx context.Context, path, inline, what string) ([]byte, error) {
	return readWith(ctx, fileinput.ReadJSON, path, inline, what)
}

// readWith is readInput with the file read by read: fileinput.ReadJSON, or
// fileinput.ReadRegular for a document the tool parses whole anyway.
func readWith(ctx context.Context, read func(ctx context.Context, arg, path string, max int64) ([]byte, error), path, inline, what string) ([]byte, error) {
	switch {
	case path != "" && inline != "":
		return nil, fmt.Errorf("give path or the %s content, not both", what)
	case path != "":
		return read(ctx, "path", path, fileinput.MaxBytes())
	case strings.TrimSpace(inline) != "":
		return []byte(inline), nil
	}
	return nil, fmt.Errorf("give path (a file on this machine) or the %s content", what)
}

// ImportDBTOut is the graph import and the expectations its tests
// became. It is a type of the agent's own (not an alias) because the
// tool's listed schemas are keyed by its output type's name.
type ImportDBTOut checks.DBTImport

func (h *handlers) importDBT(ctx context.Context, in ImportDBTIn) (*ImportDBTOut, string, error) {
	// The file is read as a regular text file (type, size cap, deadline)
	// but not passed over as JSON first: the import parses it whole, once,
	// and a manifest of 100k models is worth not scanning twice.
	data, err := readWith(ctx, fileinput.ReadRegular, in.Path, in.Manifest, "manifest")
	if err != nil {
		return nil, "", err
	}
	g, err := h.graph(ctx)
	if err != nil {
		return nil, "", err
	}
	imp, err := checks.ImportDBT(ctx, g, data, ingest.DBTOptions{Domain: in.Domain, Owner: in.Owner}, h.warehousesByKind(), h.d.Clock)
	if err != nil {
		// A file that is not JSON at all is refused as ReadJSON would: where
		// its syntax breaks, without quoting it (the path may name any file).
		if in.Path != "" {
			if jerr := fileinput.CheckJSON("path", in.Path, data); jerr != nil {
				return nil, "", jerr
			}
		}
		return nil, "", err
	}
	out := (*ImportDBTOut)(imp)
	res, rec := &out.DBTImportResult, &out.Expectations
	summary := fmt.Sprintf("dbt project %s (manifest %s, %s): %s; %d expectations recorded from dbt tests on %d tables",
		res.Project, res.SchemaVersion, res.Adapter, statsLine("import", res.ImportStats), rec.Recorded, rec.Tables)
	if len(rec.Warehouses) > 0 {
		summary += " for warehouse " + strings.Join(rec.Warehouses, ", ")
	}
	if len(rec.Notes) > 0 {
		summary += fmt.Sprintf(" (%d notes: %s)", len(rec.Notes), strings.Join(rec.Notes, "; "))
	}
	return out, summary, nil
}

// warehousesByKind maps each warehouse kind (duckdb, bigquery, snowflake:
// the platform of dbt's asset ids) to the configured warehouses of it.
func (h *handlers) warehousesByKind() map[string][]string {
	out := map[string][]string{}
	for _, w := range h.d.Config.Warehouses {
		out[w.Kind] = append(out[w.Kind], w.Name)
	}
	return out
}

// ImportOLIn is OpenLineage run events by path or inline.
type ImportOLIn struct {
	Path   string `json:"path,omitempty" jsonschema:"path of a file with one RunEvent or a JSON array of them; give this or events"`
	Events string `json:"events,omitempty" jsonschema:"one RunEvent or a JSON array of them; give this or path"`
	ingest.OpenLineageOptions
}

var importOpenLineageTool = mcpserver.Tool{
	Name:  "import_openlineage_events",
	Title: "Import OpenLineage run events",
	Description: "Imports OpenLineage RunEvents (one or a JSON array) into the context graph: jobs, input and output datasets, columns from the schema facet, " +
		"and column edges from the columnLineage facet. Streams and batch land in the same lineage; what an event says of a dataset replaces what was recorded. " +
		"An event that is not a valid RunEvent is not recorded and is listed in invalid by position with what is wrong; a document with no valid RunEvent is refused and changes nothing. " +
		"Use it to load events you already have (a file or an export, many at once) into the graph only; to record one event a job emits now and, with an approval, also post it to the configured OpenLineage endpoint, use emit_lineage_event (dw-connectors).",
	ReadOnly: false, Destructive: true, Idempotent: true, OpenWorld: false,
}

func (h *handlers) importOpenLineage(ctx context.Context, in ImportOLIn) (*ingest.OpenLineageImportResult, string, error) {
	data, err := readInput(ctx, in.Path, in.Events, "events")
	if err != nil {
		return nil, "", err
	}
	g, err := h.graph(ctx)
	if err != nil {
		return nil, "", err
	}
	res, err := ingest.RunEvents(ctx, g, data, in.OpenLineageOptions)
	if err != nil {
		return nil, "", err
	}
	summary := fmt.Sprintf("%d events read, %d recorded (%d jobs, %d datasets, %d column edges): %s",
		res.Events, res.Imported, res.Jobs, res.Datasets, res.ColumnEdges, statsLine("import", res.ImportStats))
	if res.InvalidCount > 0 {
		// The first few are named here; invalid lists up to 20.
		var first []string
		for _, ev := range res.Invalid[:min(3, len(res.Invalid))] {
			first = append(first, fmt.Sprintf("event %d: %s: %s", ev.Index, ev.Problems[0].Field, ev.Problems[0].Message))
		}
		summary += fmt.Sprintf("; %d events not recorded as invalid (%s)", res.InvalidCount, strings.Join(first, "; "))
	}
	return res, summary, nil
}

func statsLine(what string, s lineage.ImportStats) string {
	if s.Unchanged {
		return fmt.Sprintf("the graph already held everything in this %s (version %d)", what, s.GraphVersion)
	}
	line := fmt.Sprintf("%d assets created, %d updated, %d edges created, %d updated (graph version %d)",
		s.AssetsCreated, s.AssetsUpdated, s.EdgesCreated, s.EdgesUpdated, s.GraphVersion)
	if len(s.Warnings) > 0 {
		// The stats keep the first warnings (lineage.ImportStats.AddWarnings);
		// the summary names the first three.
		line += fmt.Sprintf("; %d warnings: %s", s.WarningsTotal, strings.Join(s.Warnings[:min(3, len(s.Warnings))], "; "))
		if s.WarningsTotal > 3 {
			line += "; …"
		}
	}
	return line
}
