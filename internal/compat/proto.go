package compat

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode"
)

// A small parser for .proto files: syntax, package, imports, messages
// (nested), fields with labels and numbers, maps, oneofs, reserved ranges
// and names, and enums. Options, services and extensions are read past. It
// checks what protoc would reject and Confluent's rules depend on: field
// numbers unique and in range, reserved numbers and names unused.

type protoTok struct {
	text      string
	str       bool // a string literal; text is its unquoted value
	line, col int
}

func protoLex(src string) ([]protoTok, error) {
	var toks []protoTok
	line, col := 1, 1
	rs := []rune(src)
	adv := func(n int) {
		for k := 0; k < n; k++ {
			if rs[0] == '\n' {
				line++
				col = 1
			} else {
				col++
			}
			rs = rs[1:]
		}
	}
	for len(rs) > 0 {
		r := rs[0]
		switch {
		case unicode.IsSpace(r):
			adv(1)
		case r == '/' && len(rs) > 1 && rs[1] == '/':
			for len(rs) > 0 && rs[0] != '\n' {
				adv(1)
			}
		case r == '/' && len(rs) > 1 && rs[1] == '*':
			l, c := line, col
			adv(2)
			for len(rs) > 1 && !(rs[0] == '*' && rs[1] == '/') {
				adv(1)
			}
			if len(rs) < 2 {
				return nil, &ParseError{Kind: Protobuf, Line: l, Column: c, Message: "unterminated /* comment"}
			}
			adv(2)
		case r == '"' || r == '\'':
			l, c := line, col
			q := r
			adv(1)
			var b strings.Builder
			for len(rs) > 0 && rs[0] != q {
				if rs[0] == '\n' {
					return nil, &ParseError{Kind: Protobuf, Line: l, Column: c, Message: "string literal runs past the end of the line"}
				}
				if rs[0] == '\\' && len(rs) > 1 {
					b.WriteRune(rs[0])
					adv(1)
				}
				b.WriteRune(rs[0])
				adv(1)
			}
			if len(rs) == 0 {
				return nil, &ParseError{Kind: Protobuf, Line: l, Column: c, Message: "unterminated string literal"}
			}
			adv(1)
			toks = append(toks, protoTok{text: b.String(), str: true, line: l, col: c})
		case unicode.IsLetter(r) || r == '_' || unicode.IsDigit(r) || r == '.':
			l, c := line, col
			n := 0
			for n < len(rs) && (unicode.IsLetter(rs[n]) || unicode.IsDigit(rs[n]) || rs[n] == '_' || rs[n] == '.' ||
				((rs[n] == '+' || rs[n] == '-') && n > 0 && (rs[n-1] == 'e' || rs[n-1] == 'E') && unicode.IsDigit(rs[0]))) {
				n++
			}
			toks = append(toks, protoTok{text: string(rs[:n]), line: l, col: c})
			adv(n)
		case strings.ContainsRune("{}[]()<>=;,-+:", r):
			toks = append(toks, protoTok{text: string(r), line: line, col: col})
			adv(1)
		default:
			return nil, &ParseError{Kind: Protobuf, Line: line, Column: col, Message: fmt.Sprintf("unexpected character %q", r)}
		}
	}
	return toks, nil
}

type protoFile struct {
	syntax   string
	pkg      string
	messages []*protoMessage // top level, in order
	enums    []*protoEnum
	// byName holds every message and enum by local name (Outer.Inner,
	// without the package).
	msgs  map[string]*protoMessage
	enumN map[string]*protoEnum
	toks  []protoTok
}

type protoMessage struct {
	name, local   string
	fields        []*protoField // all fields, oneof members included, in order
	oneofs        []*protoOneof
	nested        []*protoMessage
	reservedNums  [][2]int
	reservedNames []string
}

type protoOneof struct {
	name   string
	fields []*protoField
}

