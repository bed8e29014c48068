// Package config reads dw.yaml and the environment.
//
// The file is found at $DW_CONFIG, else at the root of the checkout the
// binary runs from, else in $DW_HOME (locate.go). Without a file the agents
// run on the embedded default: a DuckDB demo warehouse and a SQLite store in
// the data directory ($DW_HOME, else $XDG_DATA_HOME/data-workers, else
// ~/.local/share/data-workers), so an MCP client can add an agent on a
// fresh clone with nothing else configured.
//
// Secrets never appear in the file: it names environment variables
// (password_env, token_env, …) and Secret reads them when a connection is
// made. Nothing here prints a secret's value.
package config

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/parser"
)

// Config is the whole configuration.
type Config struct {
	// Home is the data directory for the embedded default (else DW_HOME,
	// else the default data directory).
	Home           string          `yaml:"home"`
	Store          Store           `yaml:"store"`
	Warehouses     []Warehouse     `yaml:"warehouses"`
	Kafka          *Kafka          `yaml:"kafka"`
	SchemaRegistry *Service        `yaml:"schema_registry"`
	KafkaConnect   *Service        `yaml:"kafka_connect"`
	Flink          *Service        `yaml:"flink"`
	OpenLineage    *Service        `yaml:"openlineage"`
	Slack          *Slack          `yaml:"slack"`
	Orchestrators  Orchestrators   `yaml:"orchestrators"`
	People         []Person        `yaml:"people"`
	Domains        []Domain        `yaml:"domains"`
	Approvals      ApprovalDefault `yaml:"approvals"`
	Routines       []Routine       `yaml:"routines"`

	// Source is the file the configuration came from, or "" for the
	// embedded default.
	Source string `yaml:"-"`
	// Origin says how Source was found (OriginEnv, OriginProject,
	// OriginHome); Searched lists the files looked for when none existed.
	Origin   string   `yaml:"-"`
	Searched []string `yaml:"-"`
}

// Store says where state lives.
type Store struct {
	// Driver is sqlite (default) or postgres.
	Driver string `yaml:"driver"`
	// Path is the SQLite file (default: $DW_HOME/dw.db).
	Path string `yaml:"path"`
	// URL is the PostgreSQL URL without a password.
	URL string `yaml:"url"`
	// PasswordEnv names the variable holding the PostgreSQL password.
	PasswordEnv string `yaml:"password_env"`
}

// Warehouse is one warehouse connection.
type Warehouse struct {
	Name string `yaml:"name"`
	// Kind is duckdb, bigquery or snowflake.
	Kind    string        `yaml:"kind"`
	Timeout time.Duration `yaml:"timeout"`

	// DuckDB.
	Path string `yaml:"path"`

	// BigQuery.
	Project        string `yaml:"project"`
	Location       string `yaml:"location"`
	Dataset        string `yaml:"dataset"`
	CredentialsEnv string `yaml:"credentials_env"`
	// Endpoint overrides the warehouse's address. BigQuery: the API's
	// (an emulator or a test server), and it turns authentication off.
	// Snowflake: https://host[:port] in place of
	// <account>.snowflakecomputing.com (a proxy, a private endpoint under
	// a name of its own); see SnowflakeEndpoint.
	Endpoint           string `yaml:"endpoint"`
	MaxBytesPerQuery   int64  `yaml:"max_bytes_per_query"`
	MaxBytesPerSession int64  `yaml:"max_bytes_per_session"`

	// Snowflake.
	Account       string `yaml:"account"`
	User          string `yaml:"user"`
	PasswordEnv   string `yaml:"password_env"`
	PrivateKeyEnv string `yaml:"private_key_env"`
	Role          string `yaml:"role"`
	Database      string `yaml:"database"`
	Schema        string `yaml:"schema"`
	Compute       string `yaml:"warehouse"`
}

