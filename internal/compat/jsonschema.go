package compat

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// jsonFormat handles JSON Schema (draft-07 style): type, properties,
// required, additionalProperties, enum, items, default, local $ref, and the
// numeric, length and count bounds. Combinators and the other keywords are
// compared as text: any change to them is reported as one the offline
// check cannot judge, and counted as incompatible rather than passed.
type jsonFormat struct{}

type jsonDoc struct {
	root  *jsNode
	value any
	// nodes memoizes $ref targets by JSON pointer.
	nodes map[string]*jsNode
}

type jsNode struct {
	doc      *jsonDoc
	boolean  *bool // a true or false schema
	ref      string
	types    []string // sorted; nil means any type
	props    map[string]*jsNode
	order    []string
	required map[string]bool
	// addlSet is whether additionalProperties was given; addlAllowed is its
	// boolean meaning; addlSchema is set when it is a schema.
	addlSet     bool
	addlAllowed bool
	addlSchema  *jsNode
	enum        []string // canonical JSON of each value
	hasEnum     bool
	items       *jsNode
	def         string
	hasDef      bool
	bounds      map[string]json.Number
	other       map[string]string // keyword -> canonical JSON, for keywords compared as text
}

var jsonTypes = []string{"array", "boolean", "integer", "null", "number", "object", "string"}

var (
	jsonUpperBounds = []string{"maxLength", "maximum", "exclusiveMaximum", "maxItems", "maxProperties"}
	jsonLowerBounds = []string{"minLength", "minimum", "exclusiveMinimum", "minItems", "minProperties"}
	// jsonNarrowing are keywords whose removal only widens what is valid,
	// and whose addition or change may narrow it.
	jsonNarrowing = []string{"pattern", "format", "const", "uniqueItems", "multipleOf"}
	// jsonOpaque are keywords this package does not reason about.
	jsonOpaque = []string{"allOf", "anyOf", "oneOf", "not", "if", "then", "else", "patternProperties",
		"dependencies", "dependentRequired", "dependentSchemas", "additionalItems", "contains", "propertyNames", "unevaluatedProperties", "unevaluatedItems"}
)

func (jsonFormat) parse(s Schema) (any, error) {
	if len(s.References) > 0 {
		return nil, &ParseError{Kind: JSON, Message: "JSON Schema references to other subjects cannot be resolved offline; inline the referenced definitions under \"definitions\" and use local $ref"}
	}
	if err := jsonSyntax(JSON, s.Text); err != nil {
		return nil, err
	}
	v, err := decodeOrdered(s.Text)
	if err != nil {
		return nil, &ParseError{Kind: JSON, Message: err.Error()}
	}
	doc := &jsonDoc{value: v, nodes: map[string]*jsNode{}}
	root, err := doc.node(v, "#")
	if err != nil {
		return nil, err
	}
	doc.root = root
	// Resolve every $ref up front so a dangling one is a parse error, not
	// a silent pass.
	if err := doc.checkRefs(root, map[*jsNode]bool{}); err != nil {
		return nil, err
	}
	return doc, nil
}

func jsonErr(at, format string, args ...any) error {
	return &ParseError{Kind: JSON, Message: fmt.Sprintf("at %s: ", at) + fmt.Sprintf(format, args...)}
}

func (d *jsonDoc) node(v any, at string) (*jsNode, error) {
	n := &jsNode{doc: d}
	switch t := v.(type) {
	case bool:
		n.boolean = &t
		return n, nil
	case *object:
		return n, n.fill(t, at)
	}
	return nil, jsonErr(at, "a schema must be an object or a boolean, got %s", canonicalJSON(v))
}

