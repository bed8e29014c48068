package approvals

import (
	"fmt"
	"os"
	"testing"
)

// TestMain gives the package's tests a data directory of their own: calls
// on a store no Service registered a home for fall back to $DW_HOME for the
// receipt key, and a test must never create a key in whoever runs it's home.
func TestMain(m *testing.M) {
	home, err := os.MkdirTemp("", "approvals-test-home-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Setenv("DW_HOME", home)
	code := m.Run()
	os.RemoveAll(home)
	os.Exit(code)
}
