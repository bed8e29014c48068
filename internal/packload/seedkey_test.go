package packload

import (
	"testing"

	"github.com/dataworkers/dw/internal/deps"
)

// The agents check deps.EmbeddedSeededKey before running `dw demo seed`,
// which writes seededKey: a difference would make every agent start seed
// the store again.
func TestSeededKeyIsTheOneAgentsCheck(t *testing.T) {
	if seededKey != deps.EmbeddedSeededKey {
		t.Fatalf("packload marks %q, agents check %q", seededKey, deps.EmbeddedSeededKey)
	}
}