func (n *jsNode) fill(o *object, at string) error {
	d := n.doc
	if r, ok := o.get("$ref"); ok {
		s, ok := r.(string)
		if !ok {
			return jsonErr(at+"/$ref", "$ref must be a string")
		}
		if !strings.HasPrefix(s, "#") {
			return jsonErr(at+"/$ref", "$ref %q points outside this schema; only local references (#/definitions/…, #/$defs/…) are resolved offline", s)
		}
		n.ref = s
	}
	if t, ok := o.get("type"); ok {
		switch tv := t.(type) {
		case string:
			n.types = []string{tv}
		case []any:
			for _, e := range tv {
				s, ok := e.(string)
				if !ok {
					return jsonErr(at+"/type", "type entries must be strings")
				}
				n.types = append(n.types, s)
			}
		default:
			return jsonErr(at+"/type", "type must be a string or an array of strings")
		}
		for _, ty := range n.types {
			if !slices.Contains(jsonTypes, ty) {
				return jsonErr(at+"/type", "unknown type %q; valid: %s", ty, strings.Join(jsonTypes, ", "))
			}
		}
		sort.Strings(n.types)
		n.types = slices.Compact(n.types)
	}
	if p, ok := o.get("properties"); ok {
		po, ok := p.(*object)
		if !ok {
			return jsonErr(at+"/properties", "properties must be an object")
		}
		n.props = map[string]*jsNode{}
		for _, k := range po.keys {
			c, err := d.node(po.vals[k], at+"/properties/"+k)
			if err != nil {
				return err
			}
			n.props[k], n.order = c, append(n.order, k)
		}
	}
	n.required = map[string]bool{}
	if r, ok := o.get("required"); ok {
		arr, ok := r.([]any)
		if !ok {
			return jsonErr(at+"/required", "required must be an array of property names")
		}
		for _, e := range arr {
			s, ok := e.(string)
			if !ok {
				return jsonErr(at+"/required", "required must be an array of property names")
			}
			n.required[s] = true
		}
	}
	n.addlAllowed = true
	if a, ok := o.get("additionalProperties"); ok {
		n.addlSet = true
		switch av := a.(type) {
		case bool:
			n.addlAllowed = av
		case *object:
			c, err := d.node(av, at+"/additionalProperties")
			if err != nil {
				return err
			}
			n.addlSchema = c
		default:
			return jsonErr(at+"/additionalProperties", "additionalProperties must be a boolean or a schema")
		}
	}
	if e, ok := o.get("enum"); ok {
		arr, ok := e.([]any)
		if !ok {
			return jsonErr(at+"/enum", "enum must be an array")
		}
		n.hasEnum = true
		for _, v := range arr {
			n.enum = append(n.enum, canonicalJSON(v))
		}
	}
	if it, ok := o.get("items"); ok {
		if _, isArr := it.([]any); isArr {
			n.setOther("items", it)
		} else {
			c, err := d.node(it, at+"/items")
			if err != nil {
				return err
			}
			n.items = c
		}
	}
	if dv, ok := o.get("default"); ok {
		n.def, n.hasDef = canonicalJSON(dv), true
	}
	for _, k := range append(append([]string{}, jsonUpperBounds...), jsonLowerBounds...) {
		if v, ok := o.get(k); ok {
			num, ok := v.(json.Number)
			if !ok {
				return jsonErr(at+"/"+k, "%s must be a number", k)
			}
			if n.bounds == nil {
				n.bounds = map[string]json.Number{}
			}
			n.bounds[k] = num
		}
	}
	for _, k := range append(append([]string{}, jsonNarrowing...), jsonOpaque...) {
		if v, ok := o.get(k); ok {
			n.setOther(k, v)
		}
	}
	return nil
}

func (n *jsNode) setOther(k string, v any) {
	if n.other == nil {
		n.other = map[string]string{}
	}
	n.other[k] = canonicalJSON(v)
}

// resolve follows $ref to the node it names.
func (d *jsonDoc) resolve(ref string) (*jsNode, error) {
	if ref == "#" {
		return d.root, nil
	}
	if n, ok := d.nodes[ref]; ok {
		return n, nil
	}
	cur := d.value
	for _, part := range strings.Split(strings.TrimPrefix(ref, "#/"), "/") {
		part = strings.ReplaceAll(strings.ReplaceAll(part, "~1", "/"), "~0", "~")
		switch c := cur.(type) {
		case *object:
			v, ok := c.get(part)
			if !ok {
				return nil, jsonErr(ref, "$ref %q does not resolve: no %q", ref, part)
			}
			cur = v
		case []any:
			i, err := strconv.Atoi(part)
			if err != nil || i < 0 || i >= len(c) {
				return nil, jsonErr(ref, "$ref %q does not resolve", ref)
			}
			cur = c[i]
		default:
			return nil, jsonErr(ref, "$ref %q does not resolve", ref)
		}
	}
	n, err := d.node(cur, ref)
	if err != nil {
		return nil, err
	}
	d.nodes[ref] = n
	return n, nil
}

