package compat

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

type protoFormat struct{}

func (protoFormat) parse(s Schema) (any, error) {
	if len(s.References) > 0 {
		return nil, &ParseError{Kind: Protobuf, Message: "imports of other subjects cannot be resolved offline; compare the referenced types in their own subjects"}
	}
	return parseProto(s.Text)
}

// canonical is the token stream with comments and layout removed, so two
// spellings of one .proto hash the same.
func (protoFormat) canonical(p any) string {
	f := p.(*protoFile)
	parts := make([]string, len(f.toks))
	for i, t := range f.toks {
		if t.str {
			parts[i] = strconv.Quote(t.text)
		} else {
			parts[i] = t.text
		}
	}
	return strings.Join(parts, " ")
}

// check applies Confluent's Protobuf rules from writer (the original) to
// reader (the update). Compatible: adding or removing messages' fields,
// renaming fields, enum changes, adding or removing oneofs, moving a single
// field into a new oneof. Incompatible: a changed package, a removed
// message, a field number whose kind (scalar, message, map), scalar wire
// group or message type changed, required fields added or removed, fields
// removed from a oneof or several fields moved into one, and (from
// Protocol Buffers' own guidance, for packed encodings) a numeric field
// switched between repeated and singular.
func (protoFormat) check(reader, writer any) []Reason {
	c := &protoCompare{orig: writer.(*protoFile), upd: reader.(*protoFile)}
	if c.orig.pkg != c.upd.pkg {
		c.add("PACKAGE_CHANGED", "", "", "package changed from %q in {writer} to %q in {reader}", c.orig.pkg, c.upd.pkg)
	}
	names := make([]string, 0, len(c.orig.msgs))
	for n := range c.orig.msgs {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		u, ok := c.upd.msgs[n]
		if !ok {
			c.add("MESSAGE_REMOVED", n, "", "message %s in {writer} is missing from {reader}", n)
			continue
		}
		c.message(c.orig.msgs[n], u)
	}
	return c.out
}

type protoCompare struct {
	orig, upd *protoFile
	out       []Reason
}

func (c *protoCompare) add(typ, path, loc, format string, args ...any) {
	c.out = append(c.out, Reason{Type: typ, Path: path, Location: loc, Message: fmt.Sprintf(format, args...)})
}

func (c *protoCompare) message(o, u *protoMessage) {
	oTop, uTop := map[int]*protoField{}, map[int]*protoField{}
	oAll, uAll := map[int]*protoField{}, map[int]*protoField{}
	for _, f := range o.fields {
		oAll[f.number] = f
		if f.oneof == "" {
			oTop[f.number] = f
		}
	}
	for _, f := range u.fields {
		uAll[f.number] = f
		if f.oneof == "" {
			uTop[f.number] = f
		}
	}
	loc := func(f *protoField) string { return "#" + strconv.Itoa(f.number) }
	path := func(f *protoField) string { return o.local + "." + f.name }

	for _, uo := range u.oneofs {
		moved, existing := 0, 0
		for _, f := range uo.fields {
			if of, ok := oTop[f.number]; ok {
				moved++
				delete(oTop, of.number)
			} else if of, ok := oAll[f.number]; ok && of.oneof != "" {
				existing++
			}
		}
		switch {
		case moved > 1:
			c.add("MULTIPLE_FIELDS_MOVED_TO_ONEOF", o.local+"."+uo.name, "",
				"%d fields of %s in {writer} were moved into oneof %s in {reader}; data setting more than one of them cannot be read", moved, o.local, uo.name)
		case moved == 1 && existing > 0:
			c.add("FIELD_MOVED_TO_EXISTING_ONEOF", o.local+"."+uo.name, "",
				"a field of %s was moved into oneof %s, which already held fields in {writer}", o.local, uo.name)
		}
	}
	for _, oo := range o.oneofs {
		var uo *protoOneof
		for _, x := range u.oneofs {
			if x.name == oo.name {
				uo = x
			}
		}
		if uo == nil {
			continue
		}
		for _, f := range oo.fields {
			if _, ok := uAll[f.number]; !ok {
				c.add("ONEOF_FIELD_REMOVED", path(f), loc(f), "field %s (number %d) was removed from oneof %s in {reader}", path(f), f.number, oo.name)
			}
		}
	}
	nums := make([]int, 0, len(oAll)+len(uAll))
	for n := range oAll {
		nums = append(nums, n)
	}
	for n := range uAll {
		if _, ok := oAll[n]; !ok {
			nums = append(nums, n)
		}
	}
	sort.Ints(nums)
	for _, n := range nums {
		of, uf := oAll[n], uAll[n]
		switch {
		case uf == nil:
			if of.label == "required" {
				c.add("REQUIRED_FIELD_REMOVED", path(of), loc(of), "required field %s (number %d) of {writer} is missing from {reader}", path(of), n)
			}
		case of == nil:
			if uf.label == "required" {
				c.add("REQUIRED_FIELD_ADDED", o.local+"."+uf.name, loc(uf), "required field %s (number %d) was added in {reader}; data written with {writer} lacks it", o.local+"."+uf.name, n)
			}
		default:
			c.field(o, of, uf)
		}
	}
}

