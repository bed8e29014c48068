package schema

import (
	"context"
	"fmt"
	"github.com/dataworkers/dw/internal/sqlscan"
	"sort"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/dataworkers/dw/internal/compat"
	"github.com/dataworkers/dw/internal/lineage"
	"github.com/dataworkers/dw/internal/mcpserver"
	"github.com/dataworkers/dw/internal/registry"
	"github.com/dataworkers/dw/internal/schemahistory"
)

// CheckIn is a proposed schema for a subject.
type CheckIn struct {
	Subject    string `json:"subject" jsonschema:"Schema Registry subject, e.g. api-usage-value"`
	Schema     string `json:"schema" jsonschema:"the proposed schema text"`
	SchemaType string `json:"schema_type,omitempty" jsonschema:"AVRO (default), JSON or PROTOBUF"`
	Level      string `json:"level,omitempty" jsonschema:"compatibility level to judge by (BACKWARD, BACKWARD_TRANSITIVE, FORWARD, FORWARD_TRANSITIVE, FULL, FULL_TRANSITIVE, NONE); default: the subject's level in the registry, else BACKWARD"`
}

// RegistryVerdict is what the registry itself said.
type RegistryVerdict struct {
	Configured bool     `json:"configured" jsonschema:"a schema registry is configured"`
	Reached    bool     `json:"reached" jsonschema:"the registry answered"`
	Compatible bool     `json:"compatible" jsonschema:"the registry accepts the schema under the subject's level (only meaningful when reached)"`
	Level      string   `json:"level,omitempty" jsonschema:"the subject's level in the registry"`
	Messages   []string `json:"messages,omitempty" jsonschema:"the registry's verbose messages"`
	Note       string   `json:"note,omitempty" jsonschema:"why there is no registry verdict, when there is none"`
}

// Reader is something downstream that reads a field the change removes or changes.
type Reader struct {
	Asset    string   `json:"asset" jsonschema:"asset id of the statement, job, model or report"`
	Kind     string   `json:"kind" jsonschema:"asset kind"`
	Title    string   `json:"title,omitempty" jsonschema:"display name"`
	Owner    string   `json:"owner,omitempty" jsonschema:"owner to ask"`
	Fields   []string `json:"fields" jsonschema:"the changed fields it reads (as they reach it)"`
	Evidence string   `json:"evidence,omitempty" jsonschema:"where it reads them, e.g. the SQL expression"`
	Critical []string `json:"critical,omitempty" jsonschema:"outbound, money, regulator or customer-facing"`
	NextRun  string   `json:"next_run,omitempty" jsonschema:"next scheduled run (RFC 3339), for scheduled jobs"`
}

// CheckOut is the two answers: does the rule accept it, and is it safe.
type CheckOut struct {
	Subject      string            `json:"subject" jsonschema:"the subject"`
	SchemaType   string            `json:"schema_type" jsonschema:"AVRO, JSON or PROTOBUF"`
	Level        string            `json:"level" jsonschema:"the level the verdict is judged by"`
	Compatible   bool              `json:"compatible" jsonschema:"the local verdict under level"`
	Safe         bool              `json:"safe" jsonschema:"no recorded reader reads a removed or changed field"`
	Verdict      string            `json:"verdict" jsonschema:"both answers in one sentence"`
	Local        *compat.Verdict   `json:"local" jsonschema:"local verdict under every level against the subject's versions"`
	Registry     RegistryVerdict   `json:"registry" jsonschema:"the registry's own verdict"`
	Disagreement string            `json:"disagreement,omitempty" jsonschema:"how the local and registry verdicts differ, when they do"`
	Against      int               `json:"against_version" jsonschema:"the latest existing version the diff is against"`
	Changes      []compat.Change   `json:"changes" jsonschema:"field-level diff against the latest version"`
	Readers      []Reader          `json:"readers" jsonschema:"statements, jobs, models and reports reading a removed or changed field"`
	LineageNote  string            `json:"lineage_note,omitempty" jsonschema:"what the readers answer cannot see (no lineage recorded, edges without column lineage)"`
	SHA256       string            `json:"sha256" jsonschema:"SHA-256 of the schema's canonical form; an approval to register binds to it"`
	Versions     []int             `json:"versions" jsonschema:"the subject's existing versions compared against"`
	NoColumnInfo []lineage.EdgeRef `json:"no_column_lineage,omitempty" jsonschema:"edges followed in full because they carry no column lineage"`
}