type protoField struct {
	name      string
	number    int
	label     string // "", "optional", "repeated", "required"
	typ       string // scalar or named type as written; "map" for maps
	key, val  string // map key and value types
	oneof     string
	scope     string // local name of the declaring message
	line, col int
}

type protoEnum struct {
	name, local string
	values      map[string]int
}

var protoScalars = map[string]string{
	"int32": "GENERAL_NUMBER", "int64": "GENERAL_NUMBER", "uint32": "GENERAL_NUMBER", "uint64": "GENERAL_NUMBER", "bool": "GENERAL_NUMBER",
	"sint32": "SIGNED_NUMBER", "sint64": "SIGNED_NUMBER",
	"string": "STRING_OR_BYTES", "bytes": "STRING_OR_BYTES",
	"fixed32": "FIXED32", "sfixed32": "FIXED32", "fixed64": "FIXED64", "sfixed64": "FIXED64",
	"float": "FLOAT", "double": "DOUBLE",
}

type protoParser struct {
	toks []protoTok
	i    int
	f    *protoFile
}

func (p *protoParser) errAt(t protoTok, format string, args ...any) error {
	return &ParseError{Kind: Protobuf, Line: t.line, Column: t.col, Message: fmt.Sprintf(format, args...)}
}

func (p *protoParser) peek() (protoTok, bool) {
	if p.i >= len(p.toks) {
		return protoTok{}, false
	}
	return p.toks[p.i], true
}

func (p *protoParser) last() protoTok {
	if len(p.toks) == 0 {
		return protoTok{line: 1, col: 1}
	}
	t := p.toks[len(p.toks)-1]
	t.col += len(t.text)
	return t
}

func (p *protoParser) next(what string) (protoTok, error) {
	t, ok := p.peek()
	if !ok {
		return t, p.errAt(p.last(), "unexpected end of file, expected %s", what)
	}
	p.i++
	return t, nil
}

func (p *protoParser) expect(s string) error {
	t, err := p.next(fmt.Sprintf("%q", s))
	if err != nil {
		return err
	}
	if t.str || t.text != s {
		return p.errAt(t, "expected %q, found %q", s, t.text)
	}
	return nil
}

func (p *protoParser) ident(what string) (protoTok, error) {
	t, err := p.next(what)
	if err != nil {
		return t, err
	}
	if t.str || !(unicode.IsLetter([]rune(t.text)[0]) || t.text[0] == '_' || t.text[0] == '.') {
		return t, p.errAt(t, "expected %s, found %q", what, t.text)
	}
	return t, nil
}

func (p *protoParser) is(s string) bool {
	t, ok := p.peek()
	return ok && !t.str && t.text == s
}

// skipStatement reads past an option or similar statement up to its ';',
// stepping over balanced brackets in aggregate values.
func (p *protoParser) skipStatement() error {
	depth := 0
	for {
		t, err := p.next("';'")
		if err != nil {
			return err
		}
		if t.str {
			continue
		}
		switch t.text {
		case "{", "[", "(":
			depth++
		case "}", "]", ")":
			depth--
		case ";":
			if depth <= 0 {
				return nil
			}
		}
	}
}

// skipBlock reads past a `name ... { ... }` block such as a service.
func (p *protoParser) skipBlock() error {
	for !p.is("{") {
		if _, err := p.next("'{'"); err != nil {
			return err
		}
	}
	depth := 0
	for {
		t, err := p.next("'}'")
		if err != nil {
			return err
		}
		if t.str {
			continue
		}
		if t.text == "{" {
			depth++
		}
		if t.text == "}" {
			depth--
			if depth == 0 {
				return nil
			}
		}
	}
}