type protoKind int

const (
	kindScalar protoKind = iota
	kindMessage
	kindMap
)

// String names the kind in messages.
func (k protoKind) String() string {
	return [...]string{"scalar", "message", "map"}[k]
}

// typeInfo classifies a field type: enums count as numeric scalars, as on
// the wire.
func (c *protoCompare) typeInfo(file *protoFile, typ, scope string) (protoKind, string, string) {
	if typ == "map" {
		return kindMap, "", "map"
	}
	if g, ok := protoScalars[typ]; ok {
		return kindScalar, g, typ
	}
	local, isEnum, _ := file.resolve(typ, scope)
	if isEnum {
		return kindScalar, "GENERAL_NUMBER", local
	}
	return kindMessage, "", local
}

func (c *protoCompare) field(m *protoMessage, of, uf *protoField) {
	p := m.local + "." + uf.name
	loc := "#" + strconv.Itoa(of.number)
	before := len(c.out)
	c.types(p, loc, of.typ, uf.typ, of.scope, uf.scope, of, uf)
	// A label change on a field whose type already broke adds only noise.
	if len(c.out) > before || of.typ == "map" || uf.typ == "map" {
		return
	}
	if (of.label == "repeated") != (uf.label == "repeated") {
		k, group, _ := c.typeInfo(c.orig, of.typ, of.scope)
		if k == kindScalar && group != "STRING_OR_BYTES" {
			c.add("FIELD_NUMERIC_LABEL_CHANGED", p, loc, "numeric field %s (number %d) changed between repeated and singular (%q in {writer}, %q in {reader})",
				p, of.number, nonEmpty(of.label, "singular"), nonEmpty(uf.label, "singular"))
		}
	}
}

func (c *protoCompare) types(p, loc, ot, ut, oscope, uscope string, of, uf *protoField) {
	ok, og, on := c.typeInfo(c.orig, ot, oscope)
	uk, ug, un := c.typeInfo(c.upd, ut, uscope)
	if ok != uk {
		c.add("FIELD_KIND_CHANGED", p, loc, "field %s (number %d) changed from %s %s in {writer} to %s %s in {reader}", p, of.number, ok, on, uk, un)
		return
	}
	switch ok {
	case kindScalar:
		if og != ug {
			c.add("FIELD_SCALAR_KIND_CHANGED", p, loc, "field %s (number %d) changed type from %s in {writer} to %s in {reader}, which encode differently on the wire", p, of.number, on, un)
		}
	case kindMessage:
		if on != un {
			c.add("FIELD_NAMED_TYPE_CHANGED", p, loc, "field %s (number %d) changed message type from %s in {writer} to %s in {reader}", p, of.number, on, un)
		}
	case kindMap:
		c.types(p, loc, of.key, uf.key, oscope, uscope, of, uf)
		c.types(p, loc, of.val, uf.val, oscope, uscope, of, uf)
	}
}

// fields flattens the first message (the one Confluent serializes by
// default) into field paths, descending into message-typed fields.
func (protoFormat) fields(p any) (string, []field) {
	f := p.(*protoFile)
	root := f.messages[0]
	var out []field
	protoFields(f, root, "", map[string]bool{}, &out)
	return strings.TrimPrefix(f.pkg+"."+root.local, "."), out
}

func protoFields(f *protoFile, m *protoMessage, path string, stack map[string]bool, out *[]field) {
	if stack[m.local] {
		return
	}
	stack[m.local] = true
	defer delete(stack, m.local)
	for i, fd := range m.fields {
		typ := fd.typ
		if typ == "map" {
			typ = fmt.Sprintf("map<%s,%s>", fd.key, fd.val)
		} else if _, scalar := protoScalars[typ]; !scalar {
			typ, _, _ = f.resolve(typ, fd.scope)
		}
		if fd.label == "repeated" || fd.label == "required" {
			typ = fd.label + " " + typ
		}
		item := field{Path: joinPath(path, fd.name), Parent: path, Name: fd.name, Pos: i, Number: fd.number, Type: typ,
			Optional: fd.label != "required"}
		*out = append(*out, item)
		if fd.typ == "map" {
			continue
		}
		if local, isEnum, ok := f.resolve(fd.typ, fd.scope); ok && !isEnum {
			child := item.Path
			if fd.label == "repeated" {
				child += "[]"
			}
			protoFields(f, f.msgs[local], child, stack, out)
		}
	}
}