var checkCompatibilityTool = mcpserver.Tool{
	Name:  "check_compatibility",
	Title: "Check a schema change: registry rule and every reader",
	Description: "Checks a proposed schema version for a Schema Registry subject two ways before anyone registers it: " +
		"whether the compatibility rule accepts it (the registry's own verdict when configured, and a local verdict under every level against the subject's versions, which works offline), " +
		"and who downstream reads a field it removes or changes (from column lineage and recorded readers in the context graph), with owners. " +
		"Compatible is not safe: the answer gives both verdicts, the field-level diff, and the canonical SHA-256 an approval to register binds to. " +
		"A subject with no earlier version is compatible: the schema would be its first version.",
	ReadOnly: true, Idempotent: true, OpenWorld: true,
	InputSchema: mcpserver.InputSchema[CheckIn](func(s *jsonschema.Schema) {
		levels := make([]string, len(compat.Levels))
		for i, l := range compat.Levels {
			levels[i] = string(l)
		}
		mcpserver.Enum(s, "level", levels...)
		mcpserver.Enum(s, "schema_type", "AVRO", "JSON", "PROTOBUF")
	}),
}

func (h *handlers) checkCompatibility(ctx context.Context, in CheckIn) (*CheckOut, string, error) {
	if strings.TrimSpace(in.Subject) == "" {
		return nil, "", fmt.Errorf("subject is empty; give the Schema Registry subject, e.g. api-usage-value")
	}
	kind, err := compat.ParseKind(in.SchemaType)
	if err != nil {
		return nil, "", err
	}
	var level compat.Level
	if in.Level != "" {
		if level, err = compat.ParseLevel(in.Level); err != nil {
			return nil, "", err
		}
	}
	next := compat.Schema{Text: in.Schema}
	if err := compat.Validate(kind, next); err != nil {
		return nil, "", err
	}
	can, err := compat.Canonicalize(kind, next)
	if err != nil {
		return nil, "", err
	}
	db, err := h.d.Store(ctx)
	if err != nil {
		return nil, "", err
	}
	client, configured, err := h.registryClient()
	if err != nil {
		return nil, "", err
	}
	versions, reached, note, err := h.subjectHistory(ctx, db, client, in.Subject)
	if err != nil {
		return nil, "", err
	}
	out := &CheckOut{Subject: in.Subject, SchemaType: string(kind), SHA256: can.SHA256,
		Registry: RegistryVerdict{Configured: configured, Reached: reached, Note: note}, Changes: []compat.Change{}, Readers: []Reader{}, Versions: []int{}}
	if reached && len(versions) > 0 {
		cfg, err := client.Config(ctx, in.Subject)
		if err == nil {
			out.Registry.Level = string(cfg.Level)
			if level == "" {
				level = cfg.Level
			}
		}
		res, err := client.CheckCompatibility(ctx, in.Subject, registry.NewSchema{Schema: in.Schema, Kind: kind}, registry.AgainstConfigured)
		if err != nil {
			out.Registry.Reached = false
			out.Registry.Note = fmt.Sprintf("the registry's compatibility check failed: %v", err)
		} else {
			out.Registry.Compatible = res.IsCompatible
			out.Registry.Messages = res.Messages
		}
	}
	if level == "" {
		level = compat.Backward
	}
	prev := make([]compat.Version, 0, len(versions))
	for _, v := range versions {
		prev = append(prev, compat.Version{Version: v.Version, Schema: compat.Schema{Text: v.Schema, References: v.References}})
		out.Versions = append(out.Versions, v.Version)
	}
	verdict, err := compat.Check(kind, next, prev, level)
	if err != nil {
		return nil, "", err
	}
	out.Local = verdict
	out.Level = string(level)
	out.Compatible = verdict.At(level).Compatible
	if out.Registry.Reached && out.Registry.Level == string(level) {
		if res := (&registry.Compatibility{IsCompatible: out.Registry.Compatible, Messages: out.Registry.Messages}); true {
			out.Disagreement = registry.Disagreement(verdict, res)
		}
	}
	if n := len(versions); n > 0 {
		latest := versions[n-1]
		out.Against = latest.Version
		changes, err := compat.Diff(kind, compat.Schema{Text: latest.Schema, References: latest.References}, next)
		if err != nil {
			return nil, "", err
		}
		out.Changes = changes
	}
	readers, lnote, noCols, err := h.readers(ctx, "schema://"+in.Subject, breakingFields(out.Changes))
	if err != nil {
		return nil, "", err
	}
	out.Readers, out.LineageNote, out.NoColumnInfo = readers, lnote, noCols
	out.Safe = len(readers) == 0 && lnote == ""
	out.Verdict = verdictSentence(out)
	if len(versions) == 0 {
		// A first version has nothing to be incompatible with.
		out.Compatible, out.Registry.Compatible = true, out.Registry.Reached
		out.Verdict = fmt.Sprintf("compatible: no earlier version of %s (%s)", in.Subject, note)
	}
	return out, summarizeCheck(out), nil
}

