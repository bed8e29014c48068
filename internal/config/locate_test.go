package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// checkout makes a fake Data Workers checkout with bin/dw-quality in it and
// returns its root and the binary's path.
func checkout(t *testing.T) (root, exe string) {
	t.Helper()
	root = t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "go.mod"), []byte("module "+Module+"\n\ngo 1.26\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(root, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	exe = filepath.Join(root, "bin", "dw-quality")
	if err := os.WriteFile(exe, nil, 0o755); err != nil {
		t.Fatal(err)
	}
	return root, exe
}

func write(t *testing.T, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

// env sets DW_CONFIG and DW_HOME for the test (finish reads DW_HOME too)
// and returns the getenv load uses.
func env(t *testing.T, m map[string]string) func(string) string {
	t.Helper()
	t.Setenv("DW_CONFIG", m["DW_CONFIG"])
	t.Setenv("DW_HOME", m["DW_HOME"])
	return os.Getenv
}

const personFile = "people:\n  - { id: %s }\n"

func TestLoadOrderEnvThenCheckoutThenHome(t *testing.T) {
	root, exe := checkout(t)
	home := t.TempDir()
	explicit := filepath.Join(t.TempDir(), "mine.yaml")
	write(t, explicit, strings.Replace(personFile, "%s", "from-env", 1))
	write(t, filepath.Join(root, "dw.yaml"), strings.Replace(personFile, "%s", "from-checkout", 1))
	write(t, filepath.Join(home, "dw.yaml"), strings.Replace(personFile, "%s", "from-home", 1))

	cases := []struct {
		name, want, origin string
		vars               map[string]string
		exe                string
	}{
		{"DW_CONFIG wins", "from-env", OriginEnv, map[string]string{"DW_CONFIG": explicit, "DW_HOME": home}, exe},
		{"then the checkout", "from-checkout", OriginProject, map[string]string{"DW_HOME": home}, exe},
		{"then DW_HOME", "from-home", OriginHome, map[string]string{"DW_HOME": home}, filepath.Join(t.TempDir(), "dw-quality")},
		{"a symlink to the binary finds its checkout", "from-checkout", OriginProject, map[string]string{"DW_HOME": home}, symlink(t, exe)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := load(env(t, tc.vars), tc.exe)
			if err != nil {
				t.Fatal(err)
			}
			if len(c.People) != 1 || c.People[0].ID != tc.want || c.Origin != tc.origin {
				t.Fatalf("people %+v origin %q; want %s from %s", c.People, c.Origin, tc.want, tc.origin)
			}
		})
	}
}

func symlink(t *testing.T, target string) string {
	link := filepath.Join(t.TempDir(), "dw-quality")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	return link
}

// The working directory never matters: a dw.yaml there is not read.
func TestLoadIgnoresWorkingDirectory(t *testing.T) {
	cwd := t.TempDir()
	write(t, filepath.Join(cwd, "dw.yaml"), "people: [ { id: from-cwd } ]\n")
	t.Chdir(cwd)
	home := t.TempDir()
	c, err := load(env(t, map[string]string{"DW_HOME": home}), filepath.Join(t.TempDir(), "x"))
	if err != nil {
		t.Fatal(err)
	}
	if _, fromCwd := c.Person("from-cwd"); !c.EmbeddedDefault() || fromCwd {
		t.Fatalf("read %q (people %+v); want the embedded default", c.Source, c.People)
	}
	want := []string{filepath.Join(home, "dw.yaml")}
	if strings.Join(c.Searched, ",") != strings.Join(want, ",") {
		t.Errorf("searched %v, want %v", c.Searched, want)
	}
}

// A go.mod of another module is not a Data Workers checkout.
func TestOtherModuleIsNoCheckout(t *testing.T) {
	root := t.TempDir()
	write(t, filepath.Join(root, "go.mod"), "module example.com/other\n")
	write(t, filepath.Join(root, "dw.yaml"), "people: [ { id: other } ]\n")
	if got := checkoutRoot(filepath.Join(root, "bin", "dw")); got != "" {
		t.Fatalf("checkoutRoot = %q, want none", got)
	}
	r, exe := checkout(t)
	if got := checkoutRoot(exe); got != r {
		t.Fatalf("checkoutRoot = %q, want %q", got, r)
	}
	if got := checkoutRoot(""); got != "" {
		t.Fatalf("checkoutRoot(\"\") = %q", got)
	}
}

