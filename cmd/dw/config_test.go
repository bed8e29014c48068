package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestHelpAndVersionFlags(t *testing.T) {
	h := newHarness(t, "")
	for _, flag := range []string{"--help", "-h"} {
		out, errOut, code := h.dw("alice", flag)
		if code != 0 || errOut != "" || !strings.Contains(out, "dw approve") || !strings.Contains(out, "dw config") {
			t.Errorf("dw %s: code %d, stderr %q, stdout %q", flag, code, errOut, out)
		}
	}
	out, _, code := h.dw("alice", "--version")
	fields := strings.Fields(out)
	if code != 0 || len(fields) != 2 || fields[0] != "dw" || fields[1] == "" {
		t.Errorf("dw --version: code %d, %q", code, out)
	}
}

func TestConfigSaysFileAndStore(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "state", "dw.db")
	h := newHarness(t, "store:\n  path: "+db+"\n")
	out, errOut, code := h.dw("alice", "config")
	if code != 0 {
		t.Fatalf("dw config: code %d: %s", code, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "Configuration: "+h.path+" ") || lines[1] != "Store: SQLite at "+db+"." {
		t.Errorf("dw config:\n%s", out)
	}
	if _, err := os.Stat(db); err == nil {
		t.Error("dw config opened the store; it only reads the configuration")
	}
}

func TestConfigReportsMalformedFile(t *testing.T) {
	h := newHarness(t, "store:\n  driver: oracle\n")
	out, errOut, code := h.dw("alice", "config")
	if code != 1 || out != "" || !strings.Contains(errOut, h.path+":2: store.driver") {
		t.Errorf("code %d, stdout %q, stderr %q; want exit 1 naming %s:2: store.driver", code, out, errOut, h.path)
	}
}

// The bash script completes every subcommand family and the second words.
func TestCompletionBash(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	h := newHarness(t, "")
	script, _, code := h.dw("alice", "completion", "bash")
	if code != 0 {
		t.Fatalf("completion bash: code %d", code)
	}
	complete := func(words ...string) []string {
		t.Helper()
		prog := script + `
COMP_WORDS=(` + strings.Join(words, " ") + `)
COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
_dw
printf '%s\n' "${COMPREPLY[@]}"
`
		out, err := exec.Command(bash, "--norc", "-c", prog).CombinedOutput()
		if err != nil {
			t.Fatalf("bash: %v\n%s", err, out)
		}
		return strings.Fields(string(out))
	}
	if got := complete("dw", "appr"); strings.Join(got, " ") != "approvals approve approvers" {
		t.Errorf("dw appr<TAB> = %v", got)
	}
	if got := complete("dw", "receipt", "''"); strings.Join(got, " ") != "anchor show verify" {
		t.Errorf("dw receipt <TAB> = %v", got)
	}
	if got := complete("dw", "--v"); strings.Join(got, " ") != "--version" {
		t.Errorf("dw --v<TAB> = %v", got)
	}
	if got := complete("dw", "completion", "z"); strings.Join(got, " ") != "zsh" {
		t.Errorf("dw completion z<TAB> = %v", got)
	}
}

func TestCompletionZshAndUnknownShell(t *testing.T) {
	h := newHarness(t, "")
	script, _, code := h.dw("alice", "completion", "zsh")
	if code != 0 || !strings.HasPrefix(script, "#compdef dw\n") || !strings.Contains(script, "approvals) opts=(") {
		t.Errorf("completion zsh: code %d\n%s", code, script)
	}
	if zsh, err := exec.LookPath("zsh"); err == nil {
		if out, err := exec.Command(zsh, "-n", "-c", script).CombinedOutput(); err != nil {
			t.Errorf("zsh -n: %v\n%s", err, out)
		}
	}
	_, errOut, code := h.dw("alice", "completion", "fish")
	if code != 1 || !strings.Contains(errOut, "valid: bash, zsh") {
		t.Errorf("completion fish: code %d, %q", code, errOut)
	}
	_, _, code = h.dw("alice", "completion")
	if code != 2 {
		t.Errorf("completion without a shell: code %d, want 2", code)
	}
}
