// Package connecttest is an in-process Kafka Connect worker: an httptest
// server answering the REST endpoints package connect reads, from connector
// definitions held in memory. Its answers take the shapes of real Connect
// responses captured by two public client libraries (fixtures/, embedded),
// and the plugin config definitions it validates against come from those
// captures. Tests use it, and so does the demo, which starts it in-process.
package connecttest

import (
	"embed"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/dataworkers/dw/internal/connect"
)

//go:embed fixtures/*.json
var fixtures embed.FS

// Fixture returns the REST body of an embedded capture, unwrapping the
// jcustenborder mock envelope (responses[0].body).
func Fixture(name string) ([]byte, error) {
	raw, err := fixtures.ReadFile("fixtures/" + name)
	if err != nil {
		return nil, err
	}
	if !strings.HasPrefix(name, "jcustenborder__") {
		return raw, nil
	}
	var env struct {
		Responses []struct {
			Body json.RawMessage `json:"body"`
		} `json:"responses"`
	}
	if err := json.Unmarshal(raw, &env); err != nil || len(env.Responses) == 0 {
		return nil, fmt.Errorf("connecttest: fixture %s has no responses[0].body: %v", name, err)
	}
	return env.Responses[0].Body, nil
}

// Plugin is an installed connector plugin with the config keys it defines.
type Plugin struct {
	connect.Plugin
	Definitions []connect.ConfigDefinition
}

type connector struct {
	info   connect.Info
	status connect.Status
}

// Server is a fake Connect worker. Its methods are safe for concurrent use.
type Server struct {
	srv *httptest.Server

	mu         sync.Mutex
	common     []connect.ConfigDefinition // keys every connector has
	connectors map[string]*connector
	plugins    map[string]Plugin
	extra      map[string]map[string][]string // plugin -> field -> errors
}

// NewServer starts a worker with the plugins the captures describe:
// FileStreamSink/FileStreamSource (from the plugin list), Kafka's
// VerifiableSourceConnector and Confluent's ActiveMQSourceConnector (each
// with the full definitions of its captured validate answer).
func NewServer() *Server {
	s := &Server{connectors: map[string]*connector{}, plugins: map[string]Plugin{}, extra: map[string]map[string][]string{}}
	if err := s.loadPlugins(); err != nil {
		// The fixtures are embedded; failing to read them is a build defect.
		panic(err)
	}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	return s
}

func (s *Server) loadPlugins() error {
	raw, err := Fixture("sourcelab__getConnectorPlugins.json")
	if err != nil {
		return err
	}
	var listed []connect.Plugin
	if err := json.Unmarshal(raw, &listed); err != nil {
		return err
	}
	// Every connector shares the framework's own keys (the Common and
	// Transforms groups of a validate answer).
	s.common, err = definitions("sourcelab__putConnectorPluginConfigValidate.json", "Common", "Transforms")
	if err != nil {
		return err
	}
	for _, p := range listed {
		defs := slices.Clone(s.common)
		if p.Type == "sink" {
			defs = append(defs, sinkDefinitions...)
		}
		s.plugins[p.Class] = Plugin{Plugin: p, Definitions: defs}
	}
	for _, f := range []string{"sourcelab__putConnectorPluginConfigValidate.json", "jcustenborder__validate.json"} {
		defs, err := definitions(f)
		if err != nil {
			return err
		}
		raw, _ := Fixture(f)
		var infos connect.ConfigInfos
		if err := json.Unmarshal(raw, &infos); err != nil {
			return err
		}
		s.plugins[infos.Name] = Plugin{Plugin: connect.Plugin{Class: infos.Name, Type: "source"}, Definitions: defs}
	}
	return nil
}

// definitions reads the config definitions of a captured validate answer,
// only those of the given groups when any are named.
func definitions(fixture string, groups ...string) ([]connect.ConfigDefinition, error) {
	raw, err := Fixture(fixture)
	if err != nil {
		return nil, err
	}
	var infos connect.ConfigInfos
	if err := json.Unmarshal(raw, &infos); err != nil {
		return nil, fmt.Errorf("connecttest: %s: %w", fixture, err)
	}
	var out []connect.ConfigDefinition
	for _, ci := range infos.Configs {
		if len(groups) > 0 && (ci.Definition.Group == nil || !slices.Contains(groups, *ci.Definition.Group)) {
			continue
		}
		out = append(out, ci.Definition)
	}
	return out, nil
}

