package lineage

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"github.com/dataworkers/dw/internal/sqlscan"
	"slices"
	"strings"

	"github.com/dataworkers/dw/internal/suggest"
)

// Note is what a team records once about lineage no tool reports: a hop
// (topic -> stream job -> table), the fields a job reads and the SQL it
// runs, a schedule, an owner, tags, a domain.
type Note struct {
	Path   []string    `json:"path,omitempty" jsonschema:"asset ids in the order data flows, e.g. [kafka://prod/api-usage, flink://usage-hourly-rollup, kafka://prod/usage-hourly]; each neighbouring pair becomes an edge"`
	Edges  []NoteEdge  `json:"edges,omitempty" jsonschema:"edges with an explicit kind or column lineage"`
	Assets []NoteAsset `json:"assets,omitempty" jsonschema:"facts about assets: kind, owner, domain, tags, schedule, columns, and for jobs the SQL they run and the fields they read"`
}

// NoteAsset is what a note says about one asset. Empty fields leave what
// the graph already knows.
type NoteAsset struct {
	ID          string    `json:"id" jsonschema:"asset id platform://path (new assets are created) or the bare name of an existing asset"`
	Kind        string    `json:"kind,omitempty" jsonschema:"asset kind; guessed from the platform for new assets when empty (kafka: topic, schema: schema_subject, flink: stream_job, airflow: orchestrator_job, sigma: dashboard, ...)"`
	Title       string    `json:"title,omitempty" jsonschema:"display name, e.g. Revenue today"`
	Owner       string    `json:"owner,omitempty" jsonschema:"owning person or team"`
	OwnerEmail  string    `json:"owner_email,omitempty" jsonschema:"owner's email"`
	Domain      string    `json:"domain,omitempty" jsonschema:"business domain"`
	Description string    `json:"description,omitempty" jsonschema:"what the asset is for"`
	URL         string    `json:"url,omitempty" jsonschema:"link to the asset"`
	Tags        []string  `json:"tags,omitempty" jsonschema:"tags to add: outbound, money, regulator, customer-facing or free tags"`
	RemoveTags  []string  `json:"remove_tags,omitempty" jsonschema:"tags to remove"`
	Schedule    *Schedule `json:"schedule,omitempty" jsonschema:"when the job runs"`
	Columns     []Column  `json:"columns,omitempty" jsonschema:"columns or fields"`
	SQL         string    `json:"sql,omitempty" jsonschema:"the SQL the job runs; when reads_fields is empty the fields it mentions are taken as the fields it reads"`
	ReadsFields []string  `json:"reads_fields,omitempty" jsonschema:"fields this job reads from its inputs, e.g. [response_bytes]"`
	Aliases     []string  `json:"aliases,omitempty" jsonschema:"other ids the same asset has in other sources, e.g. the dbt exposure dbt://exposure.billing.revenue_today for a workbook; assets known under them are merged into this one"`
}

// NoteEdge is an edge a note states.
type NoteEdge struct {
	From        string          `json:"from" jsonschema:"upstream asset id"`
	To          string          `json:"to" jsonschema:"downstream asset id"`
	Kind        string          `json:"kind,omitempty" jsonschema:"reads, writes, feeds, materializes, produces or consumes; chosen from the asset kinds when empty"`
	Columns     []ColumnMapping `json:"columns,omitempty" jsonschema:"column lineage along the edge"`
	ReadsFields []string        `json:"reads_fields,omitempty" jsonschema:"fields of the upstream asset the downstream job reads"`
}

// NoteResult says what a note changed.
type NoteResult struct {
	ImportStats
	Assets      []string            `json:"assets" jsonschema:"ids of the assets the note touched"`
	Edges       []EdgeRef           `json:"edges" jsonschema:"edges the note recorded"`
	ReadsFields map[string][]string `json:"reads_fields,omitempty" jsonschema:"per edge (from -> to), the fields recorded as read"`
}

// guessKind names the kind of a new asset from its id's platform.
func guessKind(id string) Kind {
	p, path, _ := SplitID(id)
	switch p {
	case "kafka", "confluent", "redpanda":
		return KindTopic
	case "schema", "schema-registry", "sr":
		return KindSchemaSubject
	case "flink", "ksql", "ksqldb", "spark-streaming", "kafka-streams", "beam", "dataflow":
		return KindStreamJob
	case "connect", "kafka-connect":
		return KindConnector
	case "dbt":
		switch {
		case strings.HasPrefix(path, "seed."):
			return KindSeed
		case strings.HasPrefix(path, "snapshot."):
			return KindSnapshot
		case strings.HasPrefix(path, "source."):
			return KindSource
		case strings.HasPrefix(path, "exposure."):
			return KindDashboard
		}
		return KindDBTModel
	case "sigma", "tableau", "looker", "metabase", "mode", "powerbi", "superset", "hex", "lightdash", "preset", "thoughtspot":
		return KindDashboard
	case "airflow", "dagster", "prefect", "dbt-cloud", "argo", "temporal", "cron":
		return KindOrchestratorJob
	case "hightouch", "census", "polytomic", "rudderstack":
		return KindReverseETLSync
	}
	if IsWarehouse(p) {
		return KindTable
	}
	return KindDataset
}