func (d *jsonDoc) checkRefs(n *jsNode, seen map[*jsNode]bool) error {
	if n == nil || seen[n] {
		return nil
	}
	seen[n] = true
	if n.ref != "" {
		t, err := d.resolve(n.ref)
		if err != nil {
			return err
		}
		if err := d.checkRefs(t, seen); err != nil {
			return err
		}
	}
	for _, k := range n.order {
		if err := d.checkRefs(n.props[k], seen); err != nil {
			return err
		}
	}
	if err := d.checkRefs(n.items, seen); err != nil {
		return err
	}
	return d.checkRefs(n.addlSchema, seen)
}

// deref follows a chain of $ref (siblings of $ref are ignored, as in
// draft-07).
func (n *jsNode) deref() *jsNode {
	for i := 0; n != nil && n.ref != "" && i < 64; i++ {
		t, err := n.doc.resolve(n.ref)
		if err != nil {
			return n
		}
		n = t
	}
	return n
}

// empty reports whether the node accepts every value.
func (n *jsNode) empty() bool {
	if n == nil {
		return true
	}
	if n.boolean != nil {
		return *n.boolean
	}
	return n.ref == "" && n.types == nil && n.props == nil && len(n.required) == 0 && n.addlAllowed && n.addlSchema == nil &&
		!n.hasEnum && n.items == nil && len(n.bounds) == 0 && len(n.other) == 0
}

func (n *jsNode) isFalse() bool { return n != nil && n.boolean != nil && !*n.boolean }

// open is Confluent's open content model: any additional property allowed.
func (n *jsNode) open() bool {
	_, pattern := n.other["patternProperties"]
	return n.addlAllowed && n.addlSchema == nil && !pattern
}

func (jsonFormat) canonical(p any) string { return canonicalJSON(p.(*jsonDoc).value) }

func (jsonFormat) check(reader, writer any) []Reason {
	c := &jsonCompare{seen: map[[2]*jsNode]bool{}}
	c.compare(writer.(*jsonDoc).root, reader.(*jsonDoc).root, "", "#")
	return c.out
}

// jsonCompare applies Confluent's JSON Schema rules: the update (the reading
// schema) must accept everything the original (the writing schema)
// accepted.
type jsonCompare struct {
	seen map[[2]*jsNode]bool
	out  []Reason
}

func (c *jsonCompare) add(typ, path, loc, format string, args ...any) {
	c.out = append(c.out, Reason{Type: typ, Path: path, Location: loc, Message: fmt.Sprintf(format, args...)})
}

func (c *jsonCompare) compare(orig, upd *jsNode, path, loc string) {
	orig, upd = orig.deref(), upd.deref()
	key := [2]*jsNode{orig, upd}
	if c.seen[key] {
		return
	}
	c.seen[key] = true
	what := pathOrTop(path)
	if upd.empty() || orig.isFalse() {
		return
	}
	if upd.isFalse() {
		c.add("TYPE_NARROWED", path, loc, "%s: {reader} accepts no value here but {writer} did", what)
		return
	}
	if orig.empty() {
		c.add("TYPE_NARROWED", path, loc, "%s: {writer} accepted any value here but {reader} constrains it", what)
		return
	}
	c.compareTypes(orig, upd, path, loc)
	c.compareEnum(orig, upd, path, loc)
	c.compareBounds(orig, upd, path, loc)
	c.compareOther(orig, upd, path, loc)
	if orig.props != nil || upd.props != nil || orig.addlSet || upd.addlSet || len(orig.required) > 0 || len(upd.required) > 0 {
		c.compareObject(orig, upd, path, loc)
	}
	if upd.items != nil {
		c.compare(orig.items, upd.items, path+"[]", loc+"/items")
	}
}

func covered(t string, set []string) bool {
	return slices.Contains(set, t) || (t == "integer" && slices.Contains(set, "number"))
}

func (c *jsonCompare) compareTypes(orig, upd *jsNode, path, loc string) {
	if upd.types == nil {
		return
	}
	if orig.types == nil {
		c.add("TYPE_NARROWED", path, loc+"/type", "%s: {writer} allowed any type but {reader} allows only %s", pathOrTop(path), strings.Join(upd.types, "|"))
		return
	}
	var lost []string
	for _, t := range orig.types {
		if !covered(t, upd.types) {
			lost = append(lost, t)
		}
	}
	if len(lost) == 0 {
		return
	}
	typ := "TYPE_NARROWED"
	if len(lost) == len(orig.types) {
		typ = "TYPE_CHANGED"
	}
	c.add(typ, path, loc+"/type", "%s: type %s in {writer} is not accepted by {reader} (type %s)",
		pathOrTop(path), strings.Join(lost, "|"), strings.Join(upd.types, "|"))
}