// sinkDefinitions are the two keys Connect adds for every sink connector.
// No capture of a sink's validate answer was available, so these are
// written from Connect's SinkConnectorConfig.
var sinkDefinitions = []connect.ConfigDefinition{
	{Name: "topics", Type: "LIST", DefaultValue: ptr(""), Importance: "HIGH", Group: ptr("Common"), Width: "LONG",
		DisplayName: "Topics", Documentation: "List of topics to consume, separated by commas", Dependents: []string{}, Order: 4},
	{Name: "topics.regex", Type: "STRING", DefaultValue: ptr(""), Importance: "HIGH", Group: ptr("Common"), Width: "LONG",
		DisplayName: "Topics regex", Documentation: "Regular expression giving topics to consume.", Dependents: []string{}, Order: 4},
}

func ptr(s string) *string { return &s }

// URL is the worker's base URL.
func (s *Server) URL() string { return s.srv.URL }

// Close stops the worker.
func (s *Server) Close() { s.srv.Close() }

// WorkerID is the worker_id the worker reports, host:port as Connect does.
func (s *Server) WorkerID() string { return strings.TrimPrefix(s.srv.URL, "http://") }

// AddPlugin installs a plugin. Definitions may be nil: the framework's
// common keys (and a sink's topics keys) are always defined.
func (s *Server) AddPlugin(class, typ, version string, defs ...connect.ConfigDefinition) {
	s.mu.Lock()
	defer s.mu.Unlock()
	all := slices.Clone(s.common)
	if typ == "sink" {
		all = append(all, sinkDefinitions...)
	}
	all = append(all, defs...)
	s.plugins[class] = Plugin{Plugin: connect.Plugin{Class: class, Type: typ, Version: version}, Definitions: all}
}

// AddConnector creates a RUNNING connector with tasks RUNNING tasks from a
// config whose connector.class names an installed plugin, as a POST to
// /connectors would.
func (s *Server) AddConnector(name string, config map[string]string, tasks int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if name == "" {
		return fmt.Errorf("connecttest: connector name is empty")
	}
	if _, dup := s.connectors[name]; dup {
		return fmt.Errorf("connecttest: connector %s already exists", name)
	}
	p, err := s.resolve(config["connector.class"])
	if err != nil {
		return err
	}
	cfg := maps.Clone(config)
	cfg["name"] = name
	c := &connector{
		info: connect.Info{Name: name, Config: cfg, Type: p.Type, Tasks: []connect.TaskID{}},
		status: connect.Status{Name: name, Type: p.Type, Tasks: []connect.TaskState{},
			Connector: connect.State{State: connect.StateRunning, WorkerID: s.WorkerID()}},
	}
	for i := 0; i < tasks; i++ {
		c.info.Tasks = append(c.info.Tasks, connect.TaskID{Connector: name, Task: i})
		c.status.Tasks = append(c.status.Tasks, connect.TaskState{ID: i, State: connect.StateRunning, WorkerID: s.WorkerID()})
	}
	s.connectors[name] = c
	return nil
}

var states = []string{connect.StateRunning, connect.StatePaused, connect.StateStopped, connect.StateFailed, connect.StateUnassigned, connect.StateRestarting}

func checkState(state string) error {
	if !slices.Contains(states, state) {
		return fmt.Errorf("connecttest: state %q is not one of %s", state, strings.Join(states, ", "))
	}
	return nil
}

// SetConnectorState sets the connector's own state and trace.
func (s *Server) SetConnectorState(name, state, trace string) error {
	if err := checkState(state); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.connectors[name]
	if !ok {
		return fmt.Errorf("connecttest: no connector %s", name)
	}
	c.status.Connector.State, c.status.Connector.Trace = state, trace
	return nil
}

// SetTaskState sets one task's state and trace.
func (s *Server) SetTaskState(name string, task int, state, trace string) error {
	if err := checkState(state); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.connectors[name]
	if !ok {
		return fmt.Errorf("connecttest: no connector %s", name)
	}
	if task < 0 || task >= len(c.status.Tasks) {
		return fmt.Errorf("connecttest: connector %s has %d tasks, no task %d", name, len(c.status.Tasks), task)
	}
	c.status.Tasks[task].State, c.status.Tasks[task].Trace = state, trace
	return nil
}

