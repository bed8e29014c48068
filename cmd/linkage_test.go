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
// run. Nor does an agent link the warehouse drivers (internal/warehouses,
// internal/warehouse/<driver>, about 50 MiB): they run in `dw warehouse
// serve`, behind warehouseproc's proxy. Standard-library and third-party packages are not judged: what a
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
		drivers := 0
		for _, p := range strings.Fields(string(deps)) {
			if !strings.HasPrefix(p, module) {
				continue
			}
			rel := strings.TrimPrefix(p, module)
			if driverPackage(rel) {
				drivers++
			}
			switch {
			case strings.HasSuffix(rel, "test"):
				t.Errorf("%s links the test package %s", bin, p)
			case agent && (rel == "internal/demo" || strings.HasPrefix(rel, "internal/demo/") || rel == "internal/packload" || rel == "internal/story"):
				t.Errorf("agent %s links the demo package %s (the embedded default is seeded by dw demo seed)", bin, p)
			case agent && (rel == "internal/warehouses" || driverPackage(rel)):
				t.Errorf("agent %s links the warehouse driver package %s (drivers run in the warehouse child, dw warehouse serve)", bin, p)
			}
		}
		// dw hosts the drivers: if it links none, the driver paths have
		// moved and the agents' check above proves nothing.
		if bin == module+"cmd/dw" && drivers == 0 {
			t.Errorf("%s links no package under internal/warehouse/: where did the drivers go? Update driverPackage", bin)
		}
	}
}

// driverPackage reports whether rel (a path inside the module) is a
// warehouse driver or below one: internal/warehouse/<driver>[/...]. The
// interface package internal/warehouse itself is not a driver.
func driverPackage(rel string) bool {
	rest, ok := strings.CutPrefix(rel, "internal/warehouse/")
	return ok && rest != ""
}

// transportPackages may import the MCP SDK (with their subpackages): they
// speak the protocol, as a server or as a client driving the agents. Every
// other package of this module under internal/ is domain or infrastructure
// code and must be usable without it.
var transportPackages = map[string]string{
	"internal/mcpserver": "serves the agents' tools over MCP (mcpconfirm: the approval form)",
	"internal/benchmcp":  "drives the agents as an MCP client to measure them",
	"internal/story":     "drives the demo stories as an MCP client",
	"internal/agentboot": "starts an agent's MCP server (calls mcpserver.Main)",
}

// TestDomainPackagesDoNotImportTheMCPSDK: no internal/ package outside the
// transport packages (and their subpackages) links the MCP SDK, directly
// or through another package, so domain workflows are testable and usable
// without the protocol (issue 17).
func TestDomainPackagesDoNotImportTheMCPSDK(t *testing.T) {
	const module = "github.com/dataworkers/dw/"
	const sdk = "github.com/modelcontextprotocol/go-sdk"
	out, err := exec.Command("go", "list", "-deps", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, module+"internal/...").Output()
	if err != nil {
		t.Fatalf("go list -deps ./internal/...: %v", err)
	}
	imports := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		if len(f) > 0 {
			imports[f[0]] = f[1:]
		}
	}
	transport := func(p string) bool {
		rel := strings.TrimPrefix(p, module)
		for tp := range transportPackages {
			if rel == tp || strings.HasPrefix(rel, tp+"/") {
				return true
			}
		}
		return false
	}
	// linksSDK reports the SDK package p reaches, through non-test imports.
	memo := map[string]string{}
	var linksSDK func(p string) string
	linksSDK = func(p string) string {
		if via, ok := memo[p]; ok {
			return via
		}
		memo[p] = ""
		for _, imp := range imports[p] {
			if imp == sdk || strings.HasPrefix(imp, sdk+"/") {
				memo[p] = imp
				return imp
			}
			if via := linksSDK(imp); via != "" {
				memo[p] = imp + " -> " + via
				return memo[p]
			}
		}
		return ""
	}
	checked := 0
	for p := range imports {
		if !strings.HasPrefix(p, module+"internal/") || transport(p) {
			continue
		}
		checked++
		if via := linksSDK(p); via != "" {
			t.Errorf("%s links the MCP SDK (%s); move the protocol translation into a transport package (listed in transportPackages)", p, via)
		}
	}
	if checked < 20 {
		t.Fatalf("checked only %d internal packages; go list found too little", checked)
	}
}
