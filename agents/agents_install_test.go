package agents

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestInstallLinksEveryNameAndLeavesNothingElse: each agent's name becomes
// the binary itself (a hard link), replacing a file of the old layout; a
// second install changes nothing and leaves no temporary link behind.
func TestInstallLinksEveryNameAndLeavesNothingElse(t *testing.T) {
	dir := t.TempDir()
	if err := Install(dir); err == nil {
		t.Fatal("Install without the binary succeeded")
	}
	bin := filepath.Join(dir, Binary)
	if err := os.WriteFile(bin, []byte("agents"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, All()[0].Name), []byte("an old separate binary"), 0o755); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := Install(dir); err != nil {
			t.Fatal(err)
		}
		want := []string{Binary}
		for _, a := range All() {
			want = append(want, a.Name)
		}
		var have []string
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			have = append(have, e.Name())
		}
		slices.Sort(want)
		if !slices.Equal(have, want) {
			t.Fatalf("the directory holds %v, want %v", have, want)
		}
		binInfo, err := os.Stat(bin)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range All() {
			fi, err := os.Stat(filepath.Join(dir, a.Name))
			if err != nil || !os.SameFile(fi, binInfo) {
				t.Fatalf("%s is not %s (%v)", a.Name, Binary, err)
			}
		}
	}
}
