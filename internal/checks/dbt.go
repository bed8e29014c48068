package checks

import (
	"fmt"
	"github.com/dataworkers/dw/internal/lineage/ingest"
	"slices"
	"sort"
)

// FromDBTTests turns dbt's generic tests into expectations, per tested
// table (by asset id): unique declares the key (a repeat fails the check),
// not_null allows a null rate of 0, accepted_values lists the values.
// relationships cannot be judged by one table's scan, so it is reported in
// the notes, never silently dropped. The expectations are in dbt's
// spelling: SetExpectations resolves them against the catalog.
func FromDBTTests(tests []ingest.DBTTest) (map[string]*Expectations, []string) {
	out := map[string]*Expectations{}
	var notes []string
	for _, t := range tests {
		e := out[t.Asset]
		if e == nil {
			e = &Expectations{}
			out[t.Asset] = e
		}
		switch t.Name {
		case "unique":
			switch {
			case len(e.Key) == 0:
				e.Key = []string{t.Column}
			case !slices.Contains(e.Key, t.Column):
				// One key per table: another unique column is a second
				// key, which a predicate cannot state either.
				notes = append(notes, fmt.Sprintf("%s: unique on %s is not checked; the key is %s (one key per table)", t.Asset, t.Column, e.Key[0]))
			}
		case "not_null":
			if e.MaxNullRate == nil {
				e.MaxNullRate = map[string]float64{}
			}
			e.MaxNullRate[t.Column] = 0
		case "accepted_values":
			i := slices.IndexFunc(e.AcceptedValues, func(a AcceptedValues) bool { return a.Column == t.Column })
			if i < 0 {
				e.AcceptedValues = append(e.AcceptedValues, AcceptedValues{Column: t.Column, Values: t.Values})
				break
			}
			// Two lists for one column: a value must be in both.
			e.AcceptedValues[i].Values = slices.DeleteFunc(e.AcceptedValues[i].Values, func(v string) bool { return !slices.Contains(t.Values, v) })
		case "relationships":
			notes = append(notes, fmt.Sprintf("%s: relationships test %s -> %s.%s is not checked: it joins two tables, and a quality check scans one", t.Asset, t.Column, t.To, t.Field))
		}
	}
	for asset, e := range out {
		if len(e.Key) == 0 && len(e.MaxNullRate) == 0 && len(e.AcceptedValues) == 0 {
			delete(out, asset) // only relationships: nothing a scan checks
		}
	}
	sort.Strings(notes)
	return out, notes
}
