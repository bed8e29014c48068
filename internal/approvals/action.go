package approvals

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"
)

// The systems an approved action runs on. Each is carried out by one tool:
// the four run triggers, register_stream_schema, emit_lineage_event.
const (
	SystemAirflow        = "airflow"
	SystemDagster        = "dagster"
	SystemDBTCloud       = "dbt_cloud"
	SystemStepFunctions  = "step_functions"
	SystemSchemaRegistry = "schema_registry"
	SystemOpenLineage    = "openlineage"
)

// ActionSystems lists the systems, for validation messages.
var ActionSystems = []string{SystemAirflow, SystemDagster, SystemDBTCloud, SystemStepFunctions, SystemSchemaRegistry, SystemOpenLineage}

// runSystems are the orchestrators; a rerun, backfill or replay runs on one.
var runSystems = []string{SystemAirflow, SystemDagster, SystemDBTCloud, SystemStepFunctions}

// MaxActionParams bounds an action's canonical parameters: the approver
// must be able to read every one of them in the request (a Slack section
// holds 3,000 characters).
const MaxActionParams = 2500

// ActionLocation says where a target lives, so an approval for a job of
// one name never runs a job of that name somewhere else. Only the fields
// the system has are set.
type ActionLocation struct {
	Instance     string `json:"instance,omitempty" jsonschema:"the system's address as dw.yaml names it: the Airflow, Dagster or dbt Cloud URL, the Schema Registry URL, the OpenLineage URL, the Step Functions endpoint"`
	CodeLocation string `json:"code_location,omitempty" jsonschema:"Dagster: the code location (repository location) holding the job"`
	Repository   string `json:"repository,omitempty" jsonschema:"Dagster: the repository within the code location"`
	Account      string `json:"account,omitempty" jsonschema:"dbt Cloud account id; AWS account of a state machine"`
	Project      string `json:"project,omitempty" jsonschema:"dbt Cloud project id, when known"`
	Region       string `json:"region,omitempty" jsonschema:"AWS region of a state machine"`
}

// ActionSpec is exactly what an approval allows: one target on one system
// at one location, with every parameter that will be sent, in one domain.
// The person deciding sees every field; dispatch compares the action it
// is asked to run with it field by field and refuses any difference.
type ActionSpec struct {
	System   string         `json:"system" jsonschema:"airflow, dagster, dbt_cloud, step_functions, schema_registry or openlineage"`
	Target   string         `json:"target" jsonschema:"the DAG id, Dagster job name, dbt Cloud job id, state machine ARN, registry subject or lineage job (namespace/name)"`
	Asset    string         `json:"asset" jsonschema:"the target's asset id in the context graph; one of the proposal's targets"`
	Location ActionLocation `json:"location" jsonschema:"where the target lives"`
	// Params are the parameters sent with the action, as canonical JSON
	// values (a schema or a lineage event is bound by its hash).
	Params       map[string]any `json:"params" jsonschema:"every parameter the action sends (Airflow conf, Dagster run_config and tags, dbt Cloud overrides, Step Functions input; a schema's and an event's SHA-256)"`
	ParamsSHA256 string         `json:"params_sha256" jsonschema:"SHA-256 of the canonical JSON of params"`
	Domain       string         `json:"domain" jsonschema:"the domain the target belongs to (set from the config, never by the caller)"`
}

// NewActionSpec builds a spec with canonical params and their hash. The
// domain is left empty: Propose sets it, and dispatch resolves the
// requested target's domain from the config itself.
func NewActionSpec(system, target, asset string, loc ActionLocation, params map[string]any) (*ActionSpec, error) {
	canon, text, err := canonicalParams(params)
	if err != nil {
		return nil, err
	}
	a := &ActionSpec{System: strings.TrimSpace(system), Target: strings.TrimSpace(target), Asset: strings.TrimSpace(asset),
		Location: loc, Params: canon, ParamsSHA256: sha(text)}
	return a, a.check()
}

// SchemaVersionAction is the action of registering a schema: the subject
// at the registry, bound to the schema's canonical SHA-256 and type.
func SchemaVersionAction(registryURL, subject, schemaType, schemaSHA256 string) (*ActionSpec, error) {
	subject = strings.TrimSpace(subject)
	return NewActionSpec(SystemSchemaRegistry, subject, "schema://"+subject, ActionLocation{Instance: NormalizeURL(registryURL)},
		map[string]any{"schema_sha256": strings.ToLower(strings.TrimSpace(schemaSHA256)), "schema_type": strings.TrimSpace(schemaType)})
}

