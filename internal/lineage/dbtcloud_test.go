package lineage

import "testing"

// TestDBTCloudSpellingsFoldToTheGraphs: dbt Cloud jobs are dbt-cloud://
// in the graph; the system's name (dbt_cloud) and dbtcloud fold to it in
// ids and in the platform of a domain glob, and nothing else is caught.
func TestDBTCloudSpellingsFoldToTheGraphs(t *testing.T) {
	for _, in := range []string{"dbt_cloud://job/778", "DBT_Cloud://job/778", "dbtcloud://job/778", "dbt-cloud://job/778"} {
		if got, err := CanonicalID(in); err != nil || got != "dbt-cloud://job/778" {
			t.Errorf("CanonicalID(%s) = %s, %v", in, got, err)
		}
	}
	var n *Names
	for _, c := range []struct {
		glob, id string
		want     bool
	}{
		{"dbt-cloud://job/*", "dbt_cloud://job/778", true},
		{"dbt_cloud://job/*", "dbt-cloud://job/778", true},
		{"DBT_CLOUD://job/7*", "dbt-cloud://job/778", true},
		{"dbt_cloud://job/9*", "dbt-cloud://job/778", false},
		{"dbt_cloud://job/*", "dbt://model.loyalty.tiers", false},
		{"dbt*://job/*", "dbt-cloud://job/778", true},
	} {
		if got := n.MatchGlob(c.glob, c.id); got != c.want {
			t.Errorf("MatchGlob(%s, %s) = %v, want %v", c.glob, c.id, got, c.want)
		}
	}
}
