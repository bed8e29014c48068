package lineage

import (
	"slices"
	"testing"

	"github.com/dataworkers/dw/internal/lineage/lineagetest"
)

// lineagetest writes lineage's rows without importing lineage, so it
// states the kinds and flag bits itself; this holds them to the model.
func TestLineagetestAgreesWithModel(t *testing.T) {
	kinds := []string{string(KindTopic), string(KindStreamJob), string(KindTable), string(KindDBTModel), string(KindDashboard)}
	if !slices.Equal(lineagetest.BulkKinds, kinds) {
		t.Errorf("lineagetest.BulkKinds = %v, want %v", lineagetest.BulkKinds, kinds)
	}
	if lineagetest.FlagMoney != int(flagMoney) || lineagetest.FlagScheduled != int(flagScheduled) {
		t.Errorf("lineagetest flags money %d scheduled %d, want %d and %d", lineagetest.FlagMoney, lineagetest.FlagScheduled, flagMoney, flagScheduled)
	}
}
