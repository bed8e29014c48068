package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Arguments are checked here, before the SDK sees them, so a model reads
// what was wrong in the tool's words: "argument 'limit': must be from 1 to
// 500, got -1" rather than the SDK's "validating root: validating
// /properties/limit: minimum: -1/1 is less than 1.000000", and "argument
// 'at': not a valid time; use RFC 3339, e.g. 2026-12-01T09:40:00Z" rather
// than "cannot unmarshal … into Go struct field X.at of type time.Time".
// Errors never echo more than a few dozen characters of a value.

// maxArgErrors bounds how many problems one error lists.
const maxArgErrors = 5

// argChecker holds what checking one tool's arguments needs.
type argChecker struct {
	// schema is the tool's input schema, built on first use.
	schema func() *jsonschema.Schema
	// resolved is the schema resolved on the first call, not at start:
	// an agent starts with every tool and resolving is most of what
	// registering one costs, while most tools of a session are never
	// called. The same resolution validates the call and fills in its
	// defaults (call.go); that every tool's schema resolves is tested
	// for every agent (TestListedSchemasAreCurrent).
	resolved func() (*jsonschema.Resolved, error)
	// decode decodes an arguments object into the tool's input type.
	decode func([]byte) error
}

type argCheckers struct {
	mu sync.RWMutex
	m  map[string]*argChecker
}

func (a *argCheckers) add(name string, c *argChecker) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.m == nil {
		a.m = map[string]*argChecker{}
	}
	a.m[name] = c
}

func (a *argCheckers) get(name string) *argChecker {
	a.mu.RLock()
	defer a.mu.RUnlock()
	return a.m[name]
}

func newArgChecker[In any](schema func() *jsonschema.Schema) *argChecker {
	return &argChecker{
		schema:   schema,
		resolved: resolver(schema),
		decode: func(b []byte) error {
			var in In
			return json.Unmarshal(b, &in)
		},
	}
}

// checkArgsMiddleware answers a tools/call whose arguments are invalid with
// a tool error, without calling the tool.
func (s *Server) checkArgsMiddleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if method != "tools/call" {
			return next(ctx, method, req)
		}
		call, ok := req.(*mcp.CallToolRequest)
		if !ok || call.Params == nil {
			return next(ctx, method, req)
		}
		if err := nulArgument(call.Params.Name, call.Params.Arguments); err != nil {
			s.Logger.Debug("tool arguments refused", "tool", call.Params.Name, "err", err)
			var res mcp.CallToolResult
			res.SetError(err)
			return &res, nil
		}
		c := s.checkers.get(call.Params.Name)
		if c == nil {
			return next(ctx, method, req)
		}
		if err := c.check(call.Params.Arguments); err != nil {
			s.Logger.Debug("tool arguments refused", "tool", call.Params.Name, "err", err)
			var res mcp.CallToolResult
			res.SetError(err)
			return &res, nil
		}
		return next(ctx, method, req)
	}
}

// nulEscape is how a NUL reaches a JSON string: raw control bytes are not
// valid JSON, so a string holds U+0000 only where the text says \u0000.
var nulEscape = []byte(`\u0000`)

// nulArgument refuses a NUL (U+0000) anywhere in a call's arguments: any
// string value or object key, at any depth, described by the schema or
// free-form (details, params). PostgreSQL cannot store it in text and
// answers with a driver error; SQLite stores it, and C-string consumers
// (a terminal, a log line) cut the text there. One rule at the boundary
// keeps both stores and every tool alike. The error names the tool and the
// argument's path, never echoing the text.
func nulArgument(tool string, raw json.RawMessage) error {
	if !bytes.Contains(raw, nulEscape) {
		return nil // the usual call: no need to decode
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil // not JSON: the checker words that
	}
	where, pos := findNUL(v)
	if where == "" {
		return nil // an escaped backslash before "u0000": no NUL
	}
	return fmt.Errorf("%s: %s holds a NUL character (U+0000) at character %d; text arguments may not contain NUL", tool, where, pos)
}

