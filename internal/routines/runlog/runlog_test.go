package runlog

import "testing"

func TestParseStatus(t *testing.T) {
	for s, want := range map[string]Status{"": "", "  ": "", "flagged": StatusFlagged, " OK ": StatusOK, "Canceled": StatusCanceled} {
		if got, err := ParseStatus(s); err != nil || got != want {
			t.Errorf("ParseStatus(%q) = %q, %v; want %q", s, got, err, want)
		}
	}
	_, err := ParseStatus(" Flaged ")
	if want := `unknown status "flaged"; valid: running, ok, flagged, failed, canceled, lost`; err == nil || err.Error() != want {
		t.Errorf("unknown status: %v, want %s", err, want)
	}
}