// LineageEventAction is the action of posting one OpenLineage run event to
// the configured endpoint: the event's job, at that endpoint, bound to the
// event's canonical SHA-256. Its params also carry what the approver needs
// to judge the post (where it goes, the event type and time, the run, the
// datasets it names), all derived from the event, so the proposal and the
// forwarding tool build the same action from the same event.
func LineageEventAction(endpointURL string, event map[string]any) (*ActionSpec, error) {
	sum, err := CanonicalSHA256(event)
	if err != nil {
		return nil, invalid("the lineage event %v", err)
	}
	str := func(m map[string]any, k string) string { v, _ := m[k].(string); return strings.TrimSpace(v) }
	job, _ := event["job"].(map[string]any)
	run, _ := event["run"].(map[string]any)
	ns, name := str(job, "namespace"), str(job, "name")
	if ns == "" || name == "" {
		return nil, invalid("the lineage event names no job: job.namespace and job.name are required")
	}
	target := ns + "/" + name
	params := map[string]any{
		"event_sha256": sum, "event_type": str(event, "eventType"), "event_time": str(event, "eventTime"),
		"run_id": str(run, "runId"), "posts_to": NormalizeURL(endpointURL) + "/api/v1/lineage",
	}
	all := lineageDatasets(event)
	for side, list := range map[string][]string{"inputs": all.Inputs, "outputs": all.Outputs} {
		names := []any{}
		for _, n := range list[:min(len(list), lineageDatasetsShown)] {
			names = append(names, n)
		}
		params[side] = names
		params[side+"_count"] = len(list)
	}
	// The digest of every dataset, so a request that lists only some still
	// shows what binds the rest (datasets.go).
	params["datasets_sha256"] = all.SHA256
	return NewActionSpec(SystemOpenLineage, target, "openlineage://"+target, ActionLocation{Instance: NormalizeURL(endpointURL)}, params)
}

// lineageDatasetsShown bounds the inputs and outputs a lineage_event
// action lists (the counts are whole, datasets_sha256 binds every one,
// and every rendering says where to read them all: datasets.go), so the
// request stays readable and within MaxActionParams.
const lineageDatasetsShown = 8

// NormalizeURL is the spelling of a configured URL an action binds:
// trimmed, without a trailing slash.
func NormalizeURL(u string) string { return strings.TrimRight(strings.TrimSpace(u), "/") }

func (a *ActionSpec) check() error {
	if !slices.Contains(ActionSystems, a.System) {
		return invalid("action system %q is not one Data Workers dispatches to; valid: %s", a.System, strings.Join(ActionSystems, ", "))
	}
	if a.Target == "" {
		return invalid("action target is empty: name the %s", a.noun())
	}
	if a.Asset == "" {
		return invalid("action asset is empty: the target's asset id must be one of the proposal's targets")
	}
	for _, f := range a.Fields() {
		if strings.ContainsRune(f.Value, 0) {
			return invalid("action %s contains a NUL character", f.Name)
		}
	}
	return nil
}

// Hash is the SHA-256 of the whole spec's canonical JSON: two specs with
// the same hash allow the same action.
func (a *ActionSpec) Hash() string {
	raw, _ := json.Marshal(a)
	_, text, _ := canonicalValue(raw)
	return sha(text)
}

// ActionField is one bound field as people read it.
type ActionField struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// Fields lists every bound field in a fixed order, named as the system
// names it (dag_id, job, job_id, …); every rendering of a request shows
// all of them.
func (a *ActionSpec) Fields() []ActionField {
	text, _ := json.Marshal(a.Params)
	out := []ActionField{{"system", a.System}, {a.targetLabel(), a.Target}, {"asset", a.Asset}, {"domain", a.Domain}}
	for _, l := range a.locationFields() {
		if l.Value != "" {
			out = append(out, l)
		}
	}
	if f, ok := a.datasetsField(); ok {
		out = append(out, f)
	}
	return append(out, ActionField{"params", string(text)}, ActionField{"params_sha256", a.ParamsSHA256})
}

