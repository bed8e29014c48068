package deps

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/dataworkers/dw/internal/clock"
	"github.com/dataworkers/dw/internal/config"
	"github.com/dataworkers/dw/internal/store"
)

// EmbeddedSeededKey is the store setting that marks the embedded default's
// store as seeded with the scenario packs (written by `dw demo seed`).
const EmbeddedSeededKey = "embedded_default_seeded"

// Sibling is how an agent finds the dw binary installed beside it, for the
// work it hands to dw: seeding the embedded default (warehouseproc finds
// the warehouse children the same way).
// Tests point it elsewhere.
var Sibling = func(args ...string) (*exec.Cmd, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	dw := filepath.Join(filepath.Dir(exe), "dw")
	if _, err := os.Stat(dw); err != nil {
		return nil, fmt.Errorf("there is no dw binary beside %s: build it (make build, or start-agent.sh builds it)", exe)
	}
	return exec.Command(dw, args...), nil
}

// SeedWithDW is the agents' SeedStore: on the embedded default, the first
// time any agent opens a store nobody has seeded, it runs `dw demo seed`
// and waits for it. The scenario packs live in dw alone, so no agent
// binary links the demo data or its generators. dw takes a file lock and
// re-checks the marker, so five agents starting at once seed it once. The
// child inherits the environment (DW_HOME, DW_CONFIG, DW_CLOCK), so it
// seeds the same store as of the same clock; its stdout goes to this
// process's stderr, never to the MCP stream.
func SeedWithDW(ctx context.Context, db *store.DB, cfg *config.Config, _ clock.Clock) error {
	if !cfg.EmbeddedDefault() {
		return nil
	}
	if _, _, ok, err := store.GetSetting(ctx, db, EmbeddedSeededKey); err != nil || ok {
		return err
	}
	cmd, err := Sibling("demo", "seed")
	if err != nil {
		return fmt.Errorf("the embedded default is seeded by dw: %w", err)
	}
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := runCtx(ctx, cmd); err != nil {
		return fmt.Errorf("dw demo seed: %w (its output is in this agent's log)", err)
	}
	if _, _, ok, err := store.GetSetting(ctx, db, EmbeddedSeededKey); err != nil || !ok {
		if err == nil {
			err = fmt.Errorf("dw demo seed finished but the store is not marked seeded (is DW_HOME the same for dw and the agent?)")
		}
		return err
	}
	return nil
}

// runCtx runs cmd and kills it when ctx ends.
func runCtx(ctx context.Context, cmd *exec.Cmd) error {
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		_ = cmd.Process.Kill()
		<-done
		return ctx.Err()
	}
}