// findNUL returns where the first NUL in v is (the argument's path, or
// "a key of <path>") and its position, in characters from 1; "" when none.
// Keys are visited in order so the answer does not vary between calls.
// The path is kept as steps and written out only for the NUL found:
// written out for every value on the way, as it once was, it cost the
// path's length for each of them, and a client choosing long keys and
// many values made one call of a few hundred KB cost minutes of CPU.
func findNUL(v any) (string, int) {
	var path []pathStep
	var walk func(v any) (string, int)
	walk = func(v any) (string, int) {
		switch v := v.(type) {
		case string:
			if i := strings.IndexByte(v, 0); i >= 0 {
				return orArguments(writePath(path)), utf8.RuneCountInString(v[:i]) + 1
			}
		case []any:
			for i, item := range v {
				path = append(path, pathStep{index: i, isIndex: true})
				w, pos := walk(item)
				path = path[:len(path)-1]
				if w != "" {
					return w, pos
				}
			}
		case map[string]any:
			keys := make([]string, 0, len(v))
			for k := range v {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				if i := strings.IndexByte(k, 0); i >= 0 {
					return "a key of " + orArguments(writePath(path)), utf8.RuneCountInString(k[:i]) + 1
				}
				path = append(path, pathStep{key: k})
				w, pos := walk(v[k])
				path = path[:len(path)-1]
				if w != "" {
					return w, pos
				}
			}
		}
		return "", 0
	}
	return walk(v)
}

// pathStep is one step into an argument: a member's key, or an index.
type pathStep struct {
	key     string
	index   int
	isIndex bool
}

// writePath writes a path as the other argument errors do
// (proposals[0].details.x), each key and the whole cut short.
func writePath(path []pathStep) string {
	var b strings.Builder
	for _, s := range path {
		if s.isIndex {
			fmt.Fprintf(&b, "[%d]", s.index)
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(clip(s.key, 80))
	}
	return clip(b.String(), 400)
}

func orArguments(path string) string {
	if path == "" {
		return "the arguments"
	}
	return path
}

func (c *argChecker) check(raw json.RawMessage) (err error) {
	// The schema is built here on a tool's first call: a patch that no
	// longer fits its type panics, and that must cost the model this one
	// call, not the client its server.
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("internal error: the tool's input schema cannot be built: %v (the server keeps running; please report this)", p)
		}
	}()
	var v any = map[string]any{}
	if len(raw) > 0 && string(raw) != "null" {
		if err := json.Unmarshal(raw, &v); err != nil {
			return errors.New("arguments are not valid JSON")
		}
	}
	args, ok := v.(map[string]any)
	if !ok {
		return fmt.Errorf("arguments must be a JSON object of named arguments, got %s", jsonKind(v))
	}
	var probs []string
	walkArg(c.schema(), "", args, &probs)
	if len(probs) > 0 {
		if len(probs) > maxArgErrors {
			probs = append(probs[:maxArgErrors], fmt.Sprintf("and %d more", len(probs)-maxArgErrors))
		}
		return errors.New(strings.Join(probs, "; "))
	}
	// Anything the walk does not cover (a $ref, anyOf) is still checked,
	// with the library's words cut short.
	resolved, err := c.resolved()
	if err != nil { // not reached: every agent's schemas resolve in a test
		return fmt.Errorf("the tool's input schema does not resolve: %v", err)
	}
	withDefaults := any(args)
	if err := resolved.ApplyDefaults(&withDefaults); err == nil {
		if err := resolved.Validate(&withDefaults); err != nil {
			return fmt.Errorf("arguments: %s", clip(strings.TrimPrefix(err.Error(), "validating root: "), 300))
		}
	}
	if err := c.decode(raw); err != nil {
		return c.decodeProblem(raw, args, err)
	}
	return nil
}

// decodeProblem finds which argument failed to decode (a time.Time parse
// error does not say) by decoding each alone, and words the failure.
func (c *argChecker) decodeProblem(raw json.RawMessage, args map[string]any, err error) error {
	keys := make([]string, 0, len(args))
	for k := range args {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		one, merr := json.Marshal(map[string]any{k: args[k]})
		if merr != nil {
			continue
		}
		if e := c.decode(one); e != nil {
			name := k
			var te *json.UnmarshalTypeError
			if errors.As(e, &te) && te.Field != "" {
				name = te.Field
			}
			return fmt.Errorf("argument '%s': %s", name, decodeWords(e, c.schema().Properties[k]))
		}
	}
	return fmt.Errorf("arguments: %s", decodeWords(err, nil))
}

var timeType = reflect.TypeFor[time.Time]()