func (a *ActionSpec) locationFields() []ActionField {
	l := a.Location
	return []ActionField{{"instance", l.Instance}, {"code_location", l.CodeLocation}, {"repository", l.Repository},
		{"account", l.Account}, {"project", l.Project}, {"region", l.Region}}
}

// targetLabel is the name the system gives the target.
func (a *ActionSpec) targetLabel() string {
	switch a.System {
	case SystemAirflow:
		return "dag_id"
	case SystemDagster:
		return "job"
	case SystemDBTCloud:
		return "job_id"
	case SystemStepFunctions:
		return "state_machine_arn"
	case SystemSchemaRegistry:
		return "subject"
	case SystemOpenLineage:
		return "lineage_job"
	}
	return "target"
}

// noun is what the target is, for messages.
func (a *ActionSpec) noun() string {
	switch a.System {
	case SystemAirflow:
		return "DAG"
	case SystemDagster:
		return "Dagster job"
	case SystemDBTCloud:
		return "dbt Cloud job"
	case SystemStepFunctions:
		return "state machine"
	case SystemSchemaRegistry:
		return "subject"
	case SystemOpenLineage:
		return "lineage job"
	}
	return "target"
}

// String is the action in one line.
func (a *ActionSpec) String() string {
	var loc []string
	for _, f := range a.locationFields() {
		if f.Value != "" {
			loc = append(loc, f.Name+" "+f.Value)
		}
	}
	text, _ := json.Marshal(a.Params)
	s := fmt.Sprintf("%s %s %s", a.System, a.targetLabel(), a.Target)
	if len(loc) > 0 {
		s += " (" + strings.Join(loc, ", ") + ")"
	}
	return s + " with params " + string(text)
}

// kindFits reports whether an action on this system carries out a
// proposal of this kind.
func (a *ActionSpec) kindFits(kind string) bool {
	switch kind {
	case KindRerun, KindBackfill, KindReplay:
		return slices.Contains(runSystems, a.System)
	case KindSchemaVersion:
		return a.System == SystemSchemaRegistry
	case KindLineageEvent:
		return a.System == SystemOpenLineage
	}
	return false
}

// bindAction validates a proposal's action and sets its domain.
func (s *Service) bindAction(ctx context.Context, spec *ActionSpec, kind, domain string, targets []string) (*ActionSpec, error) {
	if spec == nil {
		if kind == KindLineageEvent {
			return nil, invalid("a %s proposal must bind its action (system, target, location and params) so the approver sees exactly what runs", kind)
		}
		return nil, nil
	}
	a, err := NewActionSpec(spec.System, spec.Target, spec.Asset, spec.Location, spec.Params)
	if err != nil {
		return nil, err
	}
	if given := strings.ToLower(strings.TrimSpace(spec.ParamsSHA256)); given != "" && given != a.ParamsSHA256 {
		return nil, invalid("action params_sha256 %s is not the SHA-256 of its params (%s); leave it out and it is computed", given, a.ParamsSHA256)
	}
	if text, _ := json.Marshal(a.Params); len(text) > MaxActionParams {
		return nil, invalid("action params are %d characters of JSON; at most %d, so the approver can read every one in the request", len(text), MaxActionParams)
	}
	if !a.kindFits(kind) {
		return nil, invalid("a %s proposal cannot run on %s; %s", kind, a.System, kindSystems(kind))
	}
	// The asset is bound by its canonical id (boundID), and must be one of
	// the targets by identity.
	asset, err := s.boundID(a.Asset)
	if err != nil {
		return nil, invalid("the action's asset %q is not an asset id: %v (see docs/ASSET_IDS.md)", a.Asset, err)
	}
	a.Asset = asset
	among, err := s.sameAsset(ctx, targets, a.Asset)
	if err != nil {
		return nil, err
	}
	if !among {
		return nil, invalid("the action's asset %s is not among the proposal's targets (%s); the approver must see what it acts on", a.Asset, strings.Join(targets, ", "))
	}
	d, ok, err := s.DomainOf(ctx, a.Asset)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, invalid("the action's %s %s (%s) is in no configured domain; add it to a domain's assets in dw.yaml", a.noun(), a.Target, a.Asset)
	}
	if d.Name != domain {
		return nil, invalid("the action's %s %s is in domain %s, not %s; propose it in its own domain", a.noun(), a.Target, d.Name, domain)
	}
	a.Domain = domain
	return a, nil
}

