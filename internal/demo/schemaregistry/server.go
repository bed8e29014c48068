// Package schemaregistry is an in-memory Confluent Schema Registry over
// HTTP on loopback: `dw demo run` starts it in-process so story A needs no
// services, and the tests' registrytest wraps it. It serves the
// registry's real response shapes and error codes and judges compatibility
// with internal/compat, so a registration the real registry would refuse is
// refused here with 409.
package schemaregistry

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/dataworkers/dw/internal/compat"
)

// Reference is a schema reference in a request or response.
type Reference struct {
	Name    string `json:"name"`
	Subject string `json:"subject"`
	Version int    `json:"version"`
}

type version struct {
	num  int
	id   int
	kind compat.Kind
	text string
	refs []Reference
	hash string
}

type subject struct {
	name     string
	level    compat.Level // empty: the global level applies
	versions []*version
}

type stored struct {
	id   int
	kind compat.Kind
	text string
	refs []Reference
	hash string
}

// Server is the in-memory registry. It is safe for concurrent use.
type Server struct {
	srv      *http.Server
	url      string
	mu       sync.Mutex
	global   compat.Level
	subjects map[string]*subject
	schemas  []*stored // schema id i+1
	hits     map[string]int
}

// Start serves a new registry, global level BACKWARD, on a free loopback
// port; the caller closes it.
func Start() (*Server, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("start the in-process schema registry: %w", err)
	}
	s := &Server{global: compat.Backward, subjects: map[string]*subject{}, hits: map[string]int{}}
	s.srv = &http.Server{Handler: s.routes()}
	s.url = "http://" + ln.Addr().String()
	go func() { _ = s.srv.Serve(ln) }()
	return s, nil
}

// URL is the registry's base URL.
func (s *Server) URL() string { return s.url }

// Close stops the server.
func (s *Server) Close() { _ = s.srv.Close() }

// Seeded is one schema to seed.
type Seeded struct {
	Kind       compat.Kind // empty means AVRO
	Schema     string
	References []Reference
	// Version is the version number to give it (as the registry's import
	// mode allows); 0 means the next one. It must exceed the subject's
	// latest version.
	Version int
}

// SeedVersions registers schemas as versions of subject, oldest first,
// without compatibility checks, sets the subject's level unless level is
// empty, and returns the schema ids.
func (s *Server) SeedVersions(subj string, level compat.Level, seeds ...Seeded) ([]int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var ids []int
	for _, sd := range seeds {
		kind := sd.Kind
		if kind == "" {
			kind = compat.Avro
		}
		v, err := s.prepare(kind, sd.Schema, sd.References)
		if err != nil {
			return ids, fmt.Errorf("seeding %s: %w", subj, err)
		}
		if sub := s.subjects[subj]; sd.Version != 0 && sub != nil && len(sub.versions) > 0 && sd.Version <= sub.versions[len(sub.versions)-1].num {
			return ids, fmt.Errorf("seeding %s: version %d is not after the latest version %d", subj, sd.Version, sub.versions[len(sub.versions)-1].num)
		}
		v.num = sd.Version
		ids = append(ids, s.add(subj, v))
	}
	if level != "" {
		l, err := compat.ParseLevel(string(level))
		if err != nil {
			return ids, err
		}
		s.subject(subj, true).level = l
	}
	return ids, nil
}

// SetLevel sets a subject's own compatibility level.
func (s *Server) SetLevel(subj string, level compat.Level) error {
	l, err := compat.ParseLevel(string(level))
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.subject(subj, true).level = l
	return nil
}

// SetGlobalLevel sets the registry-wide level.
func (s *Server) SetGlobalLevel(level compat.Level) error {
	l, err := compat.ParseLevel(string(level))
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.global = l
	return nil
}

// Hits counts requests served for "METHOD /path" (path without query), so
// a test can prove a client asked rather than answered from a cache.
func (s *Server) Hits(methodAndPath string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hits[methodAndPath]
}

// Versions returns a subject's version numbers (nil if unknown).
func (s *Server) Versions(subj string) []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	sub := s.subjects[subj]
	if sub == nil {
		return nil
	}
	out := make([]int, len(sub.versions))
	for i, v := range sub.versions {
		out[i] = v.num
	}
	return out
}

