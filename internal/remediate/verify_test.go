package remediate

import "testing"

// A metric defined on a table spelled without its database describes the
// table an incident names with it; different tables, platforms or
// non-table assets are never the same.
func TestSameAsset(t *testing.T) {
	for _, c := range []struct {
		a, b string
		same bool
	}{
		{"duckdb://loyalty.trips", "duckdb://demo.loyalty.trips", true},
		{"duckdb://loyalty.trips", "duckdb://loyalty.trips", true},
		{"duckdb://loyalty.trips", "duckdb://loyalty.trips_v2", false},
		{"duckdb://loyalty.trips", "snowflake://loyalty.trips", false},
		{"duckdb://a.loyalty.trips", "duckdb://b.other.trips", false},
		{"kafka://prod/trips", "kafka://staging/trips", false},
	} {
		if got := sameAsset(c.a, c.b); got != c.same {
			t.Errorf("sameAsset(%s, %s) = %v, want %v", c.a, c.b, got, c.same)
		}
	}
}
