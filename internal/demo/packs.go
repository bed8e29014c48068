package demo

import (
	"fmt"
	"strings"

	"github.com/dataworkers/dw/internal/suggest"
)

// Packs are the scenario packs this package generates.
func Packs() []string { return []string{"billing", "loyalty"} }

// CheckPack returns an error naming the valid packs (and the closest one)
// when pack is not one of Packs, so every entry point that takes a pack
// name rejects a typo the same way.
func CheckPack(pack string) error {
	for _, p := range Packs() {
		if p == pack {
			return nil
		}
	}
	msg := fmt.Sprintf("unknown scenario pack %q; valid: %s", pack, strings.Join(Packs(), ", "))
	if c := suggest.Closest(pack, Packs(), 1); len(c) > 0 && pack != "" {
		msg += fmt.Sprintf(" (closest: %s)", c[0])
	}
	return fmt.Errorf("%s", msg)
}