func (c *jsonCompare) compareEnum(orig, upd *jsNode, path, loc string) {
	if !upd.hasEnum {
		return
	}
	if !orig.hasEnum {
		c.add("ENUM_ARRAY_NARROWED", path, loc+"/enum", "%s: {reader} restricts values to an enum that {writer} did not have", pathOrTop(path))
		return
	}
	var lost []string
	for _, v := range orig.enum {
		if !slices.Contains(upd.enum, v) {
			lost = append(lost, v)
		}
	}
	if len(lost) > 0 {
		typ := "ENUM_ARRAY_NARROWED"
		if len(lost) == len(orig.enum) {
			typ = "ENUM_ARRAY_CHANGED"
		}
		c.add(typ, path, loc+"/enum", "%s: enum values %s allowed by {writer} are not in {reader}'s enum", pathOrTop(path), strings.Join(lost, ", "))
	}
}

func (c *jsonCompare) compareBounds(orig, upd *jsNode, path, loc string) {
	check := func(k string, upper bool) {
		nu, uok := upd.bounds[k]
		no, ook := orig.bounds[k]
		if !uok {
			return
		}
		kind := strings.ToUpper(camelToSnake(k))
		if !ook {
			c.add(kind+"_ADDED", path, loc+"/"+k, "%s: {reader} adds %s %s that {writer} did not have", pathOrTop(path), k, nu)
			return
		}
		fu, _ := nu.Float64()
		fo, _ := no.Float64()
		if upper && fu < fo {
			c.add(kind+"_DECREASED", path, loc+"/"+k, "%s: %s lowered from %s in {writer} to %s in {reader}", pathOrTop(path), k, no, nu)
		}
		if !upper && fu > fo {
			c.add(kind+"_INCREASED", path, loc+"/"+k, "%s: %s raised from %s in {writer} to %s in {reader}", pathOrTop(path), k, no, nu)
		}
	}
	for _, k := range jsonUpperBounds {
		check(k, true)
	}
	for _, k := range jsonLowerBounds {
		check(k, false)
	}
}

func camelToSnake(s string) string {
	var b strings.Builder
	for i, r := range s {
		if r >= 'A' && r <= 'Z' && i > 0 {
			b.WriteByte('_')
		}
		b.WriteRune(r)
	}
	return b.String()
}

func (c *jsonCompare) compareOther(orig, upd *jsNode, path, loc string) {
	for _, k := range jsonNarrowing {
		nu, uok := upd.other[k]
		no, ook := orig.other[k]
		switch {
		case !uok:
		case !ook:
			c.add(strings.ToUpper(camelToSnake(k))+"_ADDED", path, loc+"/"+k, "%s: {reader} adds %s %s that {writer} did not have", pathOrTop(path), k, nu)
		case nu != no:
			c.add(strings.ToUpper(camelToSnake(k))+"_CHANGED", path, loc+"/"+k, "%s: %s changed from %s in {writer} to %s in {reader}", pathOrTop(path), k, no, nu)
		}
	}
	keys := append([]string{"items"}, jsonOpaque...)
	for _, k := range keys {
		if upd.other[k] != orig.other[k] {
			c.add("UNSUPPORTED_KEYWORD_CHANGED", path, loc+"/"+k,
				"%s: %s differs between {writer} and {reader}; this offline check does not judge %s and counts the change as incompatible (ask the registry)", pathOrTop(path), k, k)
		}
	}
}

