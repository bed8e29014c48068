package compat

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/hamba/avro/v2"
)

type avroFormat struct{}

// parse uses a fresh SchemaCache per schema: hamba's global cache would let a
// later version of a named type replace an earlier one, and the comparison
// would then be between a schema and itself.
func (avroFormat) parse(s Schema) (any, error) {
	cache := &avro.SchemaCache{}
	for i, ref := range s.References {
		which := fmt.Sprintf("reference %d", i+1)
		if err := jsonSyntax(Avro, ref); err != nil {
			return nil, withWhich(err, which)
		}
		if _, err := parseAvro(ref, cache); err != nil {
			return nil, &ParseError{Kind: Avro, Which: which, Message: avroMessage(err)}
		}
	}
	if err := jsonSyntax(Avro, s.Text); err != nil {
		return nil, err
	}
	parsed, err := parseAvro(s.Text, cache)
	if err != nil {
		return nil, &ParseError{Kind: Avro, Message: avroMessage(err)}
	}
	return parsed, nil
}

// parseAvro is hamba's parser with its panics turned into errors: v2.31.0
// indexes the first member of an empty union when a field has a default
// ({"type": [], "default": …}), found by FuzzAvroSchema.
func parseAvro(text string, cache *avro.SchemaCache) (s avro.Schema, err error) {
	defer func() {
		if p := recover(); p != nil {
			s, err = nil, errors.New("the Avro parser failed on this schema (a known cause: a union with no types, [], and a default); check its unions")
		}
	}()
	return avro.ParseWithCache(text, "", cache)
}

func avroMessage(err error) string {
	msg := strings.TrimPrefix(err.Error(), "avro: ")
	if name, ok := strings.CutPrefix(msg, "unknown type: "); ok {
		return fmt.Sprintf("unknown type %s; a named type defined in another schema must be passed in references (they are parsed first)", name)
	}
	return msg
}

func (avroFormat) canonical(p any) string { return p.(avro.Schema).String() }

// check asks hamba whether reader can read writer's data and, when it
// cannot, walks both schemas to name every field that breaks: hamba stops at
// the first problem and does not say where it is.
func (avroFormat) check(reader, writer any) []Reason {
	r, w := reader.(avro.Schema), writer.(avro.Schema)
	sc := avro.NewSchemaCompatibility()
	err := sc.Compatible(r, w)
	if err == nil {
		return nil
	}
	wk := &avroWalker{sc: sc, seen: map[[64]byte]bool{}}
	wk.walk(r, w, "", "")
	if len(wk.out) == 0 {
		wk.out = append(wk.out, avroLeaf(err, r, w, "", ""))
	}
	return wk.out
}

type avroWalker struct {
	sc   *avro.SchemaCompatibility
	seen map[[64]byte]bool
	out  []Reason
}

func (wk *avroWalker) walk(reader, writer avro.Schema, path, loc string) {
	err := wk.sc.Compatible(reader, writer)
	if err == nil {
		return
	}
	var key [64]byte
	rf, wf := reader.Fingerprint(), writer.Fingerprint()
	copy(key[:32], rf[:])
	copy(key[32:], wf[:])
	if wk.seen[key] {
		return
	}
	wk.seen[key] = true
	reader, writer = avroDeref(reader), avroDeref(writer)
	switch {
	case reader.Type() == avro.Record && writer.Type() == avro.Record:
		r, w := reader.(*avro.RecordSchema), writer.(*avro.RecordSchema)
		if !avroNamesMatch(r, w) {
			wk.out = append(wk.out, avroLeaf(err, r, w, path, loc))
			return
		}
		before := len(wk.out)
		for i, f := range r.Fields() {
			fpath, floc := joinPath(path, f.Name()), fmt.Sprintf("%s/fields/%d", loc, i)
			wfield := avroWriterField(w, f)
			if wfield == nil {
				if !f.HasDefault() {
					wk.out = append(wk.out, Reason{
						Type: "READER_FIELD_MISSING_DEFAULT_VALUE", Path: fpath, Location: floc,
						Message: fmt.Sprintf("field %s is missing from {writer} and has no default value in {reader}", fpath),
					})
				}
				continue
			}
			wk.walk(f.Type(), wfield.Type(), fpath, floc+"/type")
		}
		if len(wk.out) == before {
			wk.out = append(wk.out, avroLeaf(err, r, w, path, loc))
		}
	case reader.Type() == avro.Union || writer.Type() == avro.Union:
		wk.walkUnion(reader, writer, path, loc)
	case reader.Type() == avro.Array && writer.Type() == avro.Array:
		wk.walk(reader.(*avro.ArraySchema).Items(), writer.(*avro.ArraySchema).Items(), path+"[]", loc+"/items")
	case reader.Type() == avro.Map && writer.Type() == avro.Map:
		wk.walk(reader.(*avro.MapSchema).Values(), writer.(*avro.MapSchema).Values(), path+"{}", loc+"/values")
	default:
		wk.out = append(wk.out, avroLeaf(err, reader, writer, path, loc))
	}
}