func parseProto(src string) (*protoFile, error) {
	if strings.TrimSpace(src) == "" {
		return nil, &ParseError{Kind: Protobuf, Message: "the schema is empty"}
	}
	toks, err := protoLex(src)
	if err != nil {
		return nil, err
	}
	f := &protoFile{msgs: map[string]*protoMessage{}, enumN: map[string]*protoEnum{}, toks: toks, syntax: "proto2"}
	p := &protoParser{toks: toks, f: f}
	for {
		t, ok := p.peek()
		if !ok {
			break
		}
		switch {
		case t.str:
			return nil, p.errAt(t, "unexpected string %q at top level", t.text)
		case t.text == ";":
			p.i++
		case t.text == "syntax" || t.text == "edition":
			p.i++
			if err := p.expect("="); err != nil {
				return nil, err
			}
			v, err := p.next("a string")
			if err != nil {
				return nil, err
			}
			if !v.str {
				return nil, p.errAt(v, "expected a quoted %s, found %s", t.text, v.text)
			}
			if t.text == "syntax" && v.text != "proto2" && v.text != "proto3" {
				return nil, p.errAt(v, "unknown syntax %q; valid: proto2, proto3", v.text)
			}
			f.syntax = v.text
			if err := p.expect(";"); err != nil {
				return nil, err
			}
		case t.text == "package":
			p.i++
			n, err := p.ident("a package name")
			if err != nil {
				return nil, err
			}
			f.pkg = n.text
			if err := p.expect(";"); err != nil {
				return nil, err
			}
		case t.text == "import" || t.text == "option":
			p.i++
			if err := p.skipStatement(); err != nil {
				return nil, err
			}
		case t.text == "message":
			p.i++
			m, err := p.message("")
			if err != nil {
				return nil, err
			}
			f.messages = append(f.messages, m)
		case t.text == "enum":
			p.i++
			e, err := p.enum("")
			if err != nil {
				return nil, err
			}
			f.enums = append(f.enums, e)
		case t.text == "service" || t.text == "extend":
			p.i++
			if err := p.skipBlock(); err != nil {
				return nil, err
			}
		default:
			return nil, p.errAt(t, "unexpected %q at top level; expected syntax, package, import, option, message, enum or service", t.text)
		}
	}
	if len(f.messages) == 0 {
		return nil, &ParseError{Kind: Protobuf, Message: "the schema defines no message"}
	}
	return f, nil
}

func (p *protoParser) declare(t protoTok, local string) error {
	if _, ok := p.f.msgs[local]; ok {
		return p.errAt(t, "%q is already defined", local)
	}
	if _, ok := p.f.enumN[local]; ok {
		return p.errAt(t, "%q is already defined", local)
	}
	return nil
}

func (p *protoParser) message(scope string) (*protoMessage, error) {
	nt, err := p.ident("a message name")
	if err != nil {
		return nil, err
	}
	m := &protoMessage{name: nt.text, local: joinPath(scope, nt.text)}
	if err := p.declare(nt, m.local); err != nil {
		return nil, err
	}
	p.f.msgs[m.local] = m
	if err := p.expect("{"); err != nil {
		return nil, err
	}
	if err := p.messageBody(m, nil); err != nil {
		return nil, err
	}
	return m, p.validate(m)
}

// messageBody reads declarations up to the closing brace; inside a oneof,
// fields are added to the message and to the oneof.
func (p *protoParser) messageBody(m *protoMessage, oneof *protoOneof) error {
	for {
		t, err := p.next("'}'")
		if err != nil {
			return err
		}
		if t.str {
			return p.errAt(t, "unexpected string %q in message %s", t.text, m.local)
		}
		switch t.text {
		case "}":
			return nil
		case ";":
		case "option", "extensions":
			if err := p.skipStatement(); err != nil {
				return err
			}
		case "message":
			if oneof != nil {
				return p.errAt(t, "a message cannot be declared inside oneof %s", oneof.name)
			}
			n, err := p.message(m.local)
			if err != nil {
				return err
			}
			m.nested = append(m.nested, n)
		case "enum":
			if _, err := p.enum(m.local); err != nil {
				return err
			}
		case "extend":
			if err := p.skipBlock(); err != nil {
				return err
			}
		case "reserved":
			if err := p.reserved(m); err != nil {
				return err
			}
		case "oneof":
			if oneof != nil {
				return p.errAt(t, "oneofs cannot be nested")
			}
			n, err := p.ident("a oneof name")
			if err != nil {
				return err
			}
			o := &protoOneof{name: n.text}
			if err := p.expect("{"); err != nil {
				return err
			}
			if err := p.messageBody(m, o); err != nil {
				return err
			}
			m.oneofs = append(m.oneofs, o)
		case "group":
			return p.errAt(t, "proto2 groups are not supported; use a nested message")
		default:
			p.i--
			fd, err := p.field(m, oneof)
			if err != nil {
				return err
			}
			m.fields = append(m.fields, fd)
			if oneof != nil {
				oneof.fields = append(oneof.fields, fd)
			}
		}
	}
}

