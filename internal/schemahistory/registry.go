// Package schemahistory remembers the schemas Data Workers has seen: the
// Schema Registry versions of each subject (so a compatibility check still
// works when the registry is down, and a version's first sighting dates it
// for diagnosis) and column snapshots of warehouse tables (so a dropped or
// retyped column is found by comparing with the last snapshot).
package schemahistory

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/dataworkers/dw/internal/store"
)

// SubjectVersion is one registered version of a subject.
type SubjectVersion struct {
	Subject    string    `json:"subject" jsonschema:"registry subject"`
	Version    int       `json:"version" jsonschema:"version number in the subject"`
	ID         int       `json:"id" jsonschema:"registry-wide schema id"`
	SchemaType string    `json:"schema_type" jsonschema:"AVRO, JSON or PROTOBUF"`
	Schema     string    `json:"schema" jsonschema:"schema text"`
	References []string  `json:"references,omitempty" jsonschema:"texts of referenced schemas, in order"`
	SHA256     string    `json:"sha256" jsonschema:"SHA-256 of the canonical form"`
	FirstSeen  time.Time `json:"first_seen" jsonschema:"when Data Workers first saw this version"`
}

// RecordVersions stores versions not seen before and returns those that
// were new. Versions already stored keep their first-seen time.
func RecordVersions(ctx context.Context, db *store.DB, versions []SubjectVersion, seen time.Time) ([]SubjectVersion, error) {
	var fresh []SubjectVersion
	err := db.InTx(ctx, func(tx *store.Tx) error {
		fresh = fresh[:0]
		for _, v := range versions {
			refs, err := json.Marshal(v.References)
			if err != nil {
				return err
			}
			res, err := tx.ExecContext(ctx, `INSERT INTO registry_versions
				(subject, version, schema_id, schema_type, schema_text, references_json, sha256, first_seen_ms)
				VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (subject, version) DO NOTHING`,
				v.Subject, v.Version, v.ID, v.SchemaType, v.Schema, string(refs), v.SHA256, store.Millis(seen))
			if err != nil {
				return fmt.Errorf("record %s version %d: %w", v.Subject, v.Version, err)
			}
			if n, _ := res.RowsAffected(); n == 1 {
				v.FirstSeen = seen.UTC()
				fresh = append(fresh, v)
			}
		}
		return nil
	})
	return fresh, err
}

// Versions lists a subject's stored versions, oldest first.
func Versions(ctx context.Context, q store.Querier, subject string) ([]SubjectVersion, error) {
	rows, err := q.QueryContext(ctx, `SELECT subject, version, schema_id, schema_type, schema_text, references_json, sha256, first_seen_ms
		FROM registry_versions WHERE subject = ? ORDER BY version`, subject)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []SubjectVersion
	for rows.Next() {
		var v SubjectVersion
		var refs string
		var ms int64
		if err := rows.Scan(&v.Subject, &v.Version, &v.ID, &v.SchemaType, &v.Schema, &refs, &v.SHA256, &ms); err != nil {
			return nil, err
		}
		if err := json.Unmarshal([]byte(refs), &v.References); err != nil {
			return nil, fmt.Errorf("stored references of %s version %d: %w", v.Subject, v.Version, err)
		}
		v.FirstSeen = store.FromMillis(ms)
		out = append(out, v)
	}
	return out, rows.Err()
}

// Subjects lists the subjects with stored versions.
func Subjects(ctx context.Context, q store.Querier) ([]string, error) {
	return store.Strings(ctx, q, `SELECT DISTINCT subject FROM registry_versions ORDER BY subject`)
}