// noteRef turns an id or bare name in a note into the asset's canonical id.
// Ids may name new assets; a bare name must name an existing one.
func (g *Graph) noteRef(ctx context.Context, ref string) (string, error) {
	ref = strings.TrimSpace(ref)
	if strings.Contains(ref, "://") {
		return CanonicalID(ref)
	}
	r, err := resolveAsset(ctx, g.db, ref)
	if err != nil {
		return "", fmt.Errorf("%w (a new asset needs a full id like kafka://prod/%s)", err, ref)
	}
	return r.id, nil
}

// RecordLineage records a team's note: the hops, the assets' facts, and the
// fields each job reads. The fields of a job go on its incoming edges (the
// ones in the note and those already in the graph), narrowed to each
// input's known columns; a named field that no input has is an error with
// the closest column names. Everything is checked before anything is
// written, in one transaction.
func (g *Graph) RecordLineage(ctx context.Context, n Note) (*NoteResult, error) {
	if len(n.Path) == 0 && len(n.Edges) == 0 && len(n.Assets) == 0 {
		return nil, fmt.Errorf("the note is empty: give a path, edges or assets")
	}
	if len(n.Path) == 1 {
		return nil, fmt.Errorf("path has one asset; a path needs at least two (upstream first)")
	}
	inputs := map[string]*AssetInput{}
	var order []string
	ensure := func(ref, field string) (string, error) {
		id, err := g.noteRef(ctx, ref)
		if err != nil {
			return "", fmt.Errorf("%s: %w", field, err)
		}
		if _, ok := inputs[id]; !ok {
			inputs[id] = &AssetInput{ID: id, Names: []string{id}, Weak: []string{weakOf(id)}, KindIfNew: guessKind(id), Source: SourceNote}
			order = append(order, id)
		}
		return id, nil
	}
	type plannedEdge struct {
		from, to string
		kind     EdgeKind
		cols     []ColumnMapping
		reads    []string
		label    string
	}
	var edges []plannedEdge
	for i := 0; i+1 < len(n.Path); i++ {
		from, err := ensure(n.Path[i], fmt.Sprintf("path[%d]", i))
		if err != nil {
			return nil, err
		}
		to, err := ensure(n.Path[i+1], fmt.Sprintf("path[%d]", i+1))
		if err != nil {
			return nil, err
		}
		if from == to {
			return nil, fmt.Errorf("path[%d] and path[%d] are the same asset %s", i, i+1, from)
		}
		edges = append(edges, plannedEdge{from: from, to: to})
	}
	for i, e := range n.Edges {
		from, err := ensure(e.From, fmt.Sprintf("edges[%d].from", i))
		if err != nil {
			return nil, err
		}
		to, err := ensure(e.To, fmt.Sprintf("edges[%d].to", i))
		if err != nil {
			return nil, err
		}
		if from == to {
			return nil, fmt.Errorf("edges[%d]: from and to are the same asset %s", i, from)
		}
		kind, err := ParseEdgeKind(e.Kind)
		if err != nil {
			return nil, fmt.Errorf("edges[%d].kind: %w", i, err)
		}
		for j, m := range e.Columns {
			if strings.TrimSpace(m.From) == "" {
				return nil, fmt.Errorf("edges[%d].columns[%d].from is empty", i, j)
			}
		}
		edges = append(edges, plannedEdge{from: from, to: to, kind: kind, cols: e.Columns, reads: e.ReadsFields, label: fmt.Sprintf("edges[%d]", i)})
	}
	jobReads := map[string][]string{}
	jobSQL := map[string]string{}
	for i, a := range n.Assets {
		id, err := ensure(a.ID, fmt.Sprintf("assets[%d].id", i))
		if err != nil {
			return nil, err
		}
		in := inputs[id]
		if a.Kind != "" {
			k, err := ParseKind(a.Kind)
			if err != nil {
				return nil, fmt.Errorf("assets[%d].kind: %w", i, err)
			}
			in.Kind = k
		}
		if a.Schedule != nil && strings.TrimSpace(a.Schedule.Cron) != "" {
			if err := ValidateSchedule(*a.Schedule); err != nil {
				return nil, fmt.Errorf("assets[%d].schedule: %w", i, err)
			}
		}
		for j, c := range a.Columns {
			if strings.TrimSpace(c.Name) == "" {
				return nil, fmt.Errorf("assets[%d].columns[%d].name is empty", i, j)
			}
		}
		for j, al := range a.Aliases {
			cid, err := CanonicalID(al)
			if err != nil {
				return nil, fmt.Errorf("assets[%d].aliases[%d]: %w", i, j, err)
			}
			if cid != id && !slices.Contains(in.Names, cid) {
				in.Names = append(in.Names, cid)
			}
		}
		in.Title, in.Owner, in.OwnerEmail, in.Domain = a.Title, a.Owner, a.OwnerEmail, a.Domain
		in.Description, in.URL, in.SQL = a.Description, a.URL, a.SQL
		in.Tags, in.RemoveTags, in.Schedule = a.Tags, a.RemoveTags, a.Schedule
		in.Columns = MergeColumns(in.Columns, a.Columns)
		if len(a.ReadsFields) > 0 {
			jobReads[id] = append(jobReads[id], a.ReadsFields...)
		}
		if strings.TrimSpace(a.SQL) != "" {
			jobSQL[id] = a.SQL
		}
	}
	res := &NoteResult{ReadsFields: map[string][]string{}}
	stats, err := g.Write(ctx, func(w *Writer) error {
		res.Assets, res.Edges = []string{}, []EdgeRef{}
		clear(res.ReadsFields)
		seqs := map[string]int64{}
		for _, id := range order {
			seq, err := w.UpsertAsset(inputs[id])
			if err != nil {
				return err
			}
			seqs[id] = seq
		}
		// A later asset's aliases may have merged one upserted before it
		// (a dashboard given the dbt exposure's id that the path names):
		// every id stands for the asset it is now.
		for id, s := range seqs {
			seqs[id] = w.survivor(s)
		}
		ids := map[int64]string{}
		for _, id := range order {
			var cur string
			if err := w.tx.QueryRowContext(w.ctx, "SELECT id FROM lineage_assets WHERE seq = ?", seqs[id]).Scan(&cur); err != nil {
				return err
			}
			ids[seqs[id]] = cur
			if !slices.Contains(res.Assets, cur) {
				res.Assets = append(res.Assets, cur)
			}
		}
		// Edges whose fields this note gives: a job's SQL (or its
		// assets-level reads_fields) must not overwrite them below.
		given := map[[2]int64]bool{}
		for _, e := range edges {
			from, to := seqs[e.from], seqs[e.to]
			if from == to {
				return fmt.Errorf("the edge from %s to %s joins one asset to itself: this note's aliases make the two one asset, %s; an edge needs two different assets (drop the alias that names both, or the edge)", e.from, e.to, ids[from])
			}
			cols := e.cols
			if len(e.reads) > 0 {
				given[[2]int64{from, to}] = true
				fields, err := w.checkFields(from, ids[from], e.reads, e.label+".reads_fields")
				if err != nil {
					return err
				}
				for _, f := range fields {
					cols = append(cols, ColumnMapping{From: f})
				}
			}
			if len(cols) > 0 {
				if err := w.checkMappings(from, ids[from], cols, e.label+".columns"); err != nil {
					return err
				}
			}
			var colArg []ColumnMapping
			if len(cols) > 0 {
				colArg = cols
			}
			if err := w.Link(from, to, e.kind, SourceNote, colArg, e.kind != ""); err != nil {
				return err
			}
			res.Edges = append(res.Edges, EdgeRef{From: ids[from], To: ids[to]})
			if len(e.reads) > 0 {
				res.ReadsFields[ids[from]+" -> "+ids[to]] = normalizeFieldList(e.reads)
			}
		}
		for _, id := range order {
			reads, sqlText := jobReads[id], jobSQL[id]
			if len(reads) == 0 && sqlText == "" {
				continue
			}
			if err := w.recordReads(seqs[id], ids[seqs[id]], reads, sqlText, given, res); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	res.ImportStats = stats
	return res, nil
}

func normalizeFieldList(fs []string) []string {
	var out []string
	for _, f := range fs {
		if f = strings.TrimSpace(f); f != "" && !slices.Contains(out, f) {
			out = append(out, f)
		}
	}
	return out
}

// columnsOf reads an asset's known column names (held until the writer
// writes the asset).
func (w *Writer) columnsOf(seq int64) ([]string, error) {
	if cols, ok := w.cols[seq]; ok {
		return cols, nil
	}
	r, err := loadAsset(w.ctx, w.tx, seq)
	if err != nil {
		return nil, err
	}
	out := make([]string, len(r.Columns))
	for i, c := range r.Columns {
		out[i] = c.Name
	}
	if w.cols == nil {
		w.cols = map[int64][]string{}
	}
	w.cols[seq] = out
	return out, nil
}

// checkFields validates fields against an asset's known columns (any field
// goes when none are known) and returns them in the asset's spelling.
func (w *Writer) checkFields(seq int64, id string, fields []string, where string) ([]string, error) {
	cols, err := w.columnsOf(seq)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, f := range normalizeFieldList(fields) {
		if len(cols) == 0 {
			out = append(out, f)
			continue
		}
		i := slices.IndexFunc(cols, func(c string) bool { return strings.EqualFold(c, f) })
		if i < 0 {
			return nil, fmt.Errorf("%s: %q is not a column of %s; closest: %s", where, f, id, strings.Join(suggest.Closest(f, cols, 5), ", "))
		}
		out = append(out, cols[i])
	}
	return out, nil
}

func (w *Writer) checkMappings(seq int64, id string, ms []ColumnMapping, where string) error {
	var froms []string
	for _, m := range ms {
		froms = append(froms, m.From)
	}
	_, err := w.checkFields(seq, id, froms, where)
	return err
}

// recordReads puts the fields a job reads on each of its incoming edges.
// Explicit fields must exist in some input; fields taken from SQL are
// narrowed silently to each input's columns. An input none of whose known
// columns are read keeps its edge without column lineage, so impact
// answers stay conservative for it. An edge whose fields the same note gave
// (edges[].reads_fields) keeps them: the job's SQL and assets-level fields
// stand in only where nothing more specific was said.
func (w *Writer) recordReads(job int64, jobID string, reads []string, sqlText string, given map[[2]int64]bool, res *NoteResult) error {
	rows, err := w.tx.QueryContext(w.ctx, "SELECT from_seq FROM lineage_edges WHERE to_seq = ?", job)
	if err != nil {
		return err
	}
	var ins []int64
	for rows.Next() {
		var s int64
		if err := rows.Scan(&s); err != nil {
			rows.Close()
			return err
		}
		ins = append(ins, s)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	if len(ins) == 0 {
		if len(reads) > 0 {
			return fmt.Errorf("assets %s: reads_fields needs at least one input; add the input to path or edges (e.g. path [schema://api-usage-value, %s])", jobID, jobID)
		}
		return nil
	}
	explicit := normalizeFieldList(reads)
	matched := map[string]bool{}
	var allCols []string
	for _, in := range ins {
		cols, err := w.columnsOf(in)
		if err != nil {
			return err
		}
		allCols = append(allCols, cols...)
		var fields []string
		switch {
		case len(explicit) > 0 && len(cols) == 0:
			fields = explicit
		case len(explicit) > 0:
			for _, f := range explicit {
				if i := slices.IndexFunc(cols, func(c string) bool { return strings.EqualFold(c, f) }); i >= 0 {
					fields = append(fields, cols[i])
					matched[f] = true
				}
			}
		case len(cols) > 0:
			fields = sqlscan.Mentions(sqlText, cols)
		default:
			fields = sqlscan.Columns(sqlText)
		}
		if len(cols) == 0 {
			for _, f := range explicit {
				matched[f] = true
			}
		}
		if given[[2]int64{in, job}] {
			// The note named this edge's fields itself: the more specific
			// statement stands (explicit fields were still checked above).
			continue
		}
		if len(fields) == 0 {
			// This input is read, but not for these fields as far as its
			// columns tell: drop what an earlier note said, leaving the edge
			// to other sources' column lineage or to none (conservative).
			del, err := w.tx.ExecContext(w.ctx, "DELETE FROM lineage_edge_columns WHERE from_seq = ? AND to_seq = ? AND source = ?", in, job, string(SourceNote))
			if err != nil {
				return err
			}
			if n, _ := del.RowsAffected(); n > 0 {
				w.changed = true
				w.touchCols(in, job)
			}
			continue
		}
		var inID string
		if err := w.tx.QueryRowContext(w.ctx, "SELECT id FROM lineage_assets WHERE seq = ?", in).Scan(&inID); err != nil && !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		cols2 := make([]ColumnMapping, len(fields))
		for i, f := range fields {
			cols2[i] = ColumnMapping{From: f}
		}
		if err := w.Link(in, job, "", SourceNote, cols2, false); err != nil {
			return err
		}
		res.ReadsFields[inID+" -> "+jobID] = fields
	}
	for _, f := range explicit {
		if !matched[f] {
			return fmt.Errorf("assets %s: reads_fields %q is not a column of any input; closest: %s", jobID, f, strings.Join(suggest.Closest(f, allCols, 5), ", "))
		}
	}
	return nil
}