// SetValidationErrors adds errors to fields whenever a config for plugin is
// validated, for checks the fake cannot make itself (a wrong password, a
// missing dataset); nil clears them.
func (s *Server) SetValidationErrors(plugin string, errs map[string][]string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if errs == nil {
		delete(s.extra, plugin)
		return
	}
	s.extra[plugin] = maps.Clone(errs)
}

// resolve finds a plugin by class or alias (the simple class name, with or
// without "Connector"), as Connect does. Callers hold s.mu.
func (s *Server) resolve(class string) (Plugin, error) {
	if p, ok := s.plugins[class]; ok {
		return p, nil
	}
	var names []string
	for c, p := range s.plugins {
		simple := c[strings.LastIndex(c, ".")+1:]
		if simple == class || simple == class+"Connector" {
			return p, nil
		}
		names = append(names, c)
	}
	sort.Strings(names)
	return Plugin{}, &connect.APIError{Status: http.StatusBadRequest, Code: http.StatusBadRequest,
		Message: "Failed to find any class that implements Connector and which name matches " + class +
			", available connectors are: " + strings.Join(names, ", ")}
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	parts := strings.Split(strings.Trim(r.URL.EscapedPath(), "/"), "/")
	for i, p := range parts {
		if u, err := url.PathUnescape(p); err == nil {
			parts[i] = u
		}
	}
	switch {
	case r.Method == http.MethodGet && len(parts) == 1 && parts[0] == "connectors":
		s.listConnectors(w, r)
	case r.Method == http.MethodGet && len(parts) == 2 && parts[0] == "connectors":
		if c := s.find(w, parts[1]); c != nil {
			reply(w, http.StatusOK, c.info)
		}
	case r.Method == http.MethodGet && len(parts) == 3 && parts[0] == "connectors" && parts[2] == "config":
		if c := s.find(w, parts[1]); c != nil {
			reply(w, http.StatusOK, c.info.Config)
		}
	case r.Method == http.MethodGet && len(parts) == 3 && parts[0] == "connectors" && parts[2] == "status":
		if c := s.find(w, parts[1]); c != nil {
			reply(w, http.StatusOK, c.status)
		}
	case r.Method == http.MethodGet && len(parts) == 5 && parts[0] == "connectors" && parts[2] == "tasks" && parts[4] == "status":
		c := s.find(w, parts[1])
		if c == nil {
			return
		}
		id, err := strconv.Atoi(parts[3])
		if err != nil || id < 0 || id >= len(c.status.Tasks) {
			fail(w, http.StatusNotFound, fmt.Sprintf("No status found for task %s-%s", parts[1], parts[3]))
			return
		}
		reply(w, http.StatusOK, c.status.Tasks[id])
	case r.Method == http.MethodGet && len(parts) == 1 && parts[0] == "connector-plugins":
		var out []connect.Plugin
		for _, p := range s.plugins {
			out = append(out, p.Plugin)
		}
		sort.Slice(out, func(i, j int) bool { return out[i].Class < out[j].Class })
		reply(w, http.StatusOK, out)
	case r.Method == http.MethodPut && len(parts) == 4 && parts[0] == "connector-plugins" && parts[2] == "config" && parts[3] == "validate":
		s.validate(w, r, parts[1])
	default:
		fail(w, http.StatusNotFound, "HTTP 404 Not Found")
	}
}

func (s *Server) find(w http.ResponseWriter, name string) *connector {
	c, ok := s.connectors[name]
	if !ok {
		fail(w, http.StatusNotFound, "Connector "+name+" not found")
	}
	return c
}

func (s *Server) listConnectors(w http.ResponseWriter, r *http.Request) {
	expand := r.URL.Query()["expand"]
	names := slices.Sorted(maps.Keys(s.connectors))
	if len(expand) == 0 {
		if names == nil {
			names = []string{}
		}
		reply(w, http.StatusOK, names)
		return
	}
	out := map[string]map[string]any{}
	for _, n := range names {
		e := map[string]any{}
		if slices.Contains(expand, "info") {
			e["info"] = s.connectors[n].info
		}
		if slices.Contains(expand, "status") {
			e["status"] = s.connectors[n].status
		}
		out[n] = e
	}
	reply(w, http.StatusOK, out)
}