func (s *Server) subject(name string, create bool) *subject {
	sub := s.subjects[name]
	if sub == nil && create {
		sub = &subject{name: name}
		s.subjects[name] = sub
	}
	return sub
}

func (s *Server) level(sub *subject) compat.Level {
	if sub != nil && sub.level != "" {
		return sub.level
	}
	return s.global
}

// resolveRefs gives the referenced schemas' texts, references of references
// first, for parsing.
func (s *Server) resolveRefs(refs []Reference, depth int) ([]string, error) {
	if depth > 16 {
		return nil, fmt.Errorf("references nest deeper than 16 levels")
	}
	var out []string
	for _, r := range refs {
		sub := s.subjects[r.Subject]
		if sub == nil {
			return nil, fmt.Errorf("reference %s: subject %q not found", r.Name, r.Subject)
		}
		v := sub.find(r.Version)
		if v == nil {
			return nil, fmt.Errorf("reference %s: subject %q has no version %d", r.Name, r.Subject, r.Version)
		}
		inner, err := s.resolveRefs(v.refs, depth+1)
		if err != nil {
			return nil, err
		}
		out = append(append(out, inner...), v.text)
	}
	return out, nil
}

func (sub *subject) find(num int) *version {
	for _, v := range sub.versions {
		if v.num == num {
			return v
		}
	}
	return nil
}

func (s *Server) compatSchema(v *version) (compat.Schema, error) {
	refs, err := s.resolveRefs(v.refs, 0)
	return compat.Schema{Text: v.text, References: refs}, err
}

// prepare parses a schema and computes its identity; the caller holds mu.
func (s *Server) prepare(kind compat.Kind, text string, refs []Reference) (*version, error) {
	v := &version{kind: kind, text: text, refs: refs}
	cs, err := s.compatSchema(v)
	if err != nil {
		return nil, err
	}
	c, err := compat.Canonicalize(kind, cs)
	if err != nil {
		return nil, err
	}
	v.hash = c.SHA256
	return v, nil
}

// add appends v as the subject's next version (or as v.num when set), reusing the id of an
// identical schema registered anywhere, as the registry does.
func (s *Server) add(subj string, v *version) int {
	sub := s.subject(subj, true)
	if v.num == 0 {
		v.num = 1
		if n := len(sub.versions); n > 0 {
			v.num = sub.versions[n-1].num + 1
		}
	}
	for _, st := range s.schemas {
		if st.kind == v.kind && st.hash == v.hash && sameRefs(st.refs, v.refs) {
			v.id = st.id
		}
	}
	if v.id == 0 {
		v.id = len(s.schemas) + 1
		s.schemas = append(s.schemas, &stored{id: v.id, kind: v.kind, text: v.text, refs: v.refs, hash: v.hash})
	}
	sub.versions = append(sub.versions, v)
	return v.id
}

func sameRefs(a, b []Reference) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// ---- HTTP ----

type apiError struct {
	Code    int    `json:"error_code"`
	Message string `json:"message"`
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/vnd.schemaregistry.v1+json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// fail writes a registry error; the HTTP status is the code's first three
// digits, as the registry does (40401 -> 404).
func fail(w http.ResponseWriter, code int, format string, args ...any) {
	status := code
	for status > 999 {
		status /= 10
	}
	writeJSON(w, status, apiError{Code: code, Message: fmt.Sprintf(format, args...)})
}

func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /subjects", s.listSubjects)
	mux.HandleFunc("GET /subjects/{subject}/versions", s.listVersions)
	mux.HandleFunc("GET /subjects/{subject}/versions/{version}", s.getVersion)
	mux.HandleFunc("POST /subjects/{subject}/versions", s.register)
	mux.HandleFunc("POST /subjects/{subject}", s.lookup)
	mux.HandleFunc("POST /compatibility/subjects/{subject}/versions", s.compatibility)
	mux.HandleFunc("POST /compatibility/subjects/{subject}/versions/{version}", s.compatibility)
	mux.HandleFunc("GET /config", s.getGlobalConfig)
	mux.HandleFunc("PUT /config", s.putGlobalConfig)
	mux.HandleFunc("GET /config/{subject}", s.getConfig)
	mux.HandleFunc("PUT /config/{subject}", s.putConfig)
	mux.HandleFunc("GET /schemas/ids/{id}", s.getSchemaByID)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		fail(w, http.StatusNotFound, "HTTP 404 Not Found")
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.hits[r.Method+" "+r.URL.Path]++
		s.mu.Unlock()
		mux.ServeHTTP(w, r)
	})
}

