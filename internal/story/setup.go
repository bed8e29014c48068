package story

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/goccy/go-yaml"

	"github.com/dataworkers/dw/internal/approvals"
	"github.com/dataworkers/dw/internal/clock"
	"github.com/dataworkers/dw/internal/compat"
	"github.com/dataworkers/dw/internal/config"
	"github.com/dataworkers/dw/internal/demo"
	"github.com/dataworkers/dw/internal/demo/schemaregistry"
	"github.com/dataworkers/dw/internal/demo/tables"
	"github.com/dataworkers/dw/internal/packload"
	"github.com/dataworkers/dw/internal/storeconfig"
)

// peers are the in-process stand-ins for systems a story needs: they speak
// the real REST APIs on loopback, and the agents reach them through
// ordinary configuration.
type peers struct {
	registry *schemaregistry.Server
}

func (p *peers) close() {
	if p.registry != nil {
		p.registry.Close()
	}
}

// fileConfig is the dw.yaml a story writes: the same keys a team writes.
type fileConfig struct {
	Home string `yaml:"home"`
	// Store is named, not left to home: DW_HOME in the environment
	// overrides home, and the demo must not write to the user's own store.
	Store          config.Store       `yaml:"store"`
	Warehouses     []config.Warehouse `yaml:"warehouses"`
	SchemaRegistry *config.Service    `yaml:"schema_registry,omitempty"`
	People         []config.Person    `yaml:"people"`
	Domains        []config.Domain    `yaml:"domains"`
}

// prepare loads the pack into a fresh home, starts the peers it needs and
// writes dw.yaml. The person at this terminal stands in for each of the
// approvers in turn: dw.yaml maps their login to the first, and
// dw-<person>.yaml to each other one, as a team maps its own people.
func (e *Env) prepare(ctx context.Context, pack string, approvers ...string) (*demo.Pack, demo.Instants, *peers, error) {
	if err := os.MkdirAll(e.Home, 0o700); err != nil {
		return nil, demo.Instants{}, nil, err
	}
	p, tl, err := packload.Read(pack, e.Now)
	if err != nil {
		return nil, tl, nil, err
	}
	pr := &peers{}
	cfg := fileConfig{Home: e.Home, Store: config.Store{Driver: "sqlite", Path: filepath.Join(e.Home, "dw.db")}, People: p.People, Domains: p.Domains,
		Warehouses: []config.Warehouse{{Name: "demo", Kind: "duckdb", Path: filepath.Join(e.Home, "demo.duckdb")}}}
	if len(p.Subjects) > 0 {
		reg, err := schemaregistry.Start()
		if err != nil {
			return nil, tl, nil, err
		}
		pr.registry = reg
		for _, s := range p.Subjects {
			level, err := compat.ParseLevel(s.Compatibility)
			if err != nil {
				pr.close()
				return nil, tl, nil, err
			}
			var seeds []schemaregistry.Seeded
			for _, v := range s.Versions {
				if v.State == "registered" {
					seeds = append(seeds, schemaregistry.Seeded{Kind: compat.Avro, Schema: v.Schema, Version: v.Version})
				}
			}
			if _, err := pr.registry.SeedVersions(s.Subject, level, seeds...); err != nil {
				pr.close()
				return nil, tl, nil, err
			}
		}
		cfg.SchemaRegistry = &config.Service{URL: pr.registry.URL()}
		e.say("Started an in-process Schema Registry at %s (an in-memory server speaking the Confluent REST API, seeded with the pack's registered versions).", pr.registry.URL())
	}
	login := config.CurrentOSUser()
	var raw []byte
	for i, who := range approvers {
		as := cfg
		as.People = append([]config.Person(nil), cfg.People...)
		for j := range as.People {
			// dw.yaml, which the agents read, maps the login to every
			// approver it stands in for: the approvers recorded with each
			// proposal come from it, and a decision is checked against them.
			if as.People[j].ID == who || (i == 0 && slices.Contains(approvers, as.People[j].ID)) {
				as.People[j].OSUsers = append(append([]string(nil), as.People[j].OSUsers...), login)
			}
			if as.People[j].ID == who {
				e.say("%s maps your login %q to %s, so `dw approve` with it decides as them.", e.configFor(who, i == 0), login, as.People[j].Name)
			}
		}
		out, err := yaml.Marshal(as)
		if err != nil {
			pr.close()
			return nil, tl, nil, err
		}
		if err := os.WriteFile(filepath.Join(e.Home, e.configFor(who, i == 0)), out, 0o600); err != nil {
			pr.close()
			return nil, tl, nil, err
		}
		if i == 0 {
			raw = out
			e.primary = who
		}
	}
	loaded, err := config.Parse(filepath.Join(e.Home, "dw.yaml"), raw)
	if err != nil {
		pr.close()
		return nil, tl, nil, fmt.Errorf("the demo's own dw.yaml: %w", err)
	}
	if err := tables.LoadWarehouse(ctx, filepath.Join(e.Home, "demo.duckdb"), pack, e.Now); err != nil {
		pr.close()
		return nil, tl, nil, err
	}
	db, err := storeconfig.Open(ctx, loaded)
	if err != nil {
		pr.close()
		return nil, tl, nil, err
	}
	defer db.Close()
	rep, err := packload.LoadStore(ctx, db, clock.NewFake(tl.QualityCheck), p, "demo")
	if err != nil {
		pr.close()
		return nil, tl, nil, err
	}
	// The story replays a past day: on this store, and only on a store so
	// marked, DW_CLOCK also dates people's decisions.
	if err := approvals.MarkReplayStore(ctx, db, e.Home, tl.QualityCheck); err != nil {
		pr.close()
		return nil, tl, nil, err
	}
	e.say("Loaded pack %s into %s: warehouse tables with 21 days of hourly history; %d graph assets, %d edges; %d changes; %d schema versions seen.",
		pack, e.Home, rep.GraphAssets, rep.GraphEdges, rep.Changes, rep.Versions)
	e.say("Incident day %s; the agents run as if it were %s (DW_CLOCK).", tl.Day.Format("Mon 2006-01-02"), tl.QualityCheck.Format("15:04 MST"))
	return p, tl, pr, nil
}

// configFor names the config file that maps this terminal's login to who.
func (e *Env) configFor(who string, primary bool) string {
	if primary || who == e.primary {
		return "dw.yaml"
	}
	return "dw-" + who + ".yaml"
}

// schemaFile finds a pack subject's version text.
func schemaFile(p *demo.Pack, subject string, version int) (string, error) {
	for _, s := range p.Subjects {
		if s.Subject != subject {
			continue
		}
		for _, v := range s.Versions {
			if v.Version == version {
				return v.Schema, nil
			}
		}
	}
	var names []string
	for _, s := range p.Subjects {
		names = append(names, s.Subject)
	}
	return "", fmt.Errorf("pack %s has no version %d of %s (subjects: %s)", p.Name, version, subject, strings.Join(names, ", "))
}