func (s *Server) validate(w http.ResponseWriter, r *http.Request, plugin string) {
	var cfg map[string]string
	if err := json.NewDecoder(r.Body).Decode(&cfg); err != nil {
		fail(w, http.StatusBadRequest, "Cannot deserialize the request body as a map of string to string: "+err.Error())
		return
	}
	p, err := s.resolve(plugin)
	if err != nil {
		ae := err.(*connect.APIError)
		fail(w, ae.Code, ae.Message)
		return
	}
	if inc := cfg["connector.class"]; inc != "" {
		if ip, err := s.resolve(inc); err != nil || ip.Class != p.Class {
			fail(w, http.StatusBadRequest, "Included connector type "+inc+" does not match request type "+plugin)
			return
		}
	}
	reply(w, http.StatusOK, s.check(p, cfg))
}

// check validates cfg against p's definitions the way Connect's ConfigDef
// does for the rules it can judge alone: required keys without a default,
// numbers that do not parse, and a sink's topics/topics.regex pair.
func (s *Server) check(p Plugin, cfg map[string]string) connect.ConfigInfos {
	out := connect.ConfigInfos{Name: p.Class, Groups: []string{}, Configs: []connect.ConfigInfo{}}
	index := map[string]int{}
	for _, d := range p.Definitions {
		if d.Group != nil && !slices.Contains(out.Groups, *d.Group) {
			out.Groups = append(out.Groups, *d.Group)
		}
		v := connect.ConfigValue{Name: d.Name, RecommendedValues: []string{}, Errors: []string{}, Visible: true}
		given, ok := cfg[d.Name]
		switch {
		case ok && d.Type == "PASSWORD":
			v.Value = ptr("[hidden]")
		case ok:
			v.Value = ptr(given)
		default:
			v.Value = d.DefaultValue
		}
		switch {
		case !ok && d.Required && d.DefaultValue == nil:
			v.Errors = append(v.Errors, fmt.Sprintf("Missing required configuration %q which has no default value.", d.Name))
		case ok && (d.Type == "INT" || d.Type == "LONG" || d.Type == "SHORT"):
			if _, err := strconv.ParseInt(strings.TrimSpace(given), 10, 64); err != nil {
				v.Errors = append(v.Errors, fmt.Sprintf("Invalid value %s for configuration %s: Not a number of type %s", given, d.Name, d.Type))
			}
		}
		index[d.Name] = len(out.Configs)
		out.Configs = append(out.Configs, connect.ConfigInfo{Definition: d, Value: v})
	}
	addErr := func(field, msg string) {
		i, ok := index[field]
		if !ok {
			i = len(out.Configs)
			index[field] = i
			out.Configs = append(out.Configs, connect.ConfigInfo{
				Definition: connect.ConfigDefinition{Name: field, Type: "STRING", Importance: "HIGH", Dependents: []string{}, DisplayName: field},
				Value:      connect.ConfigValue{Name: field, Value: valueOf(cfg, field), RecommendedValues: []string{}, Errors: []string{}, Visible: true},
			})
		}
		out.Configs[i].Value.Errors = append(out.Configs[i].Value.Errors, msg)
	}
	if p.Type == "sink" {
		hasTopics, hasRegex := strings.TrimSpace(cfg["topics"]) != "", strings.TrimSpace(cfg["topics.regex"]) != ""
		switch {
		case hasTopics && hasRegex:
			msg := "topics and topics.regex are mutually exclusive options, but both are set."
			addErr("topics", msg)
			addErr("topics.regex", msg)
		case !hasTopics && !hasRegex:
			msg := "Must configure one of topics or topics.regex"
			addErr("topics", msg)
			addErr("topics.regex", msg)
		}
	}
	for _, f := range slices.Sorted(maps.Keys(s.extra[p.Class])) {
		for _, msg := range s.extra[p.Class][f] {
			addErr(f, msg)
		}
	}
	for _, ci := range out.Configs {
		if len(ci.Value.Errors) > 0 {
			out.ErrorCount++
		}
	}
	return out
}

func valueOf(cfg map[string]string, k string) *string {
	if v, ok := cfg[k]; ok {
		return &v
	}
	return nil
}

func reply(w http.ResponseWriter, status int, body any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(body)
}

// fail answers with Connect's error body.
func fail(w http.ResponseWriter, status int, msg string) {
	reply(w, status, map[string]any{"error_code": status, "message": msg})
}
