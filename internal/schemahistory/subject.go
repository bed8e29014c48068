package schemahistory

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/dataworkers/dw/internal/clock"
	"github.com/dataworkers/dw/internal/registry"
	"github.com/dataworkers/dw/internal/store"
	"github.com/dataworkers/dw/internal/suggest"
)

// SubjectHistory is a subject's versions as a compatibility check sees them.
type SubjectHistory struct {
	// Versions are oldest first; none for a subject with no known version.
	Versions []SubjectVersion
	// Reached is true when the registry answered for the subject.
	Reached bool
	// Note says where the versions came from when that matters to the
	// reader: a registry not configured or not reached, a subject it has
	// not got (with the closest names, in case it was mistyped).
	Note string
}

// ReadSubjectHistory reads a subject's versions: from the registry when c is not
// nil and the registry answers (remembering them, and logging new ones as
// ReadSubject does), else the versions remembered when it was last read.
// A subject nobody has seen is not an error: it has no versions, and the
// note names the closest known subjects.
func ReadSubjectHistory(ctx context.Context, db *store.DB, c *registry.Client, subject, source string, clk clock.Clock) (*SubjectHistory, error) {
	var note string
	if c != nil {
		hist, err := c.History(ctx, subject)
		switch {
		case err == nil:
			stored, _, err := remember(ctx, db, c, subject, hist, source, clk)
			if err != nil {
				return nil, err
			}
			return &SubjectHistory{Versions: stored, Reached: true}, nil
		case registry.IsUnreachable(err):
			note = fmt.Sprintf("the schema registry was not reached (%v); the local verdict uses the versions Data Workers stored when it last read the registry", err)
		default:
			var nf *registry.SubjectNotFoundError
			if !errors.As(err, &nf) {
				return nil, err
			}
			// A brand-new subject: the schema would be its first version.
			note := fmt.Sprintf("the registry has no subject %q yet: this schema would be its first version", subject)
			if subjects, lerr := c.Subjects(ctx); lerr == nil {
				if closest := suggest.Closest(subject, subjects, 3); len(closest) > 0 {
					note += fmt.Sprintf("; if you meant another subject, the closest are %s", strings.Join(closest, ", "))
				}
			}
			return &SubjectHistory{Reached: true, Note: note}, nil
		}
	} else {
		note = "no schema registry is configured (set schema_registry.url in dw.yaml); the local verdict uses the versions Data Workers stored earlier"
	}
	stored, err := Versions(ctx, db, subject)
	if err != nil {
		return nil, err
	}
	if len(stored) == 0 {
		// Nothing known: judged as a first version, with the closest known
		// subjects named in case the name was mistyped.
		known, _ := Subjects(ctx, db)
		note = fmt.Sprintf("no versions of subject %q are known, so it is judged as a first version (%s)", subject, note)
		if closest := suggest.Closest(subject, known, 5); len(closest) > 0 {
			note += fmt.Sprintf("; if you meant another subject, the closest known are %s", strings.Join(closest, ", "))
		}
		return &SubjectHistory{Note: note}, nil
	}
	return &SubjectHistory{Versions: stored, Note: note}, nil
}