// breakingFields are the top-level names of fields whose old readers stop
// getting what they read: removed, retyped, renamed or newly required.
func breakingFields(changes []compat.Change) []string {
	seen := map[string]bool{}
	var out []string
	for _, c := range changes {
		switch c.Kind {
		case "removed", "type_changed", "renamed", "optional_to_required", "default_changed":
		default:
			continue
		}
		p := c.Path
		if c.Kind == "renamed" && c.OldPath != "" {
			p = c.OldPath
		}
		name := strings.FieldsFunc(p, func(r rune) bool { return r == '.' || r == '[' || r == '{' })
		if len(name) == 0 || seen[name[0]] {
			continue
		}
		seen[name[0]] = true
		out = append(out, name[0])
	}
	sort.Strings(out)
	return out
}

// readerKinds are assets that read data (as opposed to carrying it).
var readerKinds = map[string]bool{"stream_job": true, "dbt_model": true, "view": true, "dashboard": true, "report": true,
	"orchestrator_job": true, "reverse_etl_sync": true, "connector": true, "job": true, "application": true, "snapshot": true}

// readers finds the statements, jobs, models and reports downstream that
// read the given fields of an asset: column lineage and recorded readers,
// following renames, carrying a field across edges that have no column
// lineage (a subject to its topic), and stopping where lineage shows the
// field is not passed on.
func (h *handlers) readers(ctx context.Context, asset string, fields []string) ([]Reader, string, []lineage.EdgeRef, error) {
	out := []Reader{}
	if len(fields) == 0 {
		return out, "", nil, nil
	}
	g, err := h.d.Graph(ctx)
	if err != nil {
		return nil, "", nil, err
	}
	frs, err := g.FieldReaders(ctx, asset, fields, 12)
	if err != nil {
		return out, fmt.Sprintf("readers unknown: %v (record the subject's lineage with dw-context-catalog record_lineage)", err), nil, nil
	}
	byID := map[string]int{}
	for _, fr := range frs {
		if i, ok := byID[fr.Reader]; ok {
			r := &out[i]
			r.Fields = appendNew(r.Fields, fr.Field)
			if fr.Evidence != "" && !strings.Contains(r.Evidence, fr.Evidence) {
				r.Evidence += "; " + fr.Evidence
			}
			continue
		}
		r := Reader{Asset: fr.Reader, Fields: []string{fr.Field}, Evidence: fr.Evidence}
		if lr, err := g.GetLineage(ctx, lineage.LineageParams{Asset: fr.Reader}); err == nil {
			a := lr.Asset
			r.Kind, r.Title, r.Owner = string(a.Kind), a.Title, a.Owner
			if !a.NextRun.IsZero() {
				r.NextRun = a.NextRun.Format("2006-01-02T15:04:05Z07:00")
			}
			for _, t := range a.Tags {
				switch t {
				case "outbound", "money", "regulator", "customer-facing":
					r.Critical = append(r.Critical, t)
				}
			}
			if a.SQL != "" && r.Evidence == "" {
				r.Evidence = sqlEvidence(a.SQL, fields)
			}
		}
		byID[fr.Reader] = len(out)
		out = append(out, r)
	}
	return out, "", nil, nil
}

