package lineage

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/dataworkers/dw/internal/sqlscan"
	"github.com/dataworkers/dw/internal/store"
)

// AssetReader is something downstream that reads a field a change removes
// or changes, with what a person needs to ask about it: owner, criticality
// and next run.
type AssetReader struct {
	Asset    string   `json:"asset" jsonschema:"asset id of the statement, job, model or report"`
	Kind     string   `json:"kind" jsonschema:"asset kind"`
	Title    string   `json:"title,omitempty" jsonschema:"display name"`
	Owner    string   `json:"owner,omitempty" jsonschema:"owner to ask"`
	Fields   []string `json:"fields" jsonschema:"the changed fields it reads (as they reach it)"`
	Evidence string   `json:"evidence,omitempty" jsonschema:"where it reads them, e.g. the SQL expression"`
	Critical []string `json:"critical,omitempty" jsonschema:"outbound, money, regulator or customer-facing"`
	NextRun  string   `json:"next_run,omitempty" jsonschema:"next scheduled run (RFC 3339), for scheduled jobs"`
}

// fieldReaderDepth is how far AssetReaders follows a field downstream.
const fieldReaderDepth = 12

// AssetReaders finds the statements, jobs, models and reports downstream
// that read the given fields of an asset: column lineage and recorded
// readers, following renames, carrying a field across edges that have no
// column lineage (a subject to its topic), and stopping where lineage
// shows the field is not passed on. One entry per reader, with every field
// it reads. When the walk itself fails the readers are unknown: note says
// so (and how to record the lineage) and err stays nil, because an unknown
// reader set is an answer (never "safe"), not a failure of the caller.
func (g *Graph) AssetReaders(ctx context.Context, asset string, fields []string) (readers []AssetReader, note string, err error) {
	out := []AssetReader{}
	if len(fields) == 0 {
		return out, "", nil
	}
	frs, err := g.FieldReaders(ctx, asset, fields, fieldReaderDepth)
	if err != nil {
		return out, fmt.Sprintf("readers unknown: %v (record the subject's lineage with dw-context-catalog record_lineage)", err), nil
	}
	byID := map[string]int{}
	for _, fr := range frs {
		if i, ok := byID[fr.Reader]; ok {
			r := &out[i]
			r.Fields = appendNewString(r.Fields, fr.Field)
			if fr.Evidence != "" && !strings.Contains(r.Evidence, fr.Evidence) {
				r.Evidence += "; " + fr.Evidence
			}
			continue
		}
		byID[fr.Reader] = len(out)
		out = append(out, AssetReader{Asset: fr.Reader, Fields: []string{fr.Field}, Evidence: fr.Evidence})
	}
	// What a person asks about each reader, read a few hundred at a time:
	// one lookup per reader took 2 s for 4,000 readers.
	ids := make([]string, len(out))
	for i := range out {
		ids[i] = out[i].Asset
	}
	rows, err := loadRowsByID(ctx, g.db, ids)
	if err != nil {
		return out, "", err
	}
	now := g.clock.Now()
	for i := range out {
		a, ok := rows[out[i].Asset]
		if !ok {
			continue
		}
		r := &out[i]
		r.Kind, r.Title, r.Owner = string(a.Kind), a.Title, a.Owner
		if a.Cron != "" {
			if next, err := (&Schedule{Cron: a.Cron, Timezone: a.Timezone}).NextRun(now); err == nil {
				r.NextRun = next.Format("2006-01-02T15:04:05Z07:00")
			}
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
	return out, "", nil
}

// loadRowsByID reads, by canonical id, what a reader shows: its list row
// and its SQL (never its columns).
func loadRowsByID(ctx context.Context, q store.Querier, ids []string) (map[string]*assetRow, error) {
	out := make(map[string]*assetRow, len(ids))
	for start := 0; start < len(ids); start += 500 {
		chunk := ids[start:min(start+500, len(ids))]
		args := make([]any, len(chunk))
		for i, s := range chunk {
			args[i] = s
		}
		rows, err := q.QueryContext(ctx, "SELECT "+listCols+", sql_text FROM lineage_assets WHERE id IN ("+bindVars(len(chunk))+")", args...)
		if err != nil {
			return nil, err
		}
		for rows.Next() {
			var r assetRow
			var kind, tags string
			if err := rows.Scan(&r.Seq, &r.ID, &r.Title, &kind, &r.Platform, &r.Owner, &r.OwnerEmail, &r.Domain, &tags, &r.Cron, &r.Timezone, &r.SQL); err != nil {
				rows.Close()
				return nil, err
			}
			r.Kind = Kind(kind)
			if err := json.Unmarshal([]byte(tags), &r.Tags); err != nil {
				rows.Close()
				return nil, fmt.Errorf("asset %s: stored tags: %w", r.ID, err)
			}
			out[r.ID] = &r
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

func appendNewString(list []string, s string) []string {
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
			found = appendNewString(found, e)
		}
	}
	return strings.Join(found, "; ")
}
