package registry

import (
	"fmt"
	"strings"

	"github.com/dataworkers/dw/internal/compat"
)

// Disagreement compares the registry's verdict with a local one computed
// under the level the registry applied, and describes the difference for a
// person; it returns "" when they agree. A disagreement is reported, never
// resolved in either side's favour: the registry is what accepts or refuses
// a registration, the local check is what names fields and versions.
func Disagreement(local *compat.Verdict, remote *Compatibility) string {
	if local == nil || remote == nil || local.Compatible == remote.IsCompatible {
		return ""
	}
	if remote.IsCompatible {
		var why []string
		for _, r := range local.Reasons {
			why = append(why, r.String())
		}
		return fmt.Sprintf("the registry (against %s) finds the schema compatible, but the local check under %s does not: %s",
			remote.Against, local.Level, strings.Join(why, "; "))
	}
	var why []string
	for _, m := range remote.Issues {
		switch {
		case m.ErrorType != "" && m.OldSchemaVersion > 0:
			why = append(why, fmt.Sprintf("%s (%s) against version %d", m.ErrorType, nonEmpty(m.AdditionalInfo, m.Description), m.OldSchemaVersion))
		case m.ErrorType != "":
			why = append(why, fmt.Sprintf("%s (%s)", m.ErrorType, nonEmpty(m.AdditionalInfo, m.Description)))
		default:
			why = append(why, m.Raw)
		}
	}
	if len(why) == 0 {
		why = []string{"no messages given"}
	}
	return fmt.Sprintf("the registry (against %s) finds the schema incompatible, but the local check under %s finds it compatible; the registry says: %s",
		remote.Against, local.Level, strings.Join(why, "; "))
}

func nonEmpty(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