func decodeWords(err error, prop *jsonschema.Schema) string {
	var pe *time.ParseError
	if errors.As(err, &pe) {
		return fmt.Sprintf("%q is not a valid time; use RFC 3339, e.g. 2026-12-01T09:40:00Z", clip(pe.Value, 40))
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		got := strings.TrimPrefix(te.Value, "number ")
		switch te.Type.Kind() {
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
			if strings.HasPrefix(te.Value, "number") {
				return fmt.Sprintf("%s is not a whole number in range", clip(got, 40))
			}
			return fmt.Sprintf("must be a whole number, got %s", te.Value)
		case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
			return fmt.Sprintf("must be a whole number, zero or more, got %s", clip(got, 40))
		case reflect.Float32, reflect.Float64:
			return fmt.Sprintf("must be a number, got %s", clip(te.Value, 40))
		case reflect.String:
			return fmt.Sprintf("must be text, got %s", clip(te.Value, 40))
		case reflect.Bool:
			return fmt.Sprintf("must be true or false, got %s", clip(te.Value, 40))
		case reflect.Slice, reflect.Array:
			return fmt.Sprintf("must be a list, got %s", clip(te.Value, 40))
		case reflect.Struct, reflect.Map:
			if te.Type == timeType {
				return "not a valid time; use RFC 3339, e.g. 2026-12-01T09:40:00Z"
			}
			return fmt.Sprintf("must be an object, got %s", clip(te.Value, 40))
		}
	}
	if prop != nil && prop.Description != "" {
		return "not a valid value; expected " + clip(prop.Description, 200)
	}
	return "not a valid value"
}

// walkArg checks v against s, appending worded problems. path is the
// argument's name ("limit", "proposals[2].why").
func walkArg(s *jsonschema.Schema, path string, v any, probs *[]string) {
	if s == nil || s.Ref != "" || len(*probs) > maxArgErrors {
		return
	}
	name := "argument '" + path + "'"
	if path == "" {
		name = "arguments"
	}
	if types := schemaTypes(s); len(types) > 0 && !typeMatches(types, v) {
		*probs = append(*probs, fmt.Sprintf("%s: must be %s, got %s", name, typeWords(types), jsonKind(v)))
		return
	}
	if len(s.Enum) > 0 && !slices.ContainsFunc(s.Enum, func(e any) bool { return reflect.DeepEqual(e, v) }) {
		var valid []string
		for _, e := range s.Enum {
			valid = append(valid, fmt.Sprint(e))
		}
		*probs = append(*probs, fmt.Sprintf("%s: %s is not one of: %s", name, short(v), strings.Join(valid, ", ")))
		return
	}
	switch v := v.(type) {
	case string:
		n := utf8.RuneCountInString(v)
		if s.MaxLength != nil && n > *s.MaxLength {
			*probs = append(*probs, fmt.Sprintf("%s: %d characters is too long; at most %d", name, n, *s.MaxLength))
		}
		if s.MinLength != nil && n < *s.MinLength {
			*probs = append(*probs, fmt.Sprintf("%s: at least %d characters", name, *s.MinLength))
		}
		if s.Pattern != "" {
			if re, err := regexp.Compile(s.Pattern); err == nil && !re.MatchString(v) {
				*probs = append(*probs, fmt.Sprintf("%s: %s does not match %s", name, short(v), s.Pattern))
			}
		}
	case float64:
		lo, hi := s.Minimum, s.Maximum
		if (lo != nil && v < *lo) || (hi != nil && v > *hi) ||
			(s.ExclusiveMinimum != nil && v <= *s.ExclusiveMinimum) || (s.ExclusiveMaximum != nil && v >= *s.ExclusiveMaximum) {
			*probs = append(*probs, fmt.Sprintf("%s: must be %s, got %s", name, rangeWords(s), short(v)))
		}
	case []any:
		if s.MaxItems != nil && len(v) > *s.MaxItems {
			*probs = append(*probs, fmt.Sprintf("%s: %d items is too many; at most %d", name, len(v), *s.MaxItems))
			return // its items are not worth checking one by one
		}
		if s.MinItems != nil && len(v) < *s.MinItems {
			*probs = append(*probs, fmt.Sprintf("%s: at least %d items", name, *s.MinItems))
		}
		for i, item := range v {
			walkArg(s.Items, fmt.Sprintf("%s[%d]", path, i), item, probs)
		}
	case map[string]any:
		defer missing(s, path, v, probs) // after the problems with what was given
		if s.MaxProperties != nil && len(v) > *s.MaxProperties {
			*probs = append(*probs, fmt.Sprintf("%s: %d entries is too many; at most %d", name, len(v), *s.MaxProperties))
			return
		}
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if p, ok := s.Properties[k]; ok {
				walkArg(p, join(path, k), v[k], probs)
				continue
			}
			switch ap := s.AdditionalProperties; {
			case ap != nil && ap.Not != nil:
				*probs = append(*probs, fmt.Sprintf("unknown argument '%s'; valid: %s", clip(join(path, k), 60), strings.Join(propNames(s), ", ")))
			case ap != nil:
				walkArg(ap, join(path, k), v[k], probs)
			}
		}
	}
}

