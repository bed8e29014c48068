// Command gen writes the scenario packs' metadata files (dbt manifest,
// lineage notes, people, schemas, change log, connectors, OpenLineage
// events) under testdata/scenarios/<pack>/.
//
//	go run ./internal/demo/gen [-root testdata/scenarios] [pack ...]
//
// The warehouse tables are not files: tables.LoadWarehouse (package
// internal/demo/tables) generates them.
package main

import (
	"flag"
	"log/slog"
	"os"

	"github.com/dataworkers/dw/internal/demo"
)

func main() {
	root := flag.String("root", "testdata/scenarios", "directory holding one directory per pack")
	flag.Parse()
	packs := flag.Args()
	if len(packs) == 0 {
		packs = demo.Packs()
	}
	for _, p := range packs {
		if err := demo.WritePackFiles(*root, p); err != nil {
			slog.Error("write pack files", "pack", p, "err", err)
			os.Exit(1)
		}
		slog.Info("wrote pack files", "pack", p, "root", *root)
	}
}