func TestDWConfigMissingIsAnError(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "nope.yaml")
	_, err := load(env(t, map[string]string{"DW_CONFIG": missing, "DW_HOME": t.TempDir()}), "")
	if err == nil || !strings.Contains(err.Error(), missing) || !strings.Contains(err.Error(), "DW_CONFIG") {
		t.Fatalf("err = %v; want one naming the file and DW_CONFIG", err)
	}
}

// A malformed file found by the lookup is reported, not skipped for the
// next place: falling back silently is what hid config mistakes.
func TestMalformedFileIsNotSkipped(t *testing.T) {
	root, exe := checkout(t)
	home := t.TempDir()
	write(t, filepath.Join(root, "dw.yaml"), "people:\n  - id: sam\ndomains:\n  - name: d\n    owners: [bob]\n")
	write(t, filepath.Join(home, "dw.yaml"), "")
	_, err := load(env(t, map[string]string{"DW_HOME": home}), exe)
	if err == nil {
		t.Fatal("a malformed checkout dw.yaml was accepted")
	}
	want := filepath.Join(root, "dw.yaml") + ":5: domains[0].owners[0]"
	if !strings.Contains(err.Error(), want) {
		t.Fatalf("err = %v; want it to name %s", err, want)
	}
}

func TestDescribe(t *testing.T) {
	home := t.TempDir()
	c, err := load(env(t, map[string]string{"DW_HOME": home}), "")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(c.Describe(), "\n")
	if len(lines) != 3 {
		t.Fatalf("Describe = %q", c.Describe())
	}
	wantPrefix := []string{
		"Configuration: the embedded default",
		"Store: SQLite at " + filepath.Join(home, "dw.db"),
		"Warehouses: demo (duckdb at " + filepath.Join(home, "demo.duckdb"),
	}
	for i, w := range wantPrefix {
		if !strings.HasPrefix(lines[i], w) {
			t.Errorf("line %d = %q, want prefix %q", i, lines[i], w)
		}
	}
	if !strings.Contains(lines[0], filepath.Join(home, "dw.yaml")) {
		t.Errorf("the default's line does not say where a dw.yaml would be read: %q", lines[0])
	}

	pg := filepath.Join(t.TempDir(), "dw.yaml")
	write(t, pg, "store: { driver: postgres, url: 'postgres://dw@db:5432/dw', password_env: PGPW }\n")
	c, err = load(env(t, map[string]string{"DW_CONFIG": pg, "DW_HOME": home}), "")
	if err != nil {
		t.Fatal(err)
	}
	d := c.Describe()
	if !strings.HasPrefix(d, "Configuration: "+pg+" (DW_CONFIG).\nStore: PostgreSQL at postgres://dw@db:5432/dw.\n") {
		t.Errorf("Describe = %q", d)
	}
}

// A home: written in the file wins over DW_HOME in the environment, so a
// program that writes its own dw.yaml (the demo, a test) never lands in the
// DW_HOME of whoever runs it.
func TestFileHomeWinsOverDWHome(t *testing.T) {
	userHome := t.TempDir()
	t.Setenv("DW_HOME", userHome)
	own := t.TempDir()
	c, err := Parse("dw.yaml", []byte("home: "+own+"\n"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Home != own || c.Store.Path != filepath.Join(own, "dw.db") || c.Warehouses[0].Path != filepath.Join(own, "demo.duckdb") {
		t.Fatalf("home %s, store %s, warehouse %s; want all in %s", c.Home, c.Store.Path, c.Warehouses[0].Path, own)
	}
	c, err = Parse("dw.yaml", []byte("people: [ { id: sam } ]\n"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Home != userHome {
		t.Fatalf("without home: in the file, home = %s, want DW_HOME %s", c.Home, userHome)
	}
}
