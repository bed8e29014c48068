// Package snowflake is the Snowflake warehouse driver.
//
// Each session carries STATEMENT_TIMEOUT_IN_SECONDS, each statement a
// QUERY_TAG naming the agent and tool (so Snowflake's query history traces
// cost back to what ran it) and a context that cancels it. Only SELECT
// statements are sent.
//
// gosnowflake's "easy logging" looks for a client config file next to the
// executable and in the home directory, and such a file can send the
// driver's log to stdout, which is the MCP protocol stream. The driver
// never ships one, and pins a config that keeps logging off whenever one
// could be discovered.
package snowflake

import (
	"context"
	"crypto/rsa"
	"crypto/x509"
	"database/sql"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/snowflakedb/gosnowflake"

	"github.com/dataworkers/dw/internal/warehouse"
)

// Config configures one Snowflake warehouse. Secrets are never in the
// config: the *Env fields name environment variables that hold them.
type Config struct {
	// Name is the warehouse's name in dw.yaml.
	Name      string
	Account   string
	User      string
	Warehouse string
	Role      string
	// Database is whose INFORMATION_SCHEMA lists the tables.
	Database string
	Schema   string
	// PasswordEnv names the variable holding the user's password.
	PasswordEnv string
	// PrivateKeyEnv names the variable holding a PEM PKCS#8 RSA key for
	// key-pair authentication (preferred over a password).
	PrivateKeyEnv string
	// DSNEnv names a variable holding a whole gosnowflake DSN; when set it
	// replaces the connection fields above.
	DSNEnv string
	// Timeout is the session's STATEMENT_TIMEOUT_IN_SECONDS and the
	// default client-side deadline. Default 2 minutes.
	Timeout time.Duration
	// Host, Port and Protocol override the account's endpoint (private
	// link, proxies).
	Host     string
	Port     int
	Protocol string
}