func (p *protoParser) field(m *protoMessage, oneof *protoOneof) (*protoField, error) {
	start, _ := p.peek()
	fd := &protoField{scope: m.local, line: start.line, col: start.col}
	if oneof != nil {
		fd.oneof = oneof.name
	}
	if !start.str && (start.text == "optional" || start.text == "repeated" || start.text == "required") {
		if oneof != nil {
			return nil, p.errAt(start, "fields in oneof %s cannot be %s", oneof.name, start.text)
		}
		if start.text == "required" && p.f.syntax == "proto3" {
			return nil, p.errAt(start, "required fields are not allowed in proto3")
		}
		fd.label = start.text
		p.i++
	}
	if p.is("map") && p.i+1 < len(p.toks) && p.toks[p.i+1].text == "<" {
		p.i += 2
		k, err := p.ident("a map key type")
		if err != nil {
			return nil, err
		}
		if err := p.expect(","); err != nil {
			return nil, err
		}
		v, err := p.ident("a map value type")
		if err != nil {
			return nil, err
		}
		if err := p.expect(">"); err != nil {
			return nil, err
		}
		fd.typ, fd.key, fd.val = "map", k.text, v.text
	} else {
		tt, err := p.ident("a field type")
		if err != nil {
			return nil, err
		}
		fd.typ = tt.text
	}
	nt, err := p.ident("a field name")
	if err != nil {
		return nil, err
	}
	fd.name = nt.text
	if err := p.expect("="); err != nil {
		return nil, err
	}
	num, err := p.next("a field number")
	if err != nil {
		return nil, err
	}
	n, perr := strconv.ParseInt(num.text, 0, 64)
	if num.str || perr != nil {
		return nil, p.errAt(num, "field %s: expected a field number, found %q", fd.name, num.text)
	}
	if n < 1 || n > 536870911 {
		return nil, p.errAt(num, "field %s: number %d is out of range 1..536870911", fd.name, n)
	}
	if n >= 19000 && n <= 19999 {
		return nil, p.errAt(num, "field %s: numbers 19000..19999 are reserved by Protocol Buffers", fd.name)
	}
	fd.number = int(n)
	if p.is("[") {
		if err := p.skipStatement(); err != nil {
			return nil, err
		}
		return fd, nil
	}
	return fd, p.expect(";")
}

func (p *protoParser) reserved(m *protoMessage) error {
	for {
		t, err := p.next("a reserved number or name")
		if err != nil {
			return err
		}
		if t.str {
			m.reservedNames = append(m.reservedNames, t.text)
		} else {
			lo, err := strconv.ParseInt(t.text, 0, 64)
			if err != nil {
				return p.errAt(t, "expected a reserved field number or a quoted name, found %q", t.text)
			}
			hi := lo
			if p.is("to") {
				p.i++
				ht, err := p.next("a number or max")
				if err != nil {
					return err
				}
				if ht.text == "max" {
					hi = 536870911
				} else if hi, err = strconv.ParseInt(ht.text, 0, 64); err != nil || hi < lo {
					return p.errAt(ht, "expected the end of the reserved range, found %q", ht.text)
				}
			}
			m.reservedNums = append(m.reservedNums, [2]int{int(lo), int(hi)})
		}
		t, err = p.next("',' or ';'")
		if err != nil {
			return err
		}
		if t.text == ";" {
			return nil
		}
		if t.text != "," {
			return p.errAt(t, "expected ',' or ';' in reserved, found %q", t.text)
		}
	}
}