func kindSystems(kind string) string {
	switch kind {
	case KindRerun, KindBackfill, KindReplay:
		return "it runs on " + strings.Join(runSystems, ", ")
	case KindSchemaVersion:
		return "it runs on " + SystemSchemaRegistry
	case KindLineageEvent:
		return "it runs on " + SystemOpenLineage
	}
	return "a " + kind + " is carried out by people, so leave the action out"
}

// requested is a requested action with its domain resolved from the
// config: the domain is never the caller's to say.
func (s *Service) requested(ctx context.Context, a *ActionSpec) (ActionSpec, error) {
	r := *a
	r.Domain = ""
	// Compared by its bound id, as the approved asset was bound; a
	// spelling that is no id stays as given and so differs (the refusal
	// names it).
	id, err := s.boundID(r.Asset)
	if err != nil {
		return r, nil
	}
	r.Asset = id
	d, ok, err := s.DomainOf(ctx, id)
	if err != nil {
		return r, err
	}
	if ok {
		r.Domain = d.Name
	}
	return r, nil
}

// compareActions names every field in which the requested action differs
// from the approved one; nil when they are the same action. The requested
// domain is resolved from the config by the caller.
func compareActions(approved, requested *ActionSpec) []string {
	var diffs []string
	if approved.System != requested.System {
		return []string{fmt.Sprintf("approved system %s, requested %s", approved.System, requested.System)}
	}
	if approved.Target != requested.Target {
		diffs = append(diffs, fmt.Sprintf("approved %s %s, requested %s", approved.targetLabel(), approved.Target, requested.Target))
	}
	if approved.Asset != requested.Asset {
		diffs = append(diffs, fmt.Sprintf("approved asset %s, requested %s", approved.Asset, requested.Asset))
	}
	al, rl := approved.locationFields(), requested.locationFields()
	for i := range al {
		if al[i].Value != rl[i].Value {
			diffs = append(diffs, fmt.Sprintf("approved %s %s, requested %s", al[i].Name, orNone(nonEmpty(al[i].Value)), orNone(nonEmpty(rl[i].Value))))
		}
	}
	if approved.ParamsSHA256 != requested.ParamsSHA256 {
		d := fmt.Sprintf("approved params hash %s differs from requested %s", shortHash(approved.ParamsSHA256), shortHash(requested.ParamsSHA256))
		if keys := paramDiff("", approved.Params, requested.Params); len(keys) > 0 {
			if len(keys) > 8 {
				keys = append(keys[:8], fmt.Sprintf("and %d more", len(keys)-8))
			}
			d += ": " + strings.Join(keys, "; ")
		}
		diffs = append(diffs, d)
	}
	if requested.Domain == "" {
		diffs = append(diffs, fmt.Sprintf("approved domain %s, the %s %s is in no configured domain", approved.Domain, requested.noun(), requested.Target))
	} else if approved.Domain != requested.Domain {
		diffs = append(diffs, fmt.Sprintf("approved domain %s, the %s is in %s", approved.Domain, requested.noun(), requested.Domain))
	}
	return diffs
}

func nonEmpty(s string) []string {
	if s == "" {
		return nil
	}
	return []string{s}
}

func shortHash(h string) string {
	if len(h) > 12 {
		return h[:12] + "…"
	}
	return h
}

// paramDiff names the keys that differ, by their path: added, removed or
// changed (with both values, shortened).
func paramDiff(path string, a, b any) []string {
	am, aok := a.(map[string]any)
	bm, bok := b.(map[string]any)
	if aok && bok {
		keys := map[string]bool{}
		for k := range am {
			keys[k] = true
		}
		for k := range bm {
			keys[k] = true
		}
		sorted := make([]string, 0, len(keys))
		for k := range keys {
			sorted = append(sorted, k)
		}
		sort.Strings(sorted)
		var out []string
		for _, k := range sorted {
			p := k
			if path != "" {
				p = path + "." + k
			}
			av, ain := am[k]
			bv, bin := bm[k]
			switch {
			case !ain:
				out = append(out, fmt.Sprintf("key '%s' added", p))
			case !bin:
				out = append(out, fmt.Sprintf("key '%s' removed", p))
			default:
				out = append(out, paramDiff(p, av, bv)...)
			}
		}
		return out
	}
	if reflect.DeepEqual(a, b) {
		return nil
	}
	if path == "" {
		path = "params"
	}
	return []string{fmt.Sprintf("key '%s' changed from %s to %s", path, clip(a), clip(b))}
}