func (s *Server) listSubjects(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	names := []string{}
	for n, sub := range s.subjects {
		if len(sub.versions) > 0 {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	writeJSON(w, http.StatusOK, names)
}

// known returns the subject if it has versions, else writes 40401.
func (s *Server) known(w http.ResponseWriter, name string) *subject {
	sub := s.subjects[name]
	if sub == nil || len(sub.versions) == 0 {
		fail(w, 40401, "Subject '%s' not found.", name)
		return nil
	}
	return sub
}

func (s *Server) listVersions(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sub := s.known(w, r.PathValue("subject"))
	if sub == nil {
		return
	}
	nums := make([]int, len(sub.versions))
	for i, v := range sub.versions {
		nums[i] = v.num
	}
	writeJSON(w, http.StatusOK, nums)
}

// pick finds a version by number or "latest", writing the registry's error
// when it cannot.
func pick(w http.ResponseWriter, sub *subject, ver string) *version {
	if ver == "latest" || ver == "-1" {
		return sub.versions[len(sub.versions)-1]
	}
	n, err := strconv.Atoi(ver)
	if err != nil || n < 1 {
		fail(w, 42202, "The specified version '%s' is not a valid version id. Allowed values are between [1, 2^31-1] and the string \"latest\"", ver)
		return nil
	}
	v := sub.find(n)
	if v == nil {
		fail(w, 40402, "Version %d not found.", n)
	}
	return v
}

type versionBody struct {
	Subject    string      `json:"subject"`
	Version    int         `json:"version"`
	ID         int         `json:"id"`
	SchemaType string      `json:"schemaType,omitempty"`
	Schema     string      `json:"schema"`
	References []Reference `json:"references,omitempty"`
}

func wireType(k compat.Kind) string {
	if k == compat.Avro {
		return ""
	}
	return string(k)
}

func (s *Server) getVersion(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sub := s.known(w, r.PathValue("subject"))
	if sub == nil {
		return
	}
	v := pick(w, sub, r.PathValue("version"))
	if v == nil {
		return
	}
	writeJSON(w, http.StatusOK, versionBody{Subject: sub.name, Version: v.num, ID: v.id, SchemaType: wireType(v.kind), Schema: v.text, References: v.refs})
}

type schemaRequest struct {
	Schema     string      `json:"schema"`
	SchemaType string      `json:"schemaType"`
	References []Reference `json:"references"`
}

// readSchema decodes and parses a request's schema, writing 42201 when it is
// not valid.
func (s *Server) readSchema(w http.ResponseWriter, r *http.Request) *version {
	var req schemaRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		fail(w, 42201, "Invalid schema: request body is not JSON: %v", err)
		return nil
	}
	kind, err := compat.ParseKind(req.SchemaType)
	if err != nil {
		fail(w, 42201, "Invalid schema: %v", err)
		return nil
	}
	if len(req.References) == 0 {
		req.References = nil
	}
	v, err := s.prepare(kind, req.Schema, req.References)
	if err != nil {
		fail(w, 42201, "Invalid schema %s, details: %v", req.Schema, err)
		return nil
	}
	return v
}

func (s *Server) register(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	name := r.PathValue("subject")
	v := s.readSchema(w, r)
	if v == nil {
		return
	}
	sub := s.subject(name, false)
	if sub != nil {
		for _, old := range sub.versions {
			if old.kind == v.kind && old.hash == v.hash && sameRefs(old.refs, v.refs) {
				writeJSON(w, http.StatusOK, map[string]int{"id": old.id})
				return
			}
		}
		if len(sub.versions) > 0 {
			lv := s.level(sub)
			msgs, ok, err := s.judge(v, sub.versions, lv)
			if err != nil {
				fail(w, 42201, "Invalid schema: %v", err)
				return
			}
			if !ok {
				fail(w, 409, "Schema being registered is incompatible with an earlier schema for subject \"%s\", details: [%s]", name, strings.Join(msgs, ", "))
				return
			}
		}
	}
	writeJSON(w, http.StatusOK, map[string]int{"id": s.add(name, v)})
}

func (s *Server) lookup(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sub := s.known(w, r.PathValue("subject"))
	if sub == nil {
		return
	}
	v := s.readSchema(w, r)
	if v == nil {
		return
	}
	for _, old := range sub.versions {
		if old.kind == v.kind && old.hash == v.hash && sameRefs(old.refs, v.refs) {
			writeJSON(w, http.StatusOK, versionBody{Subject: sub.name, Version: old.num, ID: old.id, SchemaType: wireType(old.kind), Schema: old.text, References: old.refs})
			return
		}
	}
	fail(w, 40403, "Schema not found")
}

func (s *Server) compatibility(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	name, ver := r.PathValue("subject"), r.PathValue("version")
	sub := s.subject(name, false)
	var against []*version
	switch {
	case ver != "":
		if sub = s.known(w, name); sub == nil {
			return
		}
		v := pick(w, sub, ver)
		if v == nil {
			return
		}
		against = []*version{v}
	case sub != nil:
		against = sub.versions
	}
	v := s.readSchema(w, r)
	if v == nil {
		return
	}
	ok, msgs := true, []string{}
	if len(against) > 0 {
		var err error
		msgs, ok, err = s.judge(v, against, s.level(sub))
		if err != nil {
			fail(w, 42201, "Invalid schema: %v", err)
			return
		}
	}
	resp := map[string]any{"is_compatible": ok}
	if r.URL.Query().Get("verbose") == "true" {
		resp["messages"] = msgs
	}
	writeJSON(w, http.StatusOK, resp)
}

// judge checks v against earlier versions under level with internal/compat
// and renders the registry's verbose messages for the first version it
// fails against (the registry stops there too).
//
// The message format is modeled on Confluent's documented messages; no real
// capture of a verbose incompatible answer was available. Each issue is
// {errorType:'…', description:'…', additionalInfo:'…'}, followed by
// {oldSchemaVersion: N}, {oldSchema: '…'} and
// {validateFields: 'false', compatibility: 'LEVEL'}.
func (s *Server) judge(v *version, earlier []*version, level compat.Level) ([]string, bool, error) {
	next, err := s.compatSchema(v)
	if err != nil {
		return nil, false, err
	}
	prev := make([]compat.Version, 0, len(earlier))
	byNum := map[int]*version{}
	for _, e := range earlier {
		cs, err := s.compatSchema(e)
		if err != nil {
			return nil, false, err
		}
		if e.kind != v.kind {
			return []string{fmt.Sprintf("{errorType:'SCHEMA_TYPE_CHANGED', description:'The new schema is %s but version %d is %s', additionalInfo:''}", v.kind, e.num, e.kind),
				fmt.Sprintf("{oldSchemaVersion: %d}", e.num)}, false, nil
		}
		prev = append(prev, compat.Version{Version: e.num, Schema: cs})
		byNum[e.num] = e
	}
	verdict, err := compat.Check(v.kind, next, prev, level)
	if err != nil {
		return nil, false, err
	}
	if verdict.Compatible {
		return []string{}, true, nil
	}
	first := verdict.Reasons[0].Version
	var msgs []string
	for _, r := range verdict.Reasons {
		if r.Version == first {
			msgs = append(msgs, describe(r))
		}
	}
	msgs = append(msgs,
		fmt.Sprintf("{oldSchemaVersion: %d}", first),
		fmt.Sprintf("{oldSchema: '%s'}", byNum[first].text),
		fmt.Sprintf("{validateFields: 'false', compatibility: '%s'}", level))
	return msgs, false, nil
}

// describe renders one reason in the modern Confluent message form. The
// Avro descriptions follow Confluent's wording for each error type; JSON
// Schema and Protobuf use the reason's own message.
func describe(r compat.Reason) string {
	reader, writer := "new", "old"
	if r.Direction == compat.OldReads {
		reader, writer = "old", "new"
	}
	field := r.Path
	if i := strings.LastIndex(field, "."); i >= 0 {
		field = field[i+1:]
	}
	var desc, info string
	switch r.Type {
	case "READER_FIELD_MISSING_DEFAULT_VALUE":
		desc = fmt.Sprintf("The field '%s' at path '%s' in the %s schema has no default value and is missing in the %s schema", field, r.Location, reader, writer)
		info = field
	case "TYPE_MISMATCH":
		desc = fmt.Sprintf("The type (path '%s') of a field in the %s schema does not match with the %s schema", r.Location, reader, writer)
		info = r.Message
	case "NAME_MISMATCH":
		desc = fmt.Sprintf("The name of the schema has changed (path '%s')", nonEmpty(r.Location, "/name"))
		info = r.Message
	case "MISSING_UNION_BRANCH":
		desc = fmt.Sprintf("The %s schema is missing a type inside a union field at path '%s' in the %s schema", reader, r.Location, writer)
		info = r.Message
	case "MISSING_ENUM_SYMBOLS":
		desc = fmt.Sprintf("The %s schema is missing enum symbols at path '%s' in the %s schema", reader, r.Location, writer)
		info = r.Message
	case "FIXED_SIZE_MISMATCH":
		desc = fmt.Sprintf("The size of FIXED type field at path '%s' in the %s schema does not match with the %s schema", r.Location, writer, reader)
		info = r.Message
	default:
		desc = r.Message
		info = nonEmpty(r.Location, r.Path)
	}
	return fmt.Sprintf("{errorType:'%s', description:'%s', additionalInfo:'%s'}", r.Type, desc, info)
}

func nonEmpty(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func (s *Server) getGlobalConfig(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]string{"compatibilityLevel": string(s.global)})
}