// SnowflakeEndpoint splits a Snowflake section's endpoint into what the
// driver takes; all empty when the section has none. The password or the
// key-signed token is sent there, so plain http is accepted only to a
// loopback host (a local proxy or a test server), and the URL may carry
// nothing but a scheme, a host and a port: a path, a query or a user
// would be dropped by the driver without a word.
func (w Warehouse) SnowflakeEndpoint() (protocol, host string, port int, err error) {
	if w.Endpoint == "" {
		return "", "", 0, nil
	}
	const valid = "valid: https://host or https://host:port (http:// only to localhost)"
	u, err := url.Parse(w.Endpoint)
	if err != nil || u.Opaque != "" || u.Host == "" {
		return "", "", 0, fmt.Errorf("%q is not a URL; %s", clip(withoutUser(w.Endpoint)), valid)
	}
	shown := clip(u.Redacted()) // never the password a URL may carry
	if u.User != nil || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
		return "", "", 0, fmt.Errorf("%q has more than a scheme, host and port; %s", shown, valid)
	}
	host = u.Hostname()
	switch u.Scheme {
	case "https":
		port = 443
	case "http":
		if !loopbackHost(host) {
			return "", "", 0, fmt.Errorf("%q: plain http would send the password or key-signed token in the clear; use https (http is accepted only to localhost)", shown)
		}
		port = 80
	default:
		return "", "", 0, fmt.Errorf("%q: scheme %q; %s", shown, clip(u.Scheme), valid)
	}
	if p := u.Port(); p != "" {
		if port, err = strconv.Atoi(p); err != nil || port < 1 || port > 65535 {
			return "", "", 0, fmt.Errorf("%q: port %q is not 1-65535; %s", shown, p, valid)
		}
	}
	// The driver joins host and port as host+":"+port, so an IPv6
	// address keeps its brackets.
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	return u.Scheme, host, port, nil
}

// withoutUser is an endpoint that did not parse as a URL, fit to quote:
// whatever precedes its last '@' after the scheme (a user and perhaps a
// password) is left out.
func withoutUser(raw string) string {
	at := strings.LastIndexByte(raw, '@')
	if at < 0 {
		return raw
	}
	start := 0
	if i := strings.Index(raw, "://"); i >= 0 && i < at {
		start = i + len("://")
	}
	return raw[:start] + "…" + raw[at:]
}

// clip shortens a value quoted in an error to what a reader needs.
func clip(s string) string {
	const most = 120
	if len(s) <= most {
		return s
	}
	return s[:most] + "…"
}

// loopbackHost reports whether host names this machine: localhost or a
// loopback address. A name is not resolved: what it resolves to can change.
func loopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Kafka is a Kafka cluster.
type Kafka struct {
	Name    string        `yaml:"name"`
	Brokers []string      `yaml:"brokers"`
	TLS     bool          `yaml:"tls"`
	SASL    *SASL         `yaml:"sasl"`
	Timeout time.Duration `yaml:"timeout"`
}

// SASL is Kafka authentication.
type SASL struct {
	// Mechanism is PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512.
	Mechanism   string `yaml:"mechanism"`
	UsernameEnv string `yaml:"username_env"`
	PasswordEnv string `yaml:"password_env"`
}

// Service is an HTTP service (Schema Registry, Kafka Connect, Flink
// JobManager, an OpenLineage endpoint, an orchestrator).
type Service struct {
	URL         string        `yaml:"url"`
	UsernameEnv string        `yaml:"username_env"`
	PasswordEnv string        `yaml:"password_env"`
	TokenEnv    string        `yaml:"token_env"`
	Timeout     time.Duration `yaml:"timeout"`
	// AccountID and Region serve dbt Cloud and AWS Step Functions.
	AccountID string `yaml:"account_id"`
	Region    string `yaml:"region"`
}

// Slack is where approval requests are posted.
type Slack struct {
	BotTokenEnv string `yaml:"bot_token_env"`
	AppTokenEnv string `yaml:"app_token_env"`
	// Channel copies every request; approvers also get a direct message.
	Channel string `yaml:"channel"`
	// APIURL overrides the Slack API base URL (tests use slacktest).
	APIURL string `yaml:"api_url"`
}

// Orchestrators are the systems an approved rerun is dispatched to.
type Orchestrators struct {
	Dagster       *Service `yaml:"dagster"`
	Airflow       *Service `yaml:"airflow"`
	DBTCloud      *Service `yaml:"dbt_cloud"`
	StepFunctions *Service `yaml:"step_functions"`
}