func clip(v any) string {
	raw, _ := json.Marshal(v)
	r := []rune(string(raw))
	if len(r) > 60 {
		return string(r[:59]) + "…"
	}
	return string(r)
}

// canonicalParams turns params into canonical JSON values: map keys
// sorted, numbers as written (so 4 and 4.0 differ, as they would upstream).
func canonicalParams(p map[string]any) (map[string]any, string, error) {
	if p == nil {
		p = map[string]any{}
	}
	raw, err := json.Marshal(p)
	if err != nil {
		return nil, "", invalid("action params cannot be encoded as JSON: %v", err)
	}
	v, text, err := canonicalValue(raw)
	if err != nil {
		return nil, "", invalid("action params cannot be encoded as JSON: %v", err)
	}
	m, _ := v.(map[string]any)
	return m, text, nil
}

func canonicalValue(raw []byte) (any, string, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, "", err
	}
	out, err := json.Marshal(v)
	if err != nil {
		return nil, "", err
	}
	// Decode again without json.Number so values compare as plain JSON.
	var plain any
	_ = json.Unmarshal(out, &plain)
	return plain, string(out), nil
}

func sha(text string) string {
	sum := sha256.Sum256([]byte(text))
	return hex.EncodeToString(sum[:])
}

// encodeAction is the stored text of a proposal's action (” for none).
func encodeAction(a *ActionSpec) (string, error) {
	if a == nil {
		return "", nil
	}
	raw, err := json.Marshal(a)
	if err != nil {
		return "", err
	}
	_, text, err := canonicalValue(raw)
	return text, err
}

// decodeAction reads a stored action and checks that its params still
// hash to the bound hash, so an edit of the stored params shows.
func decodeAction(id, text string) (*ActionSpec, error) {
	if text == "" {
		return nil, nil
	}
	dec := json.NewDecoder(strings.NewReader(text))
	dec.UseNumber()
	var a ActionSpec
	if err := dec.Decode(&a); err != nil {
		return nil, fmt.Errorf("proposal %s: stored action is unreadable: %w", id, err)
	}
	canon, ptext, err := canonicalParams(a.Params)
	if err != nil {
		return nil, fmt.Errorf("proposal %s: stored action params are unreadable: %w", id, err)
	}
	a.Params = canon
	if sha(ptext) != a.ParamsSHA256 {
		return nil, fmt.Errorf("proposal %s: stored action params do not hash to the approved params_sha256 %s; the store was edited, so nothing it allows can run", id, shortHash(a.ParamsSHA256))
	}
	return &a, nil
}

// CanonicalSHA256 is the SHA-256 of v's canonical JSON (map keys sorted,
// no insignificant space): the hash an action binds a large parameter by,
// such as a lineage event.
func CanonicalSHA256(v any) (string, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return "", invalid("cannot be encoded as JSON: %v", err)
	}
	_, text, err := canonicalValue(raw)
	if err != nil {
		return "", invalid("cannot be encoded as JSON: %v", err)
	}
	return sha(text), nil
}

// ActionText is the action block every plain-text rendering of a request
// shows (the confirmation form, dw approvals show): each bound field on
// its own line, or, without an action, that no tool may run anything
// under the approval.
func ActionText(a *ActionSpec, indent string) string {
	if a == nil {
		return indent + "Runs: nothing; no tool may dispatch under this approval (people carry it out)\n"
	}
	var b strings.Builder
	b.WriteString(indent + "Runs exactly this, and nothing else:\n")
	for _, f := range a.Fields() {
		fmt.Fprintf(&b, "%s  %s: %s\n", indent, f.Name, Line(f.Value))
	}
	return b.String()
}

// Summary is every bound field on one line, for tables.
func (a *ActionSpec) Summary() string {
	if a == nil {
		return "runs nothing"
	}
	var parts []string
	for _, f := range a.Fields() {
		parts = append(parts, f.Name+"="+Line(f.Value))
	}
	return strings.Join(parts, " ")
}
