package main

import (
	"context"
	"fmt"

	"github.com/dataworkers/dw/internal/packload"
)

func init() {
	register("demo seed", "", "seed the embedded default's store with every scenario pack, once (agents run this on their first start)", demoSeed)
}

// demoSeed is how the embedded default gets its demo data without the
// agents linking it: an agent that opens an unseeded embedded store runs
// this and waits (internal/deps.SeedWithDW). Running it again, or from
// several agents at once, seeds once.
func demoSeed(ctx context.Context, e *env, args []string) error {
	fs := e.flags("demo seed")
	if _, err := parseFlags(fs, args); err != nil {
		return err
	}
	cfg, err := e.config()
	if err != nil {
		return err
	}
	if !cfg.EmbeddedDefault() {
		return fmt.Errorf("only the embedded default (no dw.yaml) is seeded; %s configures its own store: load a pack into it with `dw demo load PACK`", cfg.Source)
	}
	if _, err := e.service(ctx); err != nil {
		return err
	}
	if err := packload.SeedDefault(ctx, e.db, cfg, e.clock); err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "The embedded default's store in %s holds the scenario packs.\n", cfg.Home)
	return nil
}
