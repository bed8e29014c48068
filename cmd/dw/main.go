// Command dw is the human side of Data Workers: decide proposals, stop and
// resume all dispatch, set autonomy levels, read and verify receipts, and
// run the Slack approvals listener.
//
// Each subcommand family lives in its own file and registers itself in an
// init function with one call to register.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"

	"github.com/dataworkers/dw/internal/approvals"
	"github.com/dataworkers/dw/internal/clock"
	"github.com/dataworkers/dw/internal/config"
	"github.com/dataworkers/dw/internal/mcpserver"
	"github.com/dataworkers/dw/internal/page"
	"github.com/dataworkers/dw/internal/store"
	"github.com/dataworkers/dw/internal/storeconfig"
	"github.com/dataworkers/dw/internal/suggest"
)

// command is one subcommand. Its name may have several words
// ("receipt show"); the longest registered name matching the arguments wins.
type command struct {
	name    string
	usage   string
	summary string
	run     func(ctx context.Context, e *env, args []string) error
}

var commands = map[string]command{}

// version is set by the build (-ldflags "-X main.version=…").
var version = "dev"

// register adds a subcommand. usage is the argument synopsis shown in help.
func register(name, usage, summary string, run func(ctx context.Context, e *env, args []string) error) {
	if _, dup := commands[name]; dup {
		panic("dw: subcommand registered twice: " + name)
	}
	commands[name] = command{name: name, usage: usage, summary: summary, run: run}
}

func init() {
	register("help", "", "list the subcommands", func(_ context.Context, e *env, _ []string) error {
		printHelp(e.stdout)
		return nil
	})
}

// env is what a subcommand works with. Tests build one with their own
// writers, OS user and configuration loader.
type env struct {
	stdout, stderr io.Writer
	// stdin answers confirmation prompts (dw approve of a long lineage
	// event); nil, or a file that is not a terminal, never answers.
	stdin io.Reader
	// osUser is the login of the account running dw, looked up by uid
	// (approvals.OSLogin), never taken from $USER: the evidence for
	// terminal decisions. When the uid has no account it is "" and
	// osUserErr says why.
	osUser     string
	osUserErr  error
	clock      clock.Clock
	loadConfig func() (*config.Config, error)
	log        *slog.Logger

	cfg *config.Config
	db  *store.DB
	svc *approvals.Service
}

func (e *env) config() (*config.Config, error) {
	if e.cfg == nil {
		cfg, err := e.loadConfig()
		if err != nil {
			return nil, err
		}
		e.cfg = cfg
		e.clock = config.DemoClockFor(cfg, e.clock) // the embedded default acts on its demo's incident day
	}
	return e.cfg, nil
}

func (e *env) service(ctx context.Context) (*approvals.Service, error) {
	if e.svc != nil {
		return e.svc, nil
	}
	cfg, err := e.config()
	if err != nil {
		return nil, err
	}
	db, err := storeconfig.Open(ctx, cfg)
	if err != nil {
		return nil, err
	}
	e.db = db
	e.svc = approvals.New(db, cfg, e.clock, nil)
	// Cursors dw prints (dw routines list) are signed with this store's key.
	page.SetKeySource(func() ([]byte, error) { return page.StoreKey(context.Background(), db) })
	return e.svc, nil
}

func (e *env) close() {
	if e.db != nil {
		e.db.Close()
		e.db, e.svc = nil, nil
	}
}

func main() {
	config.PrivateFiles()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	slog.SetDefault(log)
	clk, err := clock.FromEnv(os.Getenv)
	if err != nil {
		fmt.Fprintln(os.Stderr, "dw:", err)
		os.Exit(2)
	}
	login, loginErr := approvals.OSLogin()
	e := &env{stdout: os.Stdout, stderr: os.Stderr, stdin: os.Stdin, osUser: login, osUserErr: loginErr, clock: clk, loadConfig: config.Load, log: log}
	os.Exit(run(ctx, e, os.Args[1:]))
}

// run dispatches and returns the exit code: 0 success, 1 failure, 2 usage.
func run(ctx context.Context, e *env, args []string) int {
	defer e.close()
	if len(args) == 0 {
		printHelp(e.stderr)
		return 2
	}
	switch args[0] {
	case "-h", "-help", "--help":
		printHelp(e.stdout)
		return 0
	case "-version", "--version", "version":
		fmt.Fprintf(e.stdout, "dw %s\n", mcpserver.Version(version))
		return 0
	}
	cmd, rest, ok := lookup(args)
	if !ok {
		var names []string
		for n := range commands {
			names = append(names, n)
		}
		fmt.Fprintf(e.stderr, "dw: unknown command %q; closest: %s (dw help lists them)\n",
			strings.Join(args[:min(2, len(args))], " "), strings.Join(suggest.Closest(strings.Join(args[:min(2, len(args))], " "), names, 3), ", "))
		return 2
	}
	err := cmd.run(ctx, e, rest)
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, errUsage):
		fmt.Fprintf(e.stderr, "usage: dw %s %s\n", cmd.name, cmd.usage)
		return 2
	default:
		fmt.Fprintf(e.stderr, "dw %s: %v\n", cmd.name, err)
		return 1
	}
}

// lookup finds the longest registered name the leading arguments spell.
func lookup(args []string) (command, []string, bool) {
	for n := min(3, len(args)); n > 0; n-- {
		if c, ok := commands[strings.Join(args[:n], " ")]; ok {
			return c, args[n:], true
		}
	}
	return command{}, nil, false
}

func printHelp(w io.Writer) {
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	fmt.Fprintln(w, "dw: the human side of Data Workers (approvals, stop, autonomy, receipts)")
	fmt.Fprintln(w, "\nUsage:")
	for _, n := range names {
		c := commands[n]
		fmt.Fprintf(w, "  dw %-46s %s\n", strings.TrimSpace(c.name+" "+c.usage), c.summary)
	}
	fmt.Fprintln(w, "  dw --version")
	fmt.Fprintln(w, "\nThe config is $DW_CONFIG, else dw.yaml at the root of the checkout dw was built in,")
	fmt.Fprintln(w, "else $DW_HOME/dw.yaml, else the embedded default; dw config says which, and checks it.")
}

// login is the OS account deciding at this terminal, or why it is unknown.
func (e *env) login() (string, error) {
	if e.osUser != "" {
		return e.osUser, nil
	}
	if e.osUserErr != nil {
		return "", e.osUserErr
	}
	return "", errors.New("the OS account running dw is unknown; decisions need a named account")
}

// terminalDecider is the person at this terminal as the config maps the
// OS login. Which person that is counts only where no record says
// otherwise: decisions on proposals are checked against the approvers
// recorded with the proposal.
func (e *env) terminalDecider() (approvals.Decider, error) {
	login, err := e.login()
	if err != nil {
		return approvals.Decider{}, err
	}
	return approvals.OSUserDecider(e.cfg, approvals.ChannelTerminal, login)
}

// errUsage makes run print the command's usage line.
var errUsage = errors.New("usage")

// parseFlags parses flags anywhere among the arguments (dw reject ID
// --reason x) and returns the positional ones.
func parseFlags(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			// The flag package has already said what was wrong.
			return nil, errUsage
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// flags builds a flag set that reports to the env's stderr.
func (e *env) flags(name string) *flag.FlagSet {
	fs := flag.NewFlagSet("dw "+name, flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	return fs
}
