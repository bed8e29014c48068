package config

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Module is the Go module path of a Data Workers checkout; a go.mod
// declaring it marks the checkout's root.
const Module = "github.com/dataworkers/dw"

// Where the configuration came from (Config.Origin).
const (
	OriginEnv     = "DW_CONFIG"
	OriginProject = "the checkout's dw.yaml"
	OriginHome    = "dw.yaml in DW_HOME"
	OriginDefault = "embedded default"
)

// place is where Load looks: the file, how it was named, and whether a
// missing file is an error (it is only when DW_CONFIG names it).
type place struct {
	path, origin string
	required     bool
}

// places lists, in order, where the configuration is looked for:
//
//  1. $DW_CONFIG, when set (a missing file is then an error);
//  2. dw.yaml at the root of the Data Workers checkout the running binary
//     lives in (bin/dw-quality → the directory above with Module's go.mod);
//  3. dw.yaml in the data directory ($DW_HOME, else the default one).
//
// The working directory plays no part: an MCP client starts the agents
// wherever it likes (Claude Code in the directory it was opened in, Claude
// Desktop in /), and the agents and `dw` must agree on one configuration
// and so on one store. A `home:` key cannot move step 3: the file has not
// been read yet when it is looked for.
func places(getenv func(string) string, exe string) ([]place, error) {
	if p := getenv("DW_CONFIG"); p != "" {
		return []place{{path: p, origin: OriginEnv, required: true}}, nil
	}
	var ps []place
	if root := checkoutRoot(exe); root != "" {
		ps = append(ps, place{path: filepath.Join(root, "dw.yaml"), origin: OriginProject})
	}
	home := getenv("DW_HOME")
	if home == "" {
		h, err := defaultHome()
		if err != nil {
			return ps, err
		}
		home = h
	}
	ps = append(ps, place{path: filepath.Join(expandHome(home), "dw.yaml"), origin: OriginHome})
	return ps, nil
}

// checkoutRoot finds the Data Workers checkout holding the executable exe
// by walking up from its directory to a go.mod declaring Module; "" when
// the binary lives elsewhere (installed with go install, a test binary).
func checkoutRoot(exe string) string {
	if exe == "" {
		return ""
	}
	if resolved, err := filepath.EvalSymlinks(exe); err == nil {
		exe = resolved
	}
	for dir := filepath.Dir(exe); ; {
		if declaresModule(filepath.Join(dir, "go.mod")) {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
}

func declaresModule(gomod string) bool {
	f, err := os.Open(gomod)
	if err != nil {
		return false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if rest, ok := strings.CutPrefix(line, "module"); ok {
			return strings.Trim(strings.TrimSpace(rest), `"`) == Module
		}
	}
	return false
}

// load reads the first configuration file that exists among places, else
// the embedded default.
func load(getenv func(string) string, exe string) (*Config, error) {
	ps, err := places(getenv, exe)
	if err != nil {
		return nil, err
	}
	var searched []string
	for _, p := range ps {
		data, err := os.ReadFile(p.path)
		if err != nil {
			if errors.Is(err, os.ErrNotExist) && !p.required {
				searched = append(searched, p.path)
				continue
			}
			if errors.Is(err, os.ErrNotExist) {
				return nil, fmt.Errorf("config %s (named by DW_CONFIG) does not exist; unset DW_CONFIG to use the checkout's or DW_HOME's dw.yaml", p.path)
			}
			return nil, fmt.Errorf("read config %s: %w", p.path, err)
		}
		c, err := Parse(p.path, data)
		if err != nil {
			return nil, err
		}
		c.Origin = p.origin
		return c, nil
	}
	c, err := Default()
	if err != nil {
		return nil, err
	}
	c.Searched = searched
	return c, nil
}

// Describe says, in a few lines for a person or a model, which
// configuration file and which store are in use, and where a dw.yaml would
// be read from when there is none.
func (c *Config) Describe() string {
	var b strings.Builder
	if c.Source == "" {
		fmt.Fprintf(&b, "Configuration: the embedded default (demo warehouse and demo data; no dw.yaml found at %s).\n", strings.Join(c.Searched, " or "))
	} else {
		origin := c.Origin
		if origin == "" {
			origin = "given"
		}
		fmt.Fprintf(&b, "Configuration: %s (%s).\n", c.Source, origin)
	}
	switch c.Store.Driver {
	case "postgres":
		// The URL carries no password: validate refuses one.
		fmt.Fprintf(&b, "Store: PostgreSQL at %s.\n", c.Store.URL)
	default:
		fmt.Fprintf(&b, "Store: SQLite at %s.\n", c.Store.Path)
	}
	var ws []string
	for _, w := range c.Warehouses {
		if w.Kind == "duckdb" {
			ws = append(ws, fmt.Sprintf("%s (duckdb at %s)", w.Name, w.Path))
		} else {
			ws = append(ws, fmt.Sprintf("%s (%s)", w.Name, w.Kind))
		}
	}
	fmt.Fprintf(&b, "Warehouses: %s.", strings.Join(ws, ", "))
	return b.String()
}