// missing reports required arguments not given (and with no default):
// one with its description, several by name.
func missing(s *jsonschema.Schema, path string, v map[string]any, probs *[]string) {
	var names []string
	for _, req := range s.Required {
		if _, ok := v[req]; !ok {
			if p := s.Properties[req]; p == nil || p.Default == nil {
				names = append(names, join(path, req))
			}
		}
	}
	switch len(names) {
	case 0:
	case 1:
		*probs = append(*probs, fmt.Sprintf("missing argument '%s'%s", names[0], describe(s.Properties[strings.TrimPrefix(names[0], join(path, ""))])))
	default:
		*probs = append(*probs, fmt.Sprintf("missing arguments '%s'", strings.Join(names, "', '")))
	}
}

func join(path, k string) string {
	if path == "" {
		return k
	}
	return path + "." + k
}

func describe(p *jsonschema.Schema) string {
	if p == nil || p.Description == "" {
		return ""
	}
	return " (" + clip(p.Description, 160) + ")"
}

func propNames(s *jsonschema.Schema) []string {
	names := make([]string, 0, len(s.Properties))
	for k := range s.Properties {
		names = append(names, k)
	}
	sort.Strings(names)
	return names
}

func schemaTypes(s *jsonschema.Schema) []string {
	if s.Type != "" {
		return []string{s.Type}
	}
	return s.Types
}

func typeMatches(types []string, v any) bool {
	for _, t := range types {
		switch t {
		case "null":
			if v == nil {
				return true
			}
		case "string":
			if _, ok := v.(string); ok {
				return true
			}
		case "boolean":
			if _, ok := v.(bool); ok {
				return true
			}
		case "number":
			if _, ok := v.(float64); ok {
				return true
			}
		case "integer":
			if f, ok := v.(float64); ok && f == math.Trunc(f) && !math.IsInf(f, 0) {
				return true
			}
		case "array":
			if _, ok := v.([]any); ok {
				return true
			}
		case "object":
			if _, ok := v.(map[string]any); ok {
				return true
			}
		}
	}
	return false
}

func typeWords(types []string) string {
	var words []string
	for _, t := range types {
		switch t {
		case "null":
			continue // "or null" helps nobody: leaving it out means the same
		case "string":
			words = append(words, "text (a JSON string)")
		case "integer":
			words = append(words, "a whole number")
		case "number":
			words = append(words, "a number")
		case "boolean":
			words = append(words, "true or false")
		case "array":
			words = append(words, "a list")
		case "object":
			words = append(words, "an object")
		}
	}
	return strings.Join(words, " or ")
}

func jsonKind(v any) string {
	switch v := v.(type) {
	case nil:
		return "null"
	case string:
		return "text"
	case bool:
		return fmt.Sprint(v)
	case float64:
		return "the number " + short(v)
	case []any:
		return "a list"
	case map[string]any:
		return "an object"
	}
	return "something else"
}

func rangeWords(s *jsonschema.Schema) string {
	num := func(f float64) string { return short(f) }
	switch {
	case s.Minimum != nil && s.Maximum != nil:
		return fmt.Sprintf("from %s to %s", num(*s.Minimum), num(*s.Maximum))
	case s.Minimum != nil:
		return "at least " + num(*s.Minimum)
	case s.Maximum != nil:
		return "at most " + num(*s.Maximum)
	case s.ExclusiveMinimum != nil:
		return "more than " + num(*s.ExclusiveMinimum)
	case s.ExclusiveMaximum != nil:
		return "less than " + num(*s.ExclusiveMaximum)
	}
	return "in range"
}

// short renders a value for an error, cut to a few dozen characters.
func short(v any) string {
	switch v := v.(type) {
	case string:
		return fmt.Sprintf("%q", clip(v, 40))
	case float64:
		if v == math.Trunc(v) && math.Abs(v) < 1e18 {
			return fmt.Sprintf("%d", int64(v))
		}
		return fmt.Sprint(v)
	}
	b, _ := json.Marshal(v)
	return clip(string(b), 40)
}

// clip cuts s to at most n runes, marking the cut.
func clip(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n]) + "…"
}