// Person is someone who owns assets or approves changes.
type Person struct {
	ID      string `yaml:"id"`
	Name    string `yaml:"name"`
	Email   string `yaml:"email"`
	SlackID string `yaml:"slack_id"`
	// OSUsers are the login names under which this person runs `dw` or an
	// MCP client; they make the terminal and elicitation channels theirs.
	OSUsers []string `yaml:"os_users"`
}

// Domain is a set of assets with its owners, approvers and autonomy.
type Domain struct {
	Name string `yaml:"name"`
	// Assets are asset id patterns: path.Match globs, where ** also crosses
	// slashes (e.g. "snowflake://usage.*", "sigma://**").
	Assets []string `yaml:"assets"`
	// Autonomy is L0 (manual) … L4 (autonomous); default L2 (propose).
	Autonomy string `yaml:"autonomy"`
	// Owners are person ids; the first is the domain owner.
	Owners []string `yaml:"owners"`
	// Approvers is the escalation order; default: the owners.
	Approvers []string `yaml:"approvers"`
	// Copy are people copied on every request.
	Copy []string `yaml:"copy"`
	// ApprovalExpiry is how long a request waits before it escalates.
	ApprovalExpiry time.Duration `yaml:"approval_expiry"`
	// OpenClasses are the reversible action classes an L3 domain may run
	// without a per-action approval (for example "rerun").
	OpenClasses []string `yaml:"open_classes"`
}

// ApprovalDefault holds organisation-wide approval settings.
type ApprovalDefault struct {
	Expiry time.Duration `yaml:"expiry"`
}

// Autonomy levels, lowest first.
var AutonomyLevels = []string{"L0", "L1", "L2", "L3", "L4"}

// Load reads the configuration from $DW_CONFIG, else the dw.yaml of the
// checkout the running binary lives in, else $DW_HOME/dw.yaml, else the
// embedded default (see places in locate.go).
func Load() (*Config, error) {
	exe, _ := os.Executable() // "" is fine: no checkout step
	return load(os.Getenv, exe)
}

// Default is the embedded default configuration.
func Default() (*Config, error) {
	c := &Config{}
	c.addDemoPeople(CurrentOSUser()) // embedded.go
	if err := c.finish(); err != nil {
		return nil, err
	}
	return c, nil
}