func (s *Server) getConfig(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	name := r.PathValue("subject")
	sub := s.subjects[name]
	switch {
	case sub != nil && sub.level != "":
		writeJSON(w, http.StatusOK, map[string]string{"compatibilityLevel": string(sub.level)})
	case r.URL.Query().Get("defaultToGlobal") == "true":
		writeJSON(w, http.StatusOK, map[string]string{"compatibilityLevel": string(s.global)})
	default:
		fail(w, 40408, "Subject '%s' does not have subject-level compatibility configured", name)
	}
}

type configRequest struct {
	Compatibility string `json:"compatibility"`
}

func readLevel(w http.ResponseWriter, r *http.Request) (compat.Level, bool) {
	var req configRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Compatibility == "" {
		fail(w, 42203, "Invalid compatibility level. Valid values are none, backward, forward, full, backward_transitive, forward_transitive, and full_transitive")
		return "", false
	}
	l, err := compat.ParseLevel(req.Compatibility)
	if err != nil {
		fail(w, 42203, "Invalid compatibility level. Valid values are none, backward, forward, full, backward_transitive, forward_transitive, and full_transitive")
		return "", false
	}
	return l, true
}

func (s *Server) putGlobalConfig(w http.ResponseWriter, r *http.Request) {
	l, ok := readLevel(w, r)
	if !ok {
		return
	}
	s.mu.Lock()
	s.global = l
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, configRequest{Compatibility: string(l)})
}

func (s *Server) putConfig(w http.ResponseWriter, r *http.Request) {
	l, ok := readLevel(w, r)
	if !ok {
		return
	}
	s.mu.Lock()
	s.subject(r.PathValue("subject"), true).level = l
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, configRequest{Compatibility: string(l)})
}

func (s *Server) getSchemaByID(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	id, err := strconv.Atoi(r.PathValue("id"))
	if err != nil || id < 1 || id > len(s.schemas) {
		fail(w, 40403, "Schema %s not found", r.PathValue("id"))
		return
	}
	st := s.schemas[id-1]
	writeJSON(w, http.StatusOK, struct {
		SchemaType string      `json:"schemaType,omitempty"`
		Schema     string      `json:"schema"`
		References []Reference `json:"references,omitempty"`
	}{wireType(st.kind), st.text, st.refs})
}