// walkUnion looks for the union branch that was meant to match, so an
// optional nested record that changed is reported by its inner field rather
// than as a missing union branch.
func (wk *avroWalker) walkUnion(reader, writer avro.Schema, path, loc string) {
	var branches []avro.Schema
	if u, ok := writer.(*avro.UnionSchema); ok {
		branches = u.Types()
	} else {
		branches = []avro.Schema{writer}
	}
	for _, b := range branches {
		if wk.sc.Compatible(reader, b) == nil {
			continue
		}
		ru, ok := reader.(*avro.UnionSchema)
		if !ok {
			wk.walk(reader, b, path, loc)
			continue
		}
		if alike, i := avroAlikeBranch(ru, b); alike != nil {
			wk.walk(alike, b, path, fmt.Sprintf("%s/%d", loc, i))
			continue
		}
		wk.out = append(wk.out, Reason{
			Type: "MISSING_UNION_BRANCH", Path: path, Location: loc,
			Message: fmt.Sprintf("%s: {reader} has no union branch that can read %s written by {writer}", pathOrTop(path), avroType(b)),
		})
	}
}

// avroAlikeBranch finds the reader branch of the same kind (and name, for
// named types) as the writer's branch.
func avroAlikeBranch(u *avro.UnionSchema, w avro.Schema) (avro.Schema, int) {
	w = avroDeref(w)
	for i, b := range u.Types() {
		b = avroDeref(b)
		if b.Type() != w.Type() {
			continue
		}
		bn, bok := b.(avro.NamedSchema)
		wn, wok := w.(avro.NamedSchema)
		if bok && wok && bn.Name() != wn.Name() && !slices.Contains(bn.Aliases(), wn.FullName()) {
			continue
		}
		return b, i
	}
	return nil, 0
}

func avroLeaf(err error, reader, writer avro.Schema, path, loc string) Reason {
	msg := err.Error()
	r := Reason{Path: path, Location: loc}
	switch {
	case strings.Contains(msg, "names do not match"):
		r.Type = "NAME_MISMATCH"
		r.Message = fmt.Sprintf("%s: {reader} names the type %s but {writer} wrote %s, and no alias covers it",
			pathOrTop(path), avroType(reader), avroType(writer))
	case strings.Contains(msg, "fixed sizes do not match"):
		r.Type = "FIXED_SIZE_MISMATCH"
		r.Message = fmt.Sprintf("%s: fixed size differs (%s in {reader}, %s in {writer})", pathOrTop(path), avroType(reader), avroType(writer))
	case strings.Contains(msg, "is missing symbol"):
		r.Type = "MISSING_ENUM_SYMBOLS"
		sym := msg[strings.LastIndex(msg, " ")+1:]
		r.Message = fmt.Sprintf("%s: enum symbol %s written by {writer} is missing from {reader}, which has no enum default", pathOrTop(path), sym)
	case strings.Contains(msg, "reader union lacking"):
		r.Type = "MISSING_UNION_BRANCH"
		r.Message = fmt.Sprintf("%s: {reader} has no union branch that can read %s written by {writer}", pathOrTop(path), avroType(writer))
	case strings.Contains(msg, "missing in writer schema and has no default"):
		r.Type = "READER_FIELD_MISSING_DEFAULT_VALUE"
		r.Message = fmt.Sprintf("%s: %s", pathOrTop(path), strings.NewReplacer("reader ", "{reader} ", "writer schema", "{writer}").Replace(msg))
	default:
		r.Type = "TYPE_MISMATCH"
		r.Message = fmt.Sprintf("%s: %s written by {writer} cannot be read as %s by {reader}", pathOrTop(path), avroType(writer), avroType(reader))
	}
	return r
}