// Parse reads a configuration file's contents. Errors name the file, the
// line and the key.
func Parse(path string, data []byte) (*Config, error) {
	c := &Config{}
	if len(bytes.TrimSpace(data)) > 0 {
		if err := yaml.UnmarshalWithOptions(data, c, yaml.DisallowUnknownField()); err != nil {
			return nil, fmt.Errorf("config %s: %s", path, yaml.FormatError(err, false, true))
		}
	}
	c.Source = path
	if errs := c.validate(); len(errs) > 0 {
		var b strings.Builder
		for i, e := range errs {
			if i > 0 {
				b.WriteString("\n")
			}
			line := lineOf(data, e.path)
			if line > 0 {
				fmt.Fprintf(&b, "config %s:%d: %s: %s", path, line, e.key(), e.msg)
			} else {
				fmt.Fprintf(&b, "config %s: %s: %s", path, e.key(), e.msg)
			}
		}
		return nil, errors.New(b.String())
	}
	if err := c.finish(); err != nil {
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	return c, nil
}

type fieldError struct {
	path string // YAML path, e.g. $.domains[0].autonomy
	msg  string
}

func (e fieldError) key() string { return strings.TrimPrefix(e.path, "$.") }

// lineOf finds the line of a YAML path in the source, 0 if not found.
func lineOf(data []byte, p string) int {
	file, err := parser.ParseBytes(data, 0)
	if err != nil {
		return 0
	}
	for cur := p; cur != "$" && cur != ""; {
		yp, err := yaml.PathString(cur)
		if err == nil {
			if node, err := yp.FilterFile(file); err == nil && node != nil {
				return node.GetToken().Position.Line
			}
		}
		// Fall back to the parent key (a missing key is reported on its parent).
		i := strings.LastIndexAny(cur, ".[")
		if i <= 0 {
			break
		}
		cur = cur[:i]
	}
	return 0
}

func (c *Config) validate() []fieldError {
	var errs []fieldError
	add := func(path, format string, args ...any) {
		errs = append(errs, fieldError{path, fmt.Sprintf(format, args...)})
	}
	switch c.Store.Driver {
	case "", "sqlite":
	case "postgres":
		if c.Store.URL == "" {
			add("$.store.url", "postgres needs url (e.g. postgres://dw@db:5432/dw; the password goes in password_env)")
		}
		if u, err := url.Parse(c.Store.URL); err == nil && u.User != nil {
			if _, has := u.User.Password(); has {
				add("$.store.url", "holds a password; put it in an environment variable and name it in password_env")
			}
		}
	default:
		add("$.store.driver", "unknown driver %q; valid: sqlite, postgres", c.Store.Driver)
	}
	names := map[string]bool{}
	for i, w := range c.Warehouses {
		p := fmt.Sprintf("$.warehouses[%d]", i)
		if w.Name == "" {
			add(p+".name", "missing; every warehouse needs a name the tools can refer to")
		} else if names[w.Name] {
			add(p+".name", "duplicate warehouse name %q", w.Name)
		}
		names[w.Name] = true
		switch w.Kind {
		case "duckdb":
			if w.Path == "" {
				add(p+".path", "duckdb needs path (the .duckdb file)")
			}
		case "bigquery":
			if w.Project == "" {
				add(p+".project", "bigquery needs project")
			}
		case "snowflake":
			if w.Account == "" {
				add(p+".account", "snowflake needs account")
			}
			if w.User == "" {
				add(p+".user", "snowflake needs user")
			}
			if w.PasswordEnv == "" && w.PrivateKeyEnv == "" {
				add(p+".password_env", "snowflake needs password_env or private_key_env")
			}
			if _, _, _, err := w.SnowflakeEndpoint(); err != nil {
				add(p+".endpoint", "%v", err)
			}
		default:
			add(p+".kind", "unknown kind %q; valid: duckdb, bigquery, snowflake", w.Kind)
		}
	}
	if c.Kafka != nil && len(c.Kafka.Brokers) == 0 {
		add("$.kafka.brokers", "missing; list at least one host:port")
	}
	people := map[string]bool{}
	for i, p := range c.People {
		path := fmt.Sprintf("$.people[%d]", i)
		if p.ID == "" {
			add(path+".id", "missing; people are referred to by id in domains")
		} else if people[p.ID] {
			add(path+".id", "duplicate person id %q", p.ID)
		}
		people[p.ID] = true
	}
	known := func() string {
		var ids []string
		for _, p := range c.People {
			ids = append(ids, p.ID)
		}
		if len(ids) == 0 {
			return "(no people are defined; add them under people:)"
		}
		return strings.Join(ids, ", ")
	}
	for i, d := range c.Domains {
		path := fmt.Sprintf("$.domains[%d]", i)
		if d.Name == "" {
			add(path+".name", "missing")
		}
		if d.Autonomy != "" && !validLevel(d.Autonomy) {
			add(path+".autonomy", "unknown level %q; valid: %s", d.Autonomy, strings.Join(AutonomyLevels, ", "))
		}
		for j, o := range d.Owners {
			if !people[o] {
				add(fmt.Sprintf("%s.owners[%d]", path, j), "unknown person %q; defined: %s", o, known())
			}
		}
		for j, o := range d.Approvers {
			if !people[o] {
				add(fmt.Sprintf("%s.approvers[%d]", path, j), "unknown person %q; defined: %s", o, known())
			}
		}
		for j, o := range d.Copy {
			if !people[o] {
				add(fmt.Sprintf("%s.copy[%d]", path, j), "unknown person %q; defined: %s", o, known())
			}
		}
		if d.ApprovalExpiry < 0 {
			add(path+".approval_expiry", "must be positive, e.g. 2h")
		}
	}
	errs = append(errs, c.validateRoutines()...)
	return errs
}

func validLevel(s string) bool {
	for _, l := range AutonomyLevels {
		if s == l {
			return true
		}
	}
	return false
}

// finish fills defaults: the data directory, the SQLite store in it and,
// with no warehouse configured, the demo DuckDB warehouse.
func (c *Config) finish() error {
	// A home: in the file wins over DW_HOME: the file is the deliberate
	// choice, and a program that writes a dw.yaml naming its own home (the
	// demo, a test) must never land in the DW_HOME of whoever runs it.
	if h := os.Getenv("DW_HOME"); h != "" && c.Home == "" {
		c.Home = h
	}
	if c.Home == "" {
		h, err := defaultHome()
		if err != nil {
			return err
		}
		c.Home = h
	}
	c.Home = expandHome(c.Home)
	if c.Store.Driver == "" {
		c.Store.Driver = "sqlite"
	}
	if c.Store.Driver == "sqlite" && c.Store.Path == "" {
		c.Store.Path = filepath.Join(c.Home, "dw.db")
	}
	c.Store.Path = expandHome(c.Store.Path)
	if len(c.Warehouses) == 0 {
		c.Warehouses = []Warehouse{{Name: "demo", Kind: "duckdb", Path: filepath.Join(c.Home, "demo.duckdb")}}
	}
	for i := range c.Warehouses {
		c.Warehouses[i].Path = expandHome(c.Warehouses[i].Path)
	}
	if c.Approvals.Expiry == 0 {
		c.Approvals.Expiry = 4 * time.Hour
	}
	for i := range c.Domains {
		d := &c.Domains[i]
		if d.Autonomy == "" {
			d.Autonomy = "L2"
		}
		if len(d.Approvers) == 0 {
			d.Approvers = append([]string(nil), d.Owners...)
		}
		if d.ApprovalExpiry == 0 {
			d.ApprovalExpiry = c.Approvals.Expiry
		}
	}
	return nil
}

// EmbeddedDefault reports whether the warehouse is the generated demo one,
// which the agents create and seed on first use.
func (c *Config) EmbeddedDefault() bool { return c.Source == "" }

func defaultHome() (string, error) {
	if x := os.Getenv("XDG_DATA_HOME"); x != "" {
		return filepath.Join(x, "data-workers"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("no data directory: set DW_HOME (%w)", err)
	}
	return filepath.Join(home, ".local", "share", "data-workers"), nil
}

func expandHome(p string) string {
	if p == "~" || strings.HasPrefix(p, "~/") {
		if h, err := os.UserHomeDir(); err == nil {
			return filepath.Join(h, strings.TrimPrefix(p, "~"))
		}
	}
	return p
}

// Secret reads the environment variable a config key names. what says
// which key named it, for the error.
func Secret(env, what string) (string, error) {
	if env == "" {
		return "", fmt.Errorf("%s is not set in the config: name the environment variable that holds it", what)
	}
	v, ok := os.LookupEnv(env)
	if !ok || v == "" {
		return "", fmt.Errorf("environment variable %s (named by %s) is not set", env, what)
	}
	return v, nil
}

// Warehouse finds a warehouse by name; "" is the first one.
func (c *Config) Warehouse(name string) (*Warehouse, error) {
	if name == "" {
		return &c.Warehouses[0], nil
	}
	var names []string
	for i := range c.Warehouses {
		if c.Warehouses[i].Name == name {
			return &c.Warehouses[i], nil
		}
		names = append(names, c.Warehouses[i].Name)
	}
	return nil, fmt.Errorf("no warehouse %q; configured: %s", name, strings.Join(names, ", "))
}

// Person finds a person by id.
func (c *Config) Person(id string) (*Person, bool) {
	for i := range c.People {
		if c.People[i].ID == id {
			return &c.People[i], true
		}
	}
	return nil, false
}

// PersonForOSUser finds the person an OS login name is mapped to.
func (c *Config) PersonForOSUser(login string) (*Person, bool) {
	for i := range c.People {
		for _, u := range c.People[i].OSUsers {
			if u == login {
				return &c.People[i], true
			}
		}
	}
	return nil, false
}

// CurrentOSUser is the login name running this process. It is deliberately
// not overridable from the environment: for the terminal and elicitation
// channels the OS account is the evidence of who decided.
//
// The account is looked up by uid: user.Current falls back to $USER when
// the uid has no passwd entry, which would let anyone name themselves.
// With no entry the result is "", which no person is mapped to.
func CurrentOSUser() string {
	if u, err := user.LookupId(strconv.Itoa(os.Getuid())); err == nil {
		return u.Username
	}
	return ""
}