func (c *jsonCompare) compareObject(orig, upd *jsNode, path, loc string) {
	for _, k := range orig.order {
		up, ok := upd.props[k]
		if !ok || orig.required[k] || !upd.required[k] {
			continue
		}
		if up.deref().hasDef {
			continue
		}
		c.add("REQUIRED_ATTRIBUTE_ADDED", joinPath(path, k), loc+"/required",
			"property %s is optional in {writer} but required without a default in {reader}", joinPath(path, k))
	}
	for _, k := range orig.order {
		op := orig.props[k]
		up, ok := upd.props[k]
		p, l := joinPath(path, k), loc+"/properties/"+k
		if ok {
			c.compare(op, up, p, l)
			continue
		}
		switch {
		case upd.open():
		case upd.addlSchema != nil:
			sub := &jsonCompare{seen: map[[2]*jsNode]bool{}}
			sub.compare(op, upd.addlSchema, p, l)
			if len(sub.out) > 0 {
				c.add("PROPERTY_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL", p, l,
					"property %s was removed and {reader}'s additionalProperties schema does not accept the values {writer} allowed for it", p)
			}
		case op.deref().isFalse():
		default:
			c.add("PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL", p, l,
				"property %s was removed and {reader} is closed (additionalProperties false), so data written with {writer} that carries %s is rejected", p, k)
		}
	}
	for _, k := range upd.order {
		if _, ok := orig.props[k]; ok {
			continue
		}
		up := upd.props[k]
		p, l := joinPath(path, k), loc+"/properties/"+k
		if orig.open() {
			if !up.deref().empty() {
				c.add("PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL", p, l,
					"property %s was added with constraints but {writer} has an open content model, so its data may already carry %s with any value (close {writer} with additionalProperties false, or add the property with an empty schema)", p, k)
			}
			continue
		}
		if orig.addlSchema != nil {
			sub := &jsonCompare{seen: map[[2]*jsNode]bool{}}
			sub.compare(orig.addlSchema, up, p, l)
			if len(sub.out) > 0 {
				c.add("PROPERTY_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL", p, l,
					"property %s was added but does not accept every value {writer}'s additionalProperties schema allowed", p)
			}
		}
		if upd.required[k] && !up.deref().hasDef {
			c.add("REQUIRED_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL", p, loc+"/required",
				"property %s was added as required without a default, and data written with {writer} lacks it", p)
		}
	}
	switch {
	case orig.addlAllowed && !upd.addlAllowed:
		c.add("ADDITIONAL_PROPERTIES_REMOVED", path, loc+"/additionalProperties",
			"%s: {reader} forbids additional properties that {writer} allowed", pathOrTop(path))
	case !orig.addlAllowed || !upd.addlAllowed:
	case orig.addlSchema == nil && upd.addlSchema != nil:
		c.add("ADDITIONAL_PROPERTIES_NARROWED", path, loc+"/additionalProperties",
			"%s: {reader} constrains additional properties that {writer} allowed with any value", pathOrTop(path))
	case orig.addlSchema != nil && upd.addlSchema != nil:
		c.compare(orig.addlSchema, upd.addlSchema, path+"{}", loc+"/additionalProperties")
	}
}

// fields flattens properties into paths for diffing, following local
// $refs and array items.
func (jsonFormat) fields(p any) (string, []field) {
	d := p.(*jsonDoc)
	var out []field
	jsonFields(d.root, "", map[*jsNode]bool{}, &out)
	// JSON Schema has no type name to compare.
	return "", out
}

func jsonFields(n *jsNode, path string, stack map[*jsNode]bool, out *[]field) {
	n = n.deref()
	if n == nil || stack[n] {
		return
	}
	stack[n] = true
	defer delete(stack, n)
	for i, k := range n.order {
		c := n.props[k].deref()
		fd := field{
			Path: joinPath(path, k), Parent: path, Name: k, Pos: i, Type: jsonTypeString(c),
			HasDefault: c.hasDef, Default: c.def, Optional: !n.required[k] || c.hasDef,
		}
		*out = append(*out, fd)
		jsonFields(c, fd.Path, stack, out)
	}
	if n.items != nil {
		jsonFields(n.items, path+"[]", stack, out)
	}
}

func jsonTypeString(n *jsNode) string {
	if n == nil {
		return "any"
	}
	if n.boolean != nil {
		return strconv.FormatBool(*n.boolean)
	}
	var b strings.Builder
	if n.types == nil {
		b.WriteString("any")
	} else {
		b.WriteString(strings.Join(n.types, "|"))
	}
	if n.items != nil {
		b.WriteString("<" + jsonTypeString(n.items.deref()) + ">")
	}
	if n.hasEnum {
		b.WriteString(" enum[" + strings.Join(n.enum, ",") + "]")
	}
	keys := make([]string, 0, len(n.bounds))
	for k := range n.bounds {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, " %s=%s", k, n.bounds[k])
	}
	for _, k := range jsonNarrowing {
		if v, ok := n.other[k]; ok {
			fmt.Fprintf(&b, " %s=%s", k, v)
		}
	}
	return b.String()
}