func (p *protoParser) enum(scope string) (*protoEnum, error) {
	nt, err := p.ident("an enum name")
	if err != nil {
		return nil, err
	}
	e := &protoEnum{name: nt.text, local: joinPath(scope, nt.text), values: map[string]int{}}
	if err := p.declare(nt, e.local); err != nil {
		return nil, err
	}
	p.f.enumN[e.local] = e
	if err := p.expect("{"); err != nil {
		return nil, err
	}
	for {
		t, err := p.next("'}'")
		if err != nil {
			return nil, err
		}
		switch {
		case t.str:
			return nil, p.errAt(t, "unexpected string %q in enum %s", t.text, e.local)
		case t.text == "}":
			return e, nil
		case t.text == ";":
		case t.text == "option" || t.text == "reserved":
			if err := p.skipStatement(); err != nil {
				return nil, err
			}
		default:
			if err := p.expect("="); err != nil {
				return nil, err
			}
			neg := p.is("-")
			if neg {
				p.i++
			}
			vt, err := p.next("an enum value number")
			if err != nil {
				return nil, err
			}
			v, perr := strconv.ParseInt(vt.text, 0, 64)
			if perr != nil {
				return nil, p.errAt(vt, "enum value %s: expected a number, found %q", t.text, vt.text)
			}
			if neg {
				v = -v
			}
			e.values[t.text] = int(v)
			if p.is("[") {
				if err := p.skipStatement(); err != nil {
					return nil, err
				}
			} else if err := p.expect(";"); err != nil {
				return nil, err
			}
		}
	}
}

func (p *protoParser) validate(m *protoMessage) error {
	nums := map[int]*protoField{}
	names := map[string]bool{}
	for _, fd := range m.fields {
		at := protoTok{line: fd.line, col: fd.col}
		if prev, ok := nums[fd.number]; ok {
			return p.errAt(at, "field %s in %s reuses number %d of field %s", fd.name, m.local, fd.number, prev.name)
		}
		nums[fd.number] = fd
		if names[fd.name] {
			return p.errAt(at, "field %s is declared twice in %s", fd.name, m.local)
		}
		names[fd.name] = true
		for _, r := range m.reservedNums {
			if fd.number >= r[0] && fd.number <= r[1] {
				return p.errAt(at, "field %s in %s uses reserved number %d", fd.name, m.local, fd.number)
			}
		}
		if slices.Contains(m.reservedNames, fd.name) {
			return p.errAt(at, "field %s in %s uses a reserved name", fd.name, m.local)
		}
	}
	return nil
}

// resolve finds a named type the way protoc looks it up: from the innermost
// enclosing scope outward. Names it cannot find (imported types) come back
// as written, marked unresolved.
func (f *protoFile) resolve(name, scope string) (local string, isEnum, ok bool) {
	name = strings.TrimPrefix(name, ".")
	if f.pkg != "" {
		if rest, cut := strings.CutPrefix(name, f.pkg+"."); cut {
			if _, ok := f.msgs[rest]; ok {
				return rest, false, true
			}
			if _, ok := f.enumN[rest]; ok {
				return rest, true, true
			}
		}
	}
	for {
		cand := joinPath(scope, name)
		if _, ok := f.msgs[cand]; ok {
			return cand, false, true
		}
		if _, ok := f.enumN[cand]; ok {
			return cand, true, true
		}
		if scope == "" {
			return name, false, false
		}
		if i := strings.LastIndex(scope, "."); i >= 0 {
			scope = scope[:i]
		} else {
			scope = ""
		}
	}
}
