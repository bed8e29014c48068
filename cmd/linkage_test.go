// Package cmd holds only this test: what the production binaries link.
package cmd

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/dataworkers/dw/internal/warehouseproc"
)

// TestProductionBinariesLinkNoFakesOrDemo: no binary under cmd/ links a
// test fake (a package of this module whose path ends in "test", such as
// registrytest or storetest), and no agent binary (cmd/dw-agents, and
// cmd/dw-starter, which stands in for it) links the demo
// scenario packs or their generators (internal/demo and below, packload):
// the embedded default is seeded by dw (`dw demo seed`), which the agents
// run. Nor does an agent link the warehouse drivers (internal/warehouses,
// internal/warehouse/<driver>, about 50 MiB): they run in a warehouse
// child behind warehouseproc's proxy. Each child (cmd/dw-warehouse-<kind>)
// links its own kind's driver and no other, nor the store, the MCP SDK
// or internal/warehouses: it exists to be small.
// Standard-library and third-party packages are not judged beyond that:
// what a driver links is the driver's business.
func TestProductionBinariesLinkNoFakesOrDemo(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}}", "./...").Output()
	if err != nil {
		t.Fatalf("go list ./...: %v", err)
	}
	var bins []string
	for _, p := range strings.Fields(string(out)) {
		if strings.HasPrefix(p, module+"cmd/") {
			bins = append(bins, p)
		}
	}
	want := []string{"cmd/dw", "cmd/dw-agents"}
	for _, kind := range warehouseproc.Kinds() {
		want = append(want, "cmd/"+warehouseproc.ChildPrefix+kind)
	}
	for _, w := range want {
		if !slices.Contains(bins, module+w) {
			t.Fatalf("found the binaries %v under cmd/; want %s among them (dw, the agents' binary, a warehouse child per kind)", bins, w)
		}
	}
	for _, bin := range bins {
		childKind, child := strings.CutPrefix(bin, module+"cmd/"+warehouseproc.ChildPrefix)
		agent := strings.HasPrefix(bin, module+"cmd/dw-") && !child
		deps, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}} {{.Dir}}{{end}}", bin).Output()
		if err != nil {
			t.Fatalf("go list -deps %s: %v", bin, err)
		}
		drivers := 0
		for _, line := range strings.Split(strings.TrimSpace(string(deps)), "\n") {
			p, dir, _ := strings.Cut(line, " ")
			if strings.HasPrefix(p, module) {
				keyCacheOn(t, dir)
			}
			if child && (under(p, "github.com/modelcontextprotocol/go-sdk") || under(p, "modernc.org/sqlite") || under(p, "github.com/jackc/pgx") ||
				childKind != "duckdb" && under(p, "github.com/duckdb/") ||
				childKind != "bigquery" && under(p, "cloud.google.com/go/bigquery") ||
				childKind != "snowflake" && under(p, "github.com/snowflakedb/")) {
				t.Errorf("the %s warehouse child %s links %s", childKind, bin, p)
			}
			if !strings.HasPrefix(p, module) {
				continue
			}
			rel := strings.TrimPrefix(p, module)
			if driverPackage(rel) {
				drivers++
			}
			switch {
			case child && driverPackage(rel) && rel != "internal/warehouse/"+childKind && !strings.HasPrefix(rel, "internal/warehouse/"+childKind+"/"):
				t.Errorf("the %s warehouse child %s links the driver package %s (each kind has a child of its own)", childKind, bin, p)
			case child && (rel == "internal/warehouses" || rel == "internal/store" || rel == "internal/deps"):
				t.Errorf("the %s warehouse child %s links %s", childKind, bin, p)
			case strings.HasSuffix(rel, "test"):
				t.Errorf("%s links the test package %s", bin, p)
			case agent && (rel == "internal/demo" || strings.HasPrefix(rel, "internal/demo/") || rel == "internal/packload" || rel == "internal/story"):
				t.Errorf("agent %s links the demo package %s (the embedded default is seeded by dw demo seed)", bin, p)
			case agent && (rel == "internal/warehouses" || strings.HasPrefix(rel, "internal/warehouses/") || driverPackage(rel)):
				t.Errorf("agent %s links the warehouse driver package %s (drivers run in the warehouse child of their kind)", bin, p)
			}
		}
		// dw and the children host the drivers: if one links none, the
		// driver paths have moved and the agents' check above proves
		// nothing.
		if (bin == module+"cmd/dw" || child) && drivers == 0 {
			t.Errorf("%s links no package under internal/warehouse/: where did the drivers go? Update driverPackage", bin)
		}
	}
}

