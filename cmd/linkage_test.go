// Package cmd holds only this test: what the production binaries link.
package cmd

import (
	"os/exec"
	"strings"
	"testing"
)

// TestProductionBinariesLinkNoFakesOrDemo: no binary under cmd/ links a
// test fake (a package of this module whose path ends in "test", such as
// registrytest or storetest), and no agent (cmd/dw-*) links the demo
// scenario packs or their generators (internal/demo and below, packload):
// the embedded default is seeded by dw (`dw demo seed`), which the agents
// run. Standard-library and third-party packages are not judged: what a
// driver links is the driver's business.
func TestProductionBinariesLinkNoFakesOrDemo(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}}", "./...").Output()
	if err != nil {
		t.Fatalf("go list ./...: %v", err)
	}
	const module = "github.com/dataworkers/dw/"
	var bins []string
	for _, p := range strings.Fields(string(out)) {
		if strings.HasPrefix(p, module+"cmd/") {
			bins = append(bins, p)
		}
	}
	if len(bins) < 6 {
		t.Fatalf("found %d binaries under cmd/: %v; want dw and the five agents", len(bins), bins)
	}
	for _, bin := range bins {
		agent := strings.HasPrefix(bin, module+"cmd/dw-")
		deps, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", bin).Output()
		if err != nil {
			t.Fatalf("go list -deps %s: %v", bin, err)
		}
		for _, p := range strings.Fields(string(deps)) {
			if !strings.HasPrefix(p, module) {
				continue
			}
			rel := strings.TrimPrefix(p, module)
			switch {
			case strings.HasSuffix(rel, "test"):
				t.Errorf("%s links the test package %s", bin, p)
			case agent && (rel == "internal/demo" || strings.HasPrefix(rel, "internal/demo/") || rel == "internal/packload" || rel == "internal/story"):
				t.Errorf("agent %s links the demo package %s (the embedded default is seeded by dw demo seed)", bin, p)
			}
		}
	}
}
