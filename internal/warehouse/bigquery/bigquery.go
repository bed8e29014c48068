// Package bigquery is the BigQuery warehouse driver.
//
// BigQuery bills by bytes scanned, so every statement is dry-run first: the
// estimate is checked against a per-query and a per-session scan budget and
// the statement is refused, with the numbers, before it can cost anything.
// The real job then carries maximumBytesBilled, so BigQuery itself stops a
// query whose estimate was wrong, and labels naming the agent and tool, so
// the bill traces back to what ran it. Only SELECT statements are sent.
package bigquery

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"os"
	"regexp"
	"strings"
	"sync"
	"time"

	"cloud.google.com/go/bigquery"
	"cloud.google.com/go/civil"
	"google.golang.org/api/googleapi"
	"google.golang.org/api/iterator"
	"google.golang.org/api/option"

	"github.com/dataworkers/dw/internal/warehouse"
)

// Config configures one BigQuery warehouse. Credentials are never in the
// config: CredentialsEnv names the environment variable that holds them.
type Config struct {
	// Name is the warehouse's name in dw.yaml.
	Name string
	// Project is the project jobs run (and are billed) in, and whose
	// tables are listed.
	Project string
	// Location is where jobs run, e.g. US or europe-west1. Listing tables
	// without a Dataset reads the region's catalog, so it needs Location.
	Location string
	// Dataset limits the catalog to one dataset; empty lists every
	// dataset of Project in Location.
	Dataset string
	// CredentialsEnv names an environment variable holding a service
	// account (or other Google credential) JSON document, or the path to
	// one. Empty uses Application Default Credentials.
	CredentialsEnv string
	// MaxBytesPerQuery refuses any statement whose dry run estimates more;
	// it is also the job's maximumBytesBilled. Default 10 GiB.
	MaxBytesPerQuery int64
	// MaxBytesPerSession refuses statements once this Warehouse has
	// scanned this much in all. Default 100 GiB.
	MaxBytesPerSession int64
	// Timeout is the default statement timeout. Default 2 minutes.
	Timeout time.Duration
	// CatalogTTL is how long table lists and descriptions are reused:
	// catalog reads are billed queries too. Default 5 minutes.
	CatalogTTL time.Duration
}

// SetDefaults fills unset limits.
func (c *Config) SetDefaults() {
	if c.MaxBytesPerQuery == 0 {
		c.MaxBytesPerQuery = 10 << 30
	}
	if c.MaxBytesPerSession == 0 {
		c.MaxBytesPerSession = 100 << 30
	}
	if c.Timeout == 0 {
		c.Timeout = 2 * time.Minute
	}
	if c.CatalogTTL == 0 {
		c.CatalogTTL = 5 * time.Minute
	}
}

