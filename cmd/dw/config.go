package main

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
)

func init() {
	register("config", "", "say which dw.yaml and store dw and the agents use, and check the file", configShow)
	register("completion", "bash|zsh", "print a shell completion script (bash: source <(dw completion bash))", completion)
}

// configShow prints where the configuration came from and which store it
// names. A file that does not load is the error, with its file, line and
// key; the agents answer every tool call with the same error.
func configShow(_ context.Context, e *env, args []string) error {
	if _, err := parseFlags(e.flags("config"), args); err != nil {
		return err
	}
	cfg, err := e.config()
	if err != nil {
		return err
	}
	fmt.Fprintln(e.stdout, cfg.Describe())
	return nil
}

func completion(_ context.Context, e *env, args []string) error {
	if len(args) != 1 {
		return errUsage
	}
	switch args[0] {
	case "bash":
		writeBash(e.stdout)
	case "zsh":
		writeZsh(e.stdout)
	default:
		return fmt.Errorf("no completion for shell %q; valid: bash, zsh", args[0])
	}
	return nil
}

// commandWords returns the first words of the subcommands (plus --help and
// --version) and, for each first word with more, the second words.
func commandWords() (first []string, second map[string][]string) {
	second = map[string][]string{}
	seen := map[string]bool{}
	for name := range commands {
		w := strings.Fields(name)
		if !seen[w[0]] {
			seen[w[0]] = true
			first = append(first, w[0])
		}
		if len(w) > 1 {
			second[w[0]] = append(second[w[0]], w[1])
		}
	}
	first = append(first, "--help", "--version")
	sort.Strings(first)
	for k := range second {
		sort.Strings(second[k])
	}
	return first, second
}

func sortedKeys(m map[string][]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func writeBash(w io.Writer) {
	first, second := commandWords()
	fmt.Fprintf(w, `# bash completion for dw. Load it with: source <(dw completion bash)
_dw() {
  local cur="${COMP_WORDS[COMP_CWORD]}" words=""
  case "$COMP_CWORD" in
    1) words=%q ;;
    2)
      case "${COMP_WORDS[1]}" in
`, strings.Join(first, " "))
	for _, k := range sortedKeys(second) {
		fmt.Fprintf(w, "        %s) words=%q ;;\n", k, strings.Join(second[k], " "))
	}
	fmt.Fprint(w, `        completion) words="bash zsh" ;;
      esac
      ;;
  esac
  COMPREPLY=($(compgen -W "$words" -- "$cur"))
}
complete -F _dw dw
`)
}

func writeZsh(w io.Writer) {
	first, second := commandWords()
	fmt.Fprintf(w, `#compdef dw
# zsh completion for dw. Load it with: source <(dw completion zsh)
# (after compinit), or save it as _dw in a directory on $fpath.
_dw() {
  local -a opts
  case $CURRENT in
    2) opts=(%s) ;;
    3)
      case ${words[2]} in
`, strings.Join(first, " "))
	for _, k := range sortedKeys(second) {
		fmt.Fprintf(w, "        %s) opts=(%s) ;;\n", k, strings.Join(second[k], " "))
	}
	fmt.Fprint(w, `        completion) opts=(bash zsh) ;;
      esac
      ;;
  esac
  (( ${#opts} )) && compadd -a opts
}
if [[ "${funcstack[1]}" == _dw ]]; then _dw "$@"; else compdef _dw dw; fi
`)
}