// under reports whether the import path p is root or below it.
func under(p, root string) bool {
	return p == root || strings.HasPrefix(p, strings.TrimSuffix(root, "/")+"/")
}

// keyCacheOn reads the directory of one of the module's packages and
// stats each file in it, so that go test's cache, which keys a test's
// result on the files it opened, runs this test again after a change to
// what a binary imports (it learns its answers from go list, whose reads
// the cache does not see).
func keyCacheOn(t *testing.T, dir string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if _, err := os.Stat(filepath.Join(dir, e.Name())); err != nil {
			t.Fatal(err)
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

// internalImports maps every package the module's internal/ packages link
// to its non-test imports (go list -deps).
func internalImports(t *testing.T) map[string][]string {
	t.Helper()
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
	return imports
}

// reacher returns, for a package, the chain of imports by which it links a
// package that target picks ("" when it links none).
func reacher(imports map[string][]string, target func(string) bool) func(p string) string {
	memo := map[string]string{}
	var reach func(p string) string
	reach = func(p string) string {
		if via, ok := memo[p]; ok {
			return via
		}
		memo[p] = ""
		for _, imp := range imports[p] {
			if target(imp) {
				memo[p] = imp
				return imp
			}
			if via := reach(imp); via != "" {
				memo[p] = imp + " -> " + via
				return memo[p]
			}
		}
		return ""
	}
	return reach
}

// within reports whether p (an import path) is one of the listed module
// paths or below one.
func within(p string, list map[string]string) bool {
	rel := strings.TrimPrefix(p, module)
	for tp := range list {
		if rel == tp || strings.HasPrefix(rel, tp+"/") {
			return true
		}
	}
	return false
}

const module = "github.com/dataworkers/dw/"

// TestDomainPackagesDoNotImportTheMCPSDK: no internal/ package outside the
// transport packages (and their subpackages) links the MCP SDK, directly
// or through another package, so domain workflows are testable and usable
// without the protocol (issue 17).
func TestDomainPackagesDoNotImportTheMCPSDK(t *testing.T) {
	const sdk = "github.com/modelcontextprotocol/go-sdk"
	imports := internalImports(t)
	linksSDK := reacher(imports, func(p string) bool { return p == sdk || strings.HasPrefix(p, sdk+"/") })
	checked := 0
	for p := range imports {
		if !strings.HasPrefix(p, module+"internal/") || within(p, transportPackages) {
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

// wiringPackages may link internal/deps (with their subpackages): they
// build and hand out what an agent's handlers share. Every other package
// under internal/ is a domain or infrastructure package, which is given
// what it needs (values, interfaces, funcs) by the one that wires it.
var wiringPackages = map[string]string{
	"internal/deps":      "the wiring layer itself (deps/clients: its client accessors)",
	"internal/agentboot": "starts an agent: loads its deps once, then serves",
	"internal/benchmcp":  "builds the agents' binary and installs it under their names (agents.Install, which links every agent)",
}

// TestDomainPackagesDoNotImportDeps: internal/deps is the wiring layer
// above the domains, so no domain package links it, directly or through
// another: dw watch builds one deps in cmd and gives internal/routines
// the store, graph, warehouses and clients through routines.Options.
func TestDomainPackagesDoNotImportDeps(t *testing.T) {
	const deps = module + "internal/deps"
	imports := internalImports(t)
	linksDeps := reacher(imports, func(p string) bool { return p == deps || strings.HasPrefix(p, deps+"/") })
	if _, ok := imports[module+"internal/routines"]; !ok {
		t.Fatal("go list found no internal/routines: where did dw watch's domain package go?")
	}
	for p := range imports {
		if !strings.HasPrefix(p, module+"internal/") || within(p, wiringPackages) {
			continue
		}
		if via := linksDeps(p); via != "" {
			t.Errorf("%s links %s (%s); pass what it needs in from cmd or agentboot instead (or list it in wiringPackages)", p, deps, via)
		}
	}
}