var (
	envNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	// An account identifier is at most 255 characters, checked apart:
	// a counted repetition ({0,254}) compiles to 254 copies of its class,
	// and compiling that cost every process linking this package 4 ms
	// and 3,400 allocations at start (GODEBUG=inittrace=1).
	accountRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._\-]*$`)
)

// SetDefaults fills unset values.
func (c *Config) SetDefaults() {
	if c.Timeout == 0 {
		c.Timeout = 2 * time.Minute
	}
}

// Validate reports the first unusable setting.
func (c Config) Validate() error {
	if c.Name == "" {
		return errors.New("snowflake warehouse: name is required")
	}
	for field, v := range map[string]string{"password_env": c.PasswordEnv, "private_key_env": c.PrivateKeyEnv, "dsn_env": c.DSNEnv} {
		if v != "" && !envNameRE.MatchString(v) {
			return fmt.Errorf("snowflake warehouse %s: %s must name an environment variable, not hold a value", c.Name, field)
		}
	}
	if c.Timeout < time.Second {
		return fmt.Errorf("snowflake warehouse %s: timeout %s is under a second", c.Name, c.Timeout)
	}
	if c.DSNEnv != "" {
		return nil
	}
	switch {
	case len(c.Account) > 255 || !accountRE.MatchString(c.Account):
		return fmt.Errorf("snowflake warehouse %s: account %q is not an account identifier", c.Name, c.Account)
	case c.User == "":
		return fmt.Errorf("snowflake warehouse %s: user is required", c.Name)
	case c.Database == "":
		return fmt.Errorf("snowflake warehouse %s: database is required (its INFORMATION_SCHEMA lists the tables)", c.Name)
	case c.PasswordEnv == "" && c.PrivateKeyEnv == "":
		return fmt.Errorf("snowflake warehouse %s: set private_key_env or password_env", c.Name)
	}
	for _, id := range []string{c.Database, c.Schema, c.Warehouse, c.Role} {
		if id != "" {
			if err := warehouse.ValidIdentifier(id); err != nil {
				return fmt.Errorf("snowflake warehouse %s: %w", c.Name, err)
			}
		}
	}
	return nil
}

// Warehouse is an open Snowflake connection pool.
type Warehouse struct {
	cfg Config
	db  *sql.DB
}

// Open prepares a connection pool; the first statement logs in.
func Open(ctx context.Context, cfg Config) (*Warehouse, error) {
	cfg.SetDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	sf, err := driverConfig(cfg)
	if err != nil {
		return nil, err
	}
	if cfg.Database == "" {
		cfg.Database = sf.Database // from the DSN
	}
	quietDriverLog()
	db := sql.OpenDB(gosnowflake.NewConnector(gosnowflake.SnowflakeDriver{}, *sf))
	db.SetMaxOpenConns(4)
	db.SetConnMaxIdleTime(10 * time.Minute)
	return newWarehouse(cfg, db), nil
}

func newWarehouse(cfg Config, db *sql.DB) *Warehouse {
	return &Warehouse{cfg: cfg, db: db}
}

// driverConfig builds gosnowflake's config, reading secrets from the
// environment. Error messages name the variable, never its value.
func driverConfig(cfg Config) (*gosnowflake.Config, error) {
	var sf *gosnowflake.Config
	if cfg.DSNEnv != "" {
		dsn := os.Getenv(cfg.DSNEnv)
		if dsn == "" {
			return nil, fmt.Errorf("snowflake warehouse %s: environment variable %s is empty", cfg.Name, cfg.DSNEnv)
		}
		parsed, err := gosnowflake.ParseDSN(dsn)
		if err != nil {
			return nil, fmt.Errorf("snowflake warehouse %s: %s does not hold a valid Snowflake DSN", cfg.Name, cfg.DSNEnv)
		}
		sf = parsed
	} else {
		sf = &gosnowflake.Config{
			Account: cfg.Account, User: cfg.User, Warehouse: cfg.Warehouse, Role: cfg.Role,
			Database: cfg.Database, Schema: cfg.Schema, Host: cfg.Host, Port: cfg.Port, Protocol: cfg.Protocol,
		}
		switch {
		case cfg.PrivateKeyEnv != "":
			key, err := privateKey(os.Getenv(cfg.PrivateKeyEnv))
			if err != nil {
				return nil, fmt.Errorf("snowflake warehouse %s: %s: %w", cfg.Name, cfg.PrivateKeyEnv, err)
			}
			sf.Authenticator, sf.PrivateKey = gosnowflake.AuthTypeJwt, key
		default:
			sf.Password = os.Getenv(cfg.PasswordEnv)
			if sf.Password == "" {
				return nil, fmt.Errorf("snowflake warehouse %s: environment variable %s is empty", cfg.Name, cfg.PasswordEnv)
			}
		}
	}
	if sf.Params == nil {
		sf.Params = map[string]*string{}
	}
	timeout := strconv.Itoa(int(cfg.Timeout / time.Second))
	sf.Params["STATEMENT_TIMEOUT_IN_SECONDS"] = &timeout
	sf.Application = "DataWorkers"
	sf.DisableTelemetry = true
	file, err := clientConfigFile()
	if err != nil {
		return nil, fmt.Errorf("snowflake warehouse %s: %w", cfg.Name, err)
	}
	sf.ClientConfigFile = file
	return sf, nil
}

func privateKey(pemText string) (*rsa.PrivateKey, error) {
	block, _ := pem.Decode([]byte(pemText))
	if block == nil {
		return nil, errors.New("no PEM private key in the variable")
	}
	key, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, errors.New("the PEM block is not a PKCS#8 private key")
	}
	rsaKey, ok := key.(*rsa.PrivateKey)
	if !ok {
		return nil, errors.New("the private key is not an RSA key, which Snowflake key-pair authentication needs")
	}
	return rsaKey, nil
}

var quietOnce sync.Once

// quietDriverLog sends gosnowflake's own log to stderr, errors only.
func quietDriverLog() {
	quietOnce.Do(func() {
		l := gosnowflake.GetLogger()
		l.SetOutput(os.Stderr)
		_ = l.SetLogLevel("error")
	})
}

// clientConfigFile returns "" when gosnowflake would find no easy-logging
// config (so none is used), else the path of a private config that keeps
// logging off, which takes precedence over any discovered one.
func clientConfigFile() (string, error) {
	if !easyLoggingConfigPresent() {
		return "", nil
	}
	dir := filepath.Join(os.TempDir(), fmt.Sprintf("dw-snowflake-%d", os.Getuid()))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("create private driver config directory: %w", err)
	}
	doc, _ := json.Marshal(map[string]any{"common": map[string]string{"log_level": "OFF", "log_path": dir}})
	path := filepath.Join(dir, "sf_client_config.json")
	if err := os.WriteFile(path, doc, 0o600); err != nil {
		return "", fmt.Errorf("write private driver config: %w", err)
	}
	return path, nil
}

// easyLoggingConfigPresent mirrors gosnowflake's search: the
// SF_CLIENT_CONFIG_FILE variable, then sf_client_config.json beside the
// executable and in the home directory.
func easyLoggingConfigPresent() bool {
	if os.Getenv("SF_CLIENT_CONFIG_FILE") != "" {
		return true
	}
	var dirs []string
	if exe, err := os.Executable(); err == nil {
		dirs = append(dirs, filepath.Dir(exe))
	}
	if home, err := os.UserHomeDir(); err == nil {
		dirs = append(dirs, home)
	}
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "sf_client_config.json")); err == nil {
			return true
		}
	}
	return false
}

// Name is the configured name.
func (w *Warehouse) Name() string { return w.cfg.Name }

// Dialect is Snowflake's.
func (w *Warehouse) Dialect() warehouse.Dialect { return warehouse.Snowflake{} }

// Close closes the pool.
func (w *Warehouse) Close() error { return w.db.Close() }

// QueryTag is the QUERY_TAG a statement carries: a small JSON object, the
// form query-history dashboards parse.
func QueryTag(agent, tool string) string {
	clip := func(s string) string {
		if len(s) > 200 {
			return s[:200]
		}
		return s
	}
	b, _ := json.Marshal(struct {
		Agent string `json:"agent"`
		Tool  string `json:"tool"`
	}{clip(agent), clip(tool)})
	return string(b)
}

// Query runs one SELECT with the query tag and a deadline; cancelling ctx
// cancels the statement in Snowflake.
func (w *Warehouse) Query(ctx context.Context, q warehouse.Query) (*warehouse.Result, error) {
	if err := warehouse.ReadOnlyStatement(q.SQL); err != nil {
		return nil, err
	}
	timeout := w.cfg.Timeout
	if q.Timeout > 0 {
		timeout = q.Timeout
	}
	caller := ctx
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	ctx = gosnowflake.WithQueryTag(oneStatement(ctx), QueryTag(q.Agent, q.Tool))
	rows, err := w.db.QueryContext(ctx, q.SQL, q.Args...)
	if err != nil {
		// The caller gave up (its deadline, a cancel): say so, as the
		// other drivers do, rather than blame the statement timeout.
		if cerr := caller.Err(); cerr != nil {
			return nil, fmt.Errorf("query on %s: %w", w.cfg.Name, cerr)
		}
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return nil, fmt.Errorf("query on %s timed out after %s and was cancelled", w.cfg.Name, timeout)
		}
		return nil, fmt.Errorf("query on %s: %w", w.cfg.Name, err)
	}
	defer rows.Close()
	res, err := warehouse.ScanRows(rows)
	if err != nil {
		return nil, fmt.Errorf("query on %s: %w", w.cfg.Name, err)
	}
	return res, nil
}

// oneStatement pins MULTI_STATEMENT_COUNT to 1 on the statement itself, so
// Snowflake refuses a second statement whatever a DSN or the account's
// session defaults say.
func oneStatement(ctx context.Context) context.Context {
	ctx, _ = gosnowflake.WithMultiStatement(ctx, 1)
	return ctx
}

// ValidateQuery has Snowflake compile sqlText without running it.
// gosnowflake does not hand back the statement type Snowflake reports, so
// the engine's judgement is made structural: the text is compiled
// (describe only: parsed and planned, never executed; one statement) as
// the body of a subquery, which Snowflake's grammar accepts only for a
// query, never for DML, DDL, CALL, SHOW, PUT/GET or a second statement.
// A parse-level check comes first; it also keeps PUT and GET, which
// gosnowflake would carry out on local files, from reaching the driver.
func (w *Warehouse) ValidateQuery(ctx context.Context, sqlText string) error {
	if err := warehouse.ReadOnlyStatement(sqlText); err != nil {
		return err
	}
	body := strings.TrimSuffix(strings.TrimSpace(sqlText), ";")
	ctx, cancel := context.WithTimeout(ctx, w.cfg.Timeout)
	defer cancel()
	ctx = gosnowflake.WithDescribeOnly(gosnowflake.WithQueryTag(oneStatement(ctx), QueryTag("dw", "validate")))
	rows, err := w.db.QueryContext(ctx, "SELECT * FROM (\n"+body+"\n) AS dw_validated")
	if err != nil {
		var se *gosnowflake.SnowflakeError
		if errors.As(err, &se) && strings.HasPrefix(se.SQLState, "42") {
			return warehouse.Refused("Snowflake refused the statement as a single query: %s", se.Message)
		}
		return fmt.Errorf("validate the statement on %s: %w", w.cfg.Name, err)
	}
	return rows.Close()
}

func (w *Warehouse) database(t warehouse.TableRef) string {
	if t.Database != "" {
		return t.Database
	}
	return w.cfg.Database
}

// ListTables lists the database's tables and views from its
// INFORMATION_SCHEMA.
func (w *Warehouse) ListTables(ctx context.Context) ([]warehouse.TableRef, error) {
	db := w.database(warehouse.TableRef{})
	if db == "" {
		return nil, fmt.Errorf("snowflake warehouse %s has no database to list tables of", w.cfg.Name)
	}
	res, err := w.Query(ctx, warehouse.Query{
		SQL: "SELECT table_catalog, table_schema, table_name FROM " + warehouse.Snowflake{}.QuoteIdent(db) +
			".INFORMATION_SCHEMA.TABLES WHERE table_schema <> 'INFORMATION_SCHEMA' ORDER BY table_schema, table_name",
		Agent: "dw", Tool: "catalog",
	})
	if err != nil {
		return nil, fmt.Errorf("list tables of %s: %w", w.cfg.Name, err)
	}
	out := make([]warehouse.TableRef, 0, len(res.Rows))
	for _, r := range res.Rows {
		if len(r) != 3 {
			return nil, fmt.Errorf("list tables of %s: unexpected row %v", w.cfg.Name, r)
		}
		out = append(out, warehouse.TableRef{Database: text(r[0]), Schema: text(r[1]), Name: text(r[2])})
	}
	return out, nil
}

// Describe reads a table's columns from INFORMATION_SCHEMA.COLUMNS, in
// their catalog spelling (upper case for names created unquoted).
func (w *Warehouse) Describe(ctx context.Context, t warehouse.TableRef) (*warehouse.Table, error) {
	db := w.database(t)
	if err := warehouse.ValidIdentifier(db); err != nil {
		return nil, err
	}
	t.Database = db
	res, err := w.Query(ctx, warehouse.Query{
		SQL: "SELECT column_name, data_type, is_nullable = 'YES', ordinal_position FROM " + warehouse.Snowflake{}.QuoteIdent(db) +
			".INFORMATION_SCHEMA.COLUMNS WHERE table_schema = ? AND table_name = ? ORDER BY ordinal_position",
		Args:  []any{t.Schema, t.Name},
		Agent: "dw", Tool: "catalog",
	})
	if err != nil {
		return nil, fmt.Errorf("describe %s: %w", t, err)
	}
	tab := &warehouse.Table{Ref: t}
	for _, r := range res.Rows {
		if len(r) != 4 {
			return nil, fmt.Errorf("describe %s: unexpected row %v", t, r)
		}
		pos, _ := strconv.Atoi(text(r[3]))
		tab.Columns = append(tab.Columns, warehouse.Column{Name: text(r[0]), Type: text(r[1]), Nullable: truthy(r[2]), Position: pos})
	}
	if len(tab.Columns) == 0 {
		return nil, fmt.Errorf("table %s not found in warehouse %s", t, w.cfg.Name)
	}
	return tab, nil
}

func text(v any) string {
	switch t := v.(type) {
	case string:
		return t
	case []byte:
		return string(t)
	}
	return fmt.Sprint(v)
}

func truthy(v any) bool {
	switch t := v.(type) {
	case bool:
		return t
	case string:
		return strings.EqualFold(t, "true") || t == "1"
	}
	return false
}