func appendNew(list []string, s string) []string {
	for _, x := range list {
		if x == s {
			return list
		}
	}
	return append(list, s)
}

// sqlEvidence names how a job's SQL reads the fields (SUM(response_bytes)),
// for a reader whose evidence the graph did not already give.
func sqlEvidence(sqlText string, fields []string) string {
	var found []string
	for _, f := range fields {
		exprs := sqlscan.Expressions(sqlText, f)
		if len(exprs) == 0 && len(sqlscan.Mentions(sqlText, []string{f})) > 0 {
			exprs = []string{"reads " + f}
		}
		for _, e := range exprs {
			found = appendNew(found, e)
		}
	}
	return strings.Join(found, "; ")
}

func verdictSentence(o *CheckOut) string {
	rule := fmt.Sprintf("compatible under %s", o.Level)
	if !o.Compatible {
		rule = fmt.Sprintf("incompatible under %s", o.Level)
	}
	switch {
	case len(o.Readers) > 0:
		r := o.Readers[0]
		how := "reads " + strings.Join(r.Fields, ", ")
		if r.Evidence != "" {
			how = strings.TrimPrefix(r.Evidence, "recorded SQL: ")
		}
		more := ""
		if len(o.Readers) > 1 {
			more = fmt.Sprintf(" (and %d more readers)", len(o.Readers)-1)
		}
		return fmt.Sprintf("%s, but unsafe: %s %s%s", rule, r.Asset, how, more)
	case o.LineageNote != "":
		return fmt.Sprintf("%s; safety unknown: %s", rule, o.LineageNote)
	case len(breakingFields(o.Changes)) == 0:
		return fmt.Sprintf("%s, and safe: no field readers depend on is removed or changed", rule)
	default:
		return fmt.Sprintf("%s, and no recorded reader reads %s", rule, strings.Join(breakingFields(o.Changes), ", "))
	}
}

func summarizeCheck(o *CheckOut) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s: %s.", o.Subject, o.SchemaType, o.Verdict)
	if o.Registry.Reached {
		fmt.Fprintf(&b, "\nRegistry (%s): compatible=%t.", o.Registry.Level, o.Registry.Compatible)
	} else if o.Registry.Note != "" {
		fmt.Fprintf(&b, "\nRegistry: %s.", o.Registry.Note)
	}
	if o.Disagreement != "" {
		fmt.Fprintf(&b, "\nDisagreement: %s", o.Disagreement)
	}
	for _, c := range o.Changes {
		fmt.Fprintf(&b, "\n- %s %s", c.Kind, c.Path)
	}
	for _, r := range o.Readers {
		fmt.Fprintf(&b, "\n- reader %s (owner %s): %s", r.Asset, orNone(r.Owner), orNone(r.Evidence))
	}
	return b.String()
}

func orNone(s string) string {
	if s == "" {
		return "none recorded"
	}
	return s
}

var _ = schemahistory.SubjectVersion{}