// The lengths are checked apart from the patterns: a counted repetition
// ({0,127}) compiles to as many copies of its class, which cost every
// process linking this package about a millisecond and 2,000 allocations
// at start (GODEBUG=inittrace=1).
var (
	projectRE  = regexp.MustCompile(`^[a-z][a-z0-9.:\-]*$`)
	locationRE = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9\-]*$`)
	envNameRE  = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
)

// validProject reports whether s is a project id: at most 128 characters.
func validProject(s string) bool { return len(s) <= 128 && projectRE.MatchString(s) }

// validLocation reports whether s is a location: at most 64 characters.
func validLocation(s string) bool { return len(s) <= 64 && locationRE.MatchString(s) }

// Validate reports the first unusable setting.
func (c Config) Validate() error {
	switch {
	case c.Name == "":
		return errors.New("bigquery warehouse: name is required")
	case !validProject(c.Project):
		return fmt.Errorf("bigquery warehouse %s: project %q is not a project id", c.Name, c.Project)
	case c.Location != "" && !validLocation(c.Location):
		return fmt.Errorf("bigquery warehouse %s: location %q is not a location such as US or europe-west1", c.Name, c.Location)
	case c.Dataset == "" && c.Location == "":
		return fmt.Errorf("bigquery warehouse %s: set dataset, or location to list every dataset in a region", c.Name)
	case c.CredentialsEnv != "" && !envNameRE.MatchString(c.CredentialsEnv):
		return fmt.Errorf("bigquery warehouse %s: credentials_env must name an environment variable, not hold a value", c.Name)
	case c.MaxBytesPerQuery < 0 || c.MaxBytesPerSession < 0:
		return fmt.Errorf("bigquery warehouse %s: scan budgets cannot be negative", c.Name)
	case c.MaxBytesPerSession > 0 && c.MaxBytesPerQuery > c.MaxBytesPerSession:
		return fmt.Errorf("bigquery warehouse %s: the per-query budget is larger than the per-session budget", c.Name)
	}
	if c.Dataset != "" {
		if err := warehouse.ValidIdentifier(c.Dataset); err != nil {
			return fmt.Errorf("bigquery warehouse %s: dataset: %w", c.Name, err)
		}
	}
	return nil
}

// Warehouse is an open BigQuery connection with its scan budget.
type Warehouse struct {
	cfg    Config
	client *bigquery.Client

	mu      sync.Mutex
	scanned int64 // bytes this instance has scanned or reserved

	catalogMu sync.Mutex
	tables    cached[[]warehouse.TableRef]
	described map[warehouse.TableRef]cached[*warehouse.Table]
}

type cached[T any] struct {
	v  T
	at time.Time
}

// Open connects to BigQuery. Extra client options are for tests and
// emulators (option.WithEndpoint, option.WithoutAuthentication).
func Open(ctx context.Context, cfg Config, opts ...option.ClientOption) (*Warehouse, error) {
	cfg.SetDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.CredentialsEnv != "" {
		opt, err := credentials(cfg)
		if err != nil {
			return nil, err
		}
		opts = append([]option.ClientOption{opt}, opts...)
	}
	client, err := bigquery.NewClient(ctx, cfg.Project, opts...)
	if err != nil {
		return nil, fmt.Errorf("bigquery warehouse %s: %w", cfg.Name, err)
	}
	client.Location = cfg.Location
	return &Warehouse{cfg: cfg, client: client, described: map[warehouse.TableRef]cached[*warehouse.Table]{}}, nil
}

// credentials reads the JSON (or the file it names) from the configured
// environment variable and checks its type before handing it to the
// client. Neither the value nor the path is ever logged.
func credentials(cfg Config) (option.ClientOption, error) {
	val := strings.TrimSpace(os.Getenv(cfg.CredentialsEnv))
	if val == "" {
		return nil, fmt.Errorf("bigquery warehouse %s: environment variable %s is empty; set it to a credentials JSON document or its path", cfg.Name, cfg.CredentialsEnv)
	}
	doc := []byte(val)
	if !strings.HasPrefix(val, "{") {
		b, err := os.ReadFile(val)
		if err != nil {
			return nil, fmt.Errorf("bigquery warehouse %s: cannot read the credentials file named by %s", cfg.Name, cfg.CredentialsEnv)
		}
		doc = b
	}
	var head struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(doc, &head); err != nil {
		return nil, fmt.Errorf("bigquery warehouse %s: the credentials in %s are not JSON", cfg.Name, cfg.CredentialsEnv)
	}
	types := map[string]option.CredentialsType{
		"service_account":              option.ServiceAccount,
		"authorized_user":              option.AuthorizedUser,
		"impersonated_service_account": option.ImpersonatedServiceAccount,
		"external_account":             option.ExternalAccount,
	}
	t, ok := types[head.Type]
	if !ok {
		return nil, fmt.Errorf("bigquery warehouse %s: credentials in %s have type %q; use a service_account, authorized_user, impersonated_service_account or external_account credential", cfg.Name, cfg.CredentialsEnv, head.Type)
	}
	return option.WithAuthCredentialsJSON(t, doc), nil
}

// Name is the configured name.
func (w *Warehouse) Name() string { return w.cfg.Name }

// Dialect is BigQuery's.
func (w *Warehouse) Dialect() warehouse.Dialect { return warehouse.BigQuery{} }

// Close releases the client.
func (w *Warehouse) Close() error { return w.client.Close() }

// Scanned is how many bytes this Warehouse has scanned (or reserved for
// statements in flight) against its session budget.
func (w *Warehouse) Scanned() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.scanned
}

// ResumeSession carries an agent's session over to this Warehouse when
// the warehouse process serving the agent was restarted (it is ended when
// a call is cancelled): the bytes earlier processes scanned, plus the
// statements that were in flight when one was ended, booked at their
// dry-run estimate (free), as a cancelled statement's reservation stays
// booked in-process. The session budget thus never resets.
func (w *Warehouse) ResumeSession(ctx context.Context, scanned int64, inFlight []warehouse.Query) error {
	for _, q := range inFlight {
		est, err := w.estimate(ctx, q)
		if err != nil {
			if ctx.Err() != nil {
				return err
			}
			continue // a statement that does not dry-run never reserved anything
		}
		scanned += est
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.scanned = max(w.scanned, scanned)
	return nil
}

// BudgetError is a statement refused before it ran because its dry-run
// estimate would pass a scan budget. It is warehouse.BudgetError, so the
// same type reaches an agent through the warehouse process.
type BudgetError = warehouse.BudgetError

// Query dry-runs the statement, refuses it when over budget, then runs it
// with maximumBytesBilled and labels, and reads every row.
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
	est, err := w.estimate(ctx, q)
	if err != nil {
		return nil, err
	}
	limit, err := w.reserve(est)
	if err != nil {
		return nil, err
	}
	res, billed, err := w.run(ctx, q, limit, timeout)
	w.settle(est, billed)
	// Only our own timeout is reported as one; a caller that gave up gets
	// its context's error back.
	if errors.Is(err, context.DeadlineExceeded) && caller.Err() == nil {
		return nil, fmt.Errorf("query on %s timed out after %s and was cancelled", w.cfg.Name, timeout)
	}
	return res, err
}

// Preflight dry-runs every statement of a split plan and refuses them all
// when together they pass a budget, so no plan runs halfway.
func (w *Warehouse) Preflight(ctx context.Context, qs []warehouse.Query) error {
	var total int64
	for _, q := range qs {
		if err := warehouse.ReadOnlyStatement(q.SQL); err != nil {
			return err
		}
		est, err := w.estimate(ctx, q)
		if err != nil {
			return err
		}
		if est > w.cfg.MaxBytesPerQuery {
			return &BudgetError{Warehouse: w.cfg.Name, Estimate: est, Budget: w.cfg.MaxBytesPerQuery}
		}
		total += est
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.cfg.MaxBytesPerSession > 0 && w.scanned+total > w.cfg.MaxBytesPerSession {
		return &BudgetError{Warehouse: w.cfg.Name, Estimate: total, Budget: w.cfg.MaxBytesPerSession, Used: w.scanned, Session: true}
	}
	return nil
}

func (w *Warehouse) newQuery(q warehouse.Query) *bigquery.Query {
	bq := w.client.Query(q.SQL)
	bq.Location = w.cfg.Location
	bq.Labels = Labels(q.Agent, q.Tool)
	for _, a := range q.Args {
		bq.Parameters = append(bq.Parameters, bigquery.QueryParameter{Value: a})
	}
	return bq
}

// estimate is the dry run: BigQuery parses and plans the statement, says
// what kind it is and how many bytes it would process, at no cost. Only a
// SELECT goes further: a script (several statements), DML, DDL, EXPORT
// DATA or LOAD DATA is refused here, by BigQuery's own reading of it.
func (w *Warehouse) estimate(ctx context.Context, q warehouse.Query) (int64, error) {
	bq := w.newQuery(q)
	bq.DryRun = true
	job, err := bq.Run(ctx)
	if err != nil {
		return 0, dryRunError(w.cfg.Name, err)
	}
	st := job.LastStatus()
	if st == nil || st.Statistics == nil {
		return 0, fmt.Errorf("dry run on %s returned no estimate; refusing to run a statement of unknown cost", w.cfg.Name)
	}
	if err := st.Err(); err != nil {
		return 0, dryRunError(w.cfg.Name, err)
	}
	qs, _ := st.Statistics.Details.(*bigquery.QueryStatistics)
	if qs == nil || qs.StatementType == "" {
		return 0, warehouse.Refused("dry run on %s did not say what kind of statement this is; only a single SELECT is accepted", w.cfg.Name)
	}
	if qs.StatementType != "SELECT" {
		what := qs.StatementType
		if what == "SCRIPT" {
			what = "SCRIPT, several statements"
		}
		return 0, warehouse.Refused("only a single SELECT is accepted; BigQuery's dry run on %s reads this as statement type %s", w.cfg.Name, what)
	}
	return st.Statistics.TotalBytesProcessed, nil
}

// dryRunError marks BigQuery's "invalid query" answers as refusals: the
// statement's author must change it. Other failures (auth, network,
// quota) stay plain errors.
func dryRunError(name string, err error) error {
	var ge *googleapi.Error
	if errors.As(err, &ge) && ge.Code == 400 {
		return warehouse.Refused("BigQuery's dry run on %s refused the statement: %s", name, ge.Message)
	}
	return fmt.Errorf("dry run on %s: %w", name, err)
}

// ValidateQuery dry-runs sqlText (free, nothing runs) and accepts it only
// when BigQuery reports statement type SELECT.
func (w *Warehouse) ValidateQuery(ctx context.Context, sqlText string) error {
	if err := warehouse.ReadOnlyStatement(sqlText); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, w.cfg.Timeout)
	defer cancel()
	_, err := w.estimate(ctx, warehouse.Query{SQL: sqlText, Agent: "dw", Tool: "validate"})
	return err
}

// reserve checks the budgets and books the estimate against the session,
// returning the maximumBytesBilled for the job.
func (w *Warehouse) reserve(est int64) (int64, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if est > w.cfg.MaxBytesPerQuery {
		return 0, &BudgetError{Warehouse: w.cfg.Name, Estimate: est, Budget: w.cfg.MaxBytesPerQuery}
	}
	limit := w.cfg.MaxBytesPerQuery
	if w.cfg.MaxBytesPerSession > 0 {
		left := w.cfg.MaxBytesPerSession - w.scanned
		if est > left {
			return 0, &BudgetError{Warehouse: w.cfg.Name, Estimate: est, Budget: w.cfg.MaxBytesPerSession, Used: w.scanned, Session: true}
		}
		limit = min(limit, left)
	}
	w.scanned += est
	return limit, nil
}

// settle replaces a statement's reserved estimate by what it was billed,
// when BigQuery reported it.
func (w *Warehouse) settle(est, billed int64) {
	if billed < 0 {
		return
	}
	w.mu.Lock()
	w.scanned += billed - est
	w.mu.Unlock()
}

// run executes the job. billed is -1 when the job's statistics could not
// be read.
func (w *Warehouse) run(ctx context.Context, q warehouse.Query, limit int64, timeout time.Duration) (*warehouse.Result, int64, error) {
	bq := w.newQuery(q)
	bq.MaxBytesBilled = limit
	bq.JobTimeout = timeout
	job, err := bq.Run(ctx)
	if err != nil {
		return nil, -1, fmt.Errorf("query on %s: %w", w.cfg.Name, err)
	}
	res, err := read(ctx, job)
	if err != nil {
		if ctx.Err() != nil {
			// The job keeps running (and billing) server-side unless told.
			cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			_ = job.Cancel(cctx)
			cancel()
			return nil, -1, ctx.Err()
		}
		return nil, -1, fmt.Errorf("query on %s: %w", w.cfg.Name, err)
	}
	billed := int64(-1)
	if st, err := job.Status(ctx); err == nil && st.Statistics != nil {
		res.BytesScanned = st.Statistics.TotalBytesProcessed
		if qs, ok := st.Statistics.Details.(*bigquery.QueryStatistics); ok {
			billed = qs.TotalBytesBilled
		}
	}
	return res, billed, nil
}

func read(ctx context.Context, job *bigquery.Job) (*warehouse.Result, error) {
	it, err := job.Read(ctx)
	if err != nil {
		return nil, err
	}
	res := &warehouse.Result{}
	for {
		var row []bigquery.Value
		err := it.Next(&row)
		if errors.Is(err, iterator.Done) {
			break
		}
		if err != nil {
			return nil, err
		}
		vals := make([]any, len(row))
		for i, v := range row {
			vals[i] = normalize(v)
		}
		res.Rows = append(res.Rows, vals)
	}
	for _, f := range it.Schema {
		res.Columns = append(res.Columns, f.Name)
	}
	return res, nil
}

// normalize turns BigQuery's civil date and time types into time.Time (in
// UTC, as BigQuery has no zone for them) and NUMERIC into float64, so
// callers handle one set of types for every engine.
func normalize(v bigquery.Value) any {
	switch t := v.(type) {
	case civil.Date:
		return time.Date(t.Year, t.Month, t.Day, 0, 0, 0, 0, time.UTC)
	case civil.DateTime:
		return time.Date(t.Date.Year, t.Date.Month, t.Date.Day, t.Time.Hour, t.Time.Minute, t.Time.Second, t.Time.Nanosecond, time.UTC)
	case civil.Time:
		return t.String()
	case *big.Rat:
		f, _ := t.Float64()
		return f
	}
	return v
}

// Labels are the job labels naming the agent and tool, reduced to what
// BigQuery accepts: lower-case letters, digits, _ and -, at most 63.
func Labels(agent, tool string) map[string]string {
	out := map[string]string{}
	if v := labelValue(agent); v != "" {
		out["dw_agent"] = v
	}
	if v := labelValue(tool); v != "" {
		out["dw_tool"] = v
	}
	return out
}

func labelValue(s string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		if b.Len() >= 63 {
			break
		}
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_' || r == '-' {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	return b.String()
}

// ListTables lists the tables and views of the dataset, or of every
// dataset in the location, from INFORMATION_SCHEMA.TABLES.
func (w *Warehouse) ListTables(ctx context.Context) ([]warehouse.TableRef, error) {
	w.catalogMu.Lock()
	if c := w.tables; c.v != nil && time.Since(c.at) < w.cfg.CatalogTTL {
		w.catalogMu.Unlock()
		return c.v, nil
	}
	w.catalogMu.Unlock()
	d := warehouse.BigQuery{}
	scope := d.QuoteIdent(w.cfg.Project) + "." + d.QuoteIdent(w.cfg.Dataset)
	if w.cfg.Dataset == "" {
		scope = d.QuoteIdent(w.cfg.Project) + "." + d.QuoteIdent("region-"+strings.ToLower(w.cfg.Location))
	}
	res, err := w.Query(ctx, warehouse.Query{
		SQL:   "SELECT table_catalog, table_schema, table_name FROM " + scope + ".INFORMATION_SCHEMA.TABLES ORDER BY table_schema, table_name",
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
		out = append(out, warehouse.TableRef{Database: str(r[0]), Schema: str(r[1]), Name: str(r[2])})
	}
	w.catalogMu.Lock()
	w.tables = cached[[]warehouse.TableRef]{out, time.Now()}
	w.catalogMu.Unlock()
	return out, nil
}

// Describe reads a table's columns from its dataset's
// INFORMATION_SCHEMA.COLUMNS.
func (w *Warehouse) Describe(ctx context.Context, t warehouse.TableRef) (*warehouse.Table, error) {
	if t.Database == "" {
		t.Database = w.cfg.Project
	}
	for _, part := range []string{t.Schema, t.Name} {
		if err := warehouse.ValidIdentifier(part); err != nil {
			return nil, err
		}
	}
	if !validProject(t.Database) {
		return nil, fmt.Errorf("%q is not a project id", t.Database)
	}
	w.catalogMu.Lock()
	if c, ok := w.described[t]; ok && time.Since(c.at) < w.cfg.CatalogTTL {
		w.catalogMu.Unlock()
		return c.v, nil
	}
	w.catalogMu.Unlock()
	d := warehouse.BigQuery{}
	res, err := w.Query(ctx, warehouse.Query{
		SQL: "SELECT column_name, data_type, is_nullable = 'YES', ordinal_position FROM " +
			d.QuoteIdent(t.Database) + "." + d.QuoteIdent(t.Schema) + ".INFORMATION_SCHEMA.COLUMNS WHERE table_name = ? ORDER BY ordinal_position",
		Args:  []any{t.Name},
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
		pos, _ := r[3].(int64)
		nullable, _ := r[2].(bool)
		tab.Columns = append(tab.Columns, warehouse.Column{Name: str(r[0]), Type: str(r[1]), Nullable: nullable, Position: int(pos)})
	}
	if len(tab.Columns) == 0 {
		return nil, fmt.Errorf("table %s not found in warehouse %s", t, w.cfg.Name)
	}
	w.catalogMu.Lock()
	w.described[t] = cached[*warehouse.Table]{tab, time.Now()}
	w.catalogMu.Unlock()
	return tab, nil
}

func str(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	return fmt.Sprint(v)
}