func pathOrTop(path string) string {
	if path == "" {
		return "top-level type"
	}
	return "field " + path
}

func avroDeref(s avro.Schema) avro.Schema {
	if r, ok := s.(*avro.RefSchema); ok {
		return r.Schema()
	}
	return s
}

func avroNamesMatch(r, w avro.NamedSchema) bool {
	return r.Name() == w.Name() || slices.Contains(r.Aliases(), w.FullName())
}

// avroWriterField finds the writer's field for a reader field, by name or by
// one of the reader field's aliases, as Avro schema resolution does.
func avroWriterField(w *avro.RecordSchema, f *avro.Field) *avro.Field {
	for _, wf := range w.Fields() {
		if wf.Name() == f.Name() || slices.Contains(f.Aliases(), wf.Name()) {
			return wf
		}
	}
	return nil
}

// avroType renders a type for a person: primitives by name with any
// logical type, named types by full name, unions as [a,b].
func avroType(s avro.Schema) string {
	switch t := s.(type) {
	case *avro.RefSchema:
		return t.Schema().FullName()
	case *avro.PrimitiveSchema:
		if l := t.Logical(); l != nil {
			return fmt.Sprintf("%s(%s)", t.Type(), l.Type())
		}
		return string(t.Type())
	case *avro.EnumSchema:
		return fmt.Sprintf("enum %s[%s]", t.FullName(), strings.Join(t.Symbols(), ","))
	case *avro.FixedSchema:
		return fmt.Sprintf("fixed %s(%d)", t.FullName(), t.Size())
	case *avro.ArraySchema:
		return "array<" + avroType(t.Items()) + ">"
	case *avro.MapSchema:
		return "map<" + avroType(t.Values()) + ">"
	case *avro.UnionSchema:
		parts := make([]string, len(t.Types()))
		for i, b := range t.Types() {
			parts[i] = avroType(b)
		}
		return "[" + strings.Join(parts, ",") + "]"
	case avro.NamedSchema:
		return t.FullName()
	}
	return string(s.Type())
}

// fields flattens the record into field paths for diffing, descending into
// nested records (also inside optional unions, arrays and maps).
func (avroFormat) fields(p any) (string, []field) {
	s := avroDeref(p.(avro.Schema))
	root := avroType(s)
	var out []field
	avroFields(s, "", map[string]bool{}, &out)
	return root, out
}

func avroFields(s avro.Schema, path string, stack map[string]bool, out *[]field) {
	s = avroDeref(s)
	switch t := s.(type) {
	case *avro.RecordSchema:
		if stack[t.FullName()] {
			return
		}
		stack[t.FullName()] = true
		defer delete(stack, t.FullName())
		for i, f := range t.Fields() {
			fd := field{
				Path: joinPath(path, f.Name()), Parent: path, Name: f.Name(), Pos: i,
				Type: avroType(f.Type()), Aliases: f.Aliases(), HasDefault: f.HasDefault(), Optional: f.HasDefault(),
			}
			if f.HasDefault() {
				b, err := json.Marshal(f.Default())
				if err == nil {
					fd.Default = string(b)
				} else {
					fd.Default = fmt.Sprint(f.Default())
				}
			}
			*out = append(*out, fd)
			avroFields(f.Type(), fd.Path, stack, out)
		}
	case *avro.UnionSchema:
		for _, b := range t.Types() {
			avroFields(b, path, stack, out)
		}
	case *avro.ArraySchema:
		avroFields(t.Items(), path+"[]", stack, out)
	case *avro.MapSchema:
		avroFields(t.Values(), path+"{}", stack, out)
	}
}

func joinPath(parent, name string) string {
	if parent == "" {
		return name
	}
	return parent + "." + name
}
