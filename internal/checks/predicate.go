package checks

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
	"sync"

	"github.com/dataworkers/dw/internal/warehouse"
)

// A predicate is user-written SQL, so it is never pasted into a
// statement. It is parsed into a small expression tree (comparisons,
// AND/OR/NOT, IS NULL, IN, BETWEEN, LIKE, arithmetic, literals, columns of
// the table and a few functions), every column is resolved against the
// catalog, and the tree is rendered again by the dialect. Anything outside
// that grammar (subqueries, comments, semicolons, other functions) is
// refused with the reason.

// allowedFunctions behave the same in DuckDB, BigQuery and Snowflake.
var allowedFunctions = map[string]int{ // name -> minimum arguments
	"ABS": 1, "COALESCE": 1, "GREATEST": 1, "LEAST": 1, "LENGTH": 1,
	"LOWER": 1, "NULLIF": 2, "ROUND": 1, "TRIM": 1, "UPPER": 1,
}

func allowedFunctionList() string {
	names := make([]string, 0, len(allowedFunctions))
	for n := range allowedFunctions {
		names = append(names, n)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

// keywords of the grammar; a few others are named so the error can say
// what is not supported rather than "unknown column".
var (
	grammarWords = map[string]bool{"AND": true, "OR": true, "NOT": true, "IS": true, "NULL": true, "IN": true,
		"BETWEEN": true, "LIKE": true, "TRUE": true, "FALSE": true}
	refusedWords = map[string]string{
		"SELECT": "subqueries are not allowed", "FROM": "subqueries are not allowed", "WITH": "subqueries are not allowed",
		"EXISTS": "subqueries are not allowed", "UNION": "subqueries are not allowed",
		"CASE": "CASE is not supported; use COALESCE, NULLIF or boolean operators",
		"CAST": "CAST is not supported; compare with a literal of the column's type",
	}
)

const maxPredicateLen = 2000
const maxPredicateDepth = 64

type tokKind int

const (
	tokEOF tokKind = iota
	tokIdent
	tokNumber
	tokString
	tokOp
	tokLParen
	tokRParen
	tokComma
)

type token struct {
	kind tokKind
	text string // identifier, number text, unquoted string value, or operator
	pos  int
}

// Compiled on first use, not at every agent's start (see warehouse.identRE).
var numberRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[0-9]+(\.[0-9]+)?([eE][+-]?[0-9]+)?`) })

func lex(src string) ([]token, error) {
	var out []token
	for i := 0; i < len(src); {
		c := src[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case c == ';':
			return nil, fmt.Errorf("predicate contains a semicolon at position %d: write one boolean expression, not statements", i+1)
		case strings.HasPrefix(src[i:], "--") || strings.HasPrefix(src[i:], "/*") || c == '#':
			return nil, fmt.Errorf("predicate contains a comment at position %d: comments are not allowed", i+1)
		case c == '"' || c == '`' || c == '[':
			return nil, fmt.Errorf("predicate quotes an identifier at position %d: write column names unquoted, as the catalog lists them", i+1)
		case c == '\'':
			var sb strings.Builder
			j := i + 1
			for ; j < len(src); j++ {
				if src[j] == '\'' {
					if j+1 < len(src) && src[j+1] == '\'' {
						sb.WriteByte('\'')
						j++
						continue
					}
					break
				}
				if src[j] == '\\' {
					return nil, fmt.Errorf("predicate string at position %d contains a backslash: backslashes are not allowed in literals", i+1)
				}
				sb.WriteByte(src[j])
			}
			if j >= len(src) {
				return nil, fmt.Errorf("predicate string starting at position %d is not closed", i+1)
			}
			out = append(out, token{tokString, sb.String(), i})
			i = j + 1
		case c >= '0' && c <= '9' || c == '.' && i+1 < len(src) && src[i+1] >= '0' && src[i+1] <= '9':
			text := src[i:]
			if c == '.' {
				text = "0" + text
			}
			m := numberRE().FindString(text)
			if m == "" {
				return nil, fmt.Errorf("predicate has a malformed number at position %d", i+1)
			}
			consumed := len(m)
			if c == '.' {
				consumed--
			}
			out = append(out, token{tokNumber, m, i})
			i += consumed
			if i < len(src) && isIdentByte(src[i]) {
				return nil, fmt.Errorf("predicate has a malformed number at position %d", i+1)
			}
		case isIdentStart(c):
			j := i
			for j < len(src) && isIdentByte(src[j]) {
				j++
			}
			out = append(out, token{tokIdent, src[i:j], i})
			i = j
		case c == '(':
			out = append(out, token{tokLParen, "(", i})
			i++
		case c == ')':
			out = append(out, token{tokRParen, ")", i})
			i++
		case c == ',':
			out = append(out, token{tokComma, ",", i})
			i++
		default:
			op := ""
			for _, cand := range []string{"<=", ">=", "<>", "!=", "||", "=", "<", ">", "+", "-", "*", "/", "."} {
				if strings.HasPrefix(src[i:], cand) {
					op = cand
					break
				}
			}
			if op == "" {
				return nil, fmt.Errorf("predicate has an unexpected character %q at position %d", c, i+1)
			}
			out = append(out, token{tokOp, op, i})
			i += len(op)
		}
	}
	return append(out, token{tokEOF, "", len(src)}), nil
}

func isIdentStart(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

func isIdentByte(c byte) bool { return isIdentStart(c) || c >= '0' && c <= '9' || c == '$' }

// expr is a parsed predicate node.
type expr interface {
	render(s *spelling) (string, error)
}

type (
	colRef  struct{ name string }
	numLit  struct{ text string }
	strLit  struct{ value string }
	boolLit struct{ value bool }
	nullLit struct{}
	binary  struct {
		op   string
		l, r expr
	}
	notExpr struct{ x expr }
	negExpr struct{ x expr }
	isNull  struct {
		x   expr
		not bool
	}
	inList struct {
		x     expr
		not   bool
		items []expr
	}
	between struct {
		x, lo, hi expr
		not       bool
	}
	likeExpr struct {
		x       expr
		not     bool
		pattern strLit
	}
	call struct {
		name string
		args []expr
	}
)

func (c colRef) render(s *spelling) (string, error) { return s.QuoteIdent(c.name), nil }
func (n numLit) render(*spelling) (string, error)   { return n.text, nil }
func (l strLit) render(s *spelling) (string, error) { return s.stringLiteral(l.value) }
func (b boolLit) render(*spelling) (string, error) {
	if b.value {
		return "TRUE", nil
	}
	return "FALSE", nil
}
func (nullLit) render(*spelling) (string, error) { return "NULL", nil }

func (b binary) render(s *spelling) (string, error) {
	l, err := b.l.render(s)
	if err != nil {
		return "", err
	}
	r, err := b.r.render(s)
	if err != nil {
		return "", err
	}
	op := b.op
	if op == "!=" {
		op = "<>"
	}
	return "(" + l + " " + op + " " + r + ")", nil
}

func (n notExpr) render(s *spelling) (string, error) {
	x, err := n.x.render(s)
	return "(NOT " + x + ")", err
}

func (n negExpr) render(s *spelling) (string, error) {
	x, err := n.x.render(s)
	return "(-" + x + ")", err
}

func (n isNull) render(s *spelling) (string, error) {
	x, err := n.x.render(s)
	if n.not {
		return "(" + x + " IS NOT NULL)", err
	}
	return "(" + x + " IS NULL)", err
}

func (n inList) render(s *spelling) (string, error) {
	x, err := n.x.render(s)
	if err != nil {
		return "", err
	}
	items := make([]string, len(n.items))
	for i, it := range n.items {
		if items[i], err = it.render(s); err != nil {
			return "", err
		}
	}
	op := " IN ("
	if n.not {
		op = " NOT IN ("
	}
	return "(" + x + op + strings.Join(items, ", ") + "))", nil
}

func (n between) render(s *spelling) (string, error) {
	x, err := n.x.render(s)
	if err != nil {
		return "", err
	}
	lo, err := n.lo.render(s)
	if err != nil {
		return "", err
	}
	hi, err := n.hi.render(s)
	if err != nil {
		return "", err
	}
	op := " BETWEEN "
	if n.not {
		op = " NOT BETWEEN "
	}
	return "(" + x + op + lo + " AND " + hi + ")", nil
}

func (n likeExpr) render(s *spelling) (string, error) {
	x, err := n.x.render(s)
	if err != nil {
		return "", err
	}
	p, err := n.pattern.render(s)
	op := " LIKE "
	if n.not {
		op = " NOT LIKE "
	}
	return "(" + x + op + p + ")", err
}

func (c call) render(s *spelling) (string, error) {
	args := make([]string, len(c.args))
	for i, a := range c.args {
		var err error
		if args[i], err = a.render(s); err != nil {
			return "", err
		}
	}
	return c.name + "(" + strings.Join(args, ", ") + ")", nil
}

// parser is a recursive-descent parser over the tokens of one predicate.
type parser struct {
	toks  []token
	i     int
	table *warehouse.Table
	d     warehouse.Dialect
	depth int
	cols  map[string]bool // catalog names referenced
}

// parsePredicate parses src against table's columns.
func parsePredicate(src string, table *warehouse.Table, d warehouse.Dialect) (expr, []string, error) {
	if strings.TrimSpace(src) == "" {
		return nil, nil, fmt.Errorf("predicate is empty: write one boolean expression over the table's columns, e.g. amount >= 0")
	}
	if len(src) > maxPredicateLen {
		return nil, nil, fmt.Errorf("predicate is %d characters; at most %d", len(src), maxPredicateLen)
	}
	toks, err := lex(src)
	if err != nil {
		return nil, nil, err
	}
	p := &parser{toks: toks, table: table, d: d, cols: map[string]bool{}}
	e, err := p.or()
	if err != nil {
		return nil, nil, err
	}
	if t := p.peek(); t.kind != tokEOF {
		return nil, nil, fmt.Errorf("predicate has unexpected %q at position %d: write exactly one expression", t.text, t.pos+1)
	}
	if !p.isBoolean(e) {
		return nil, nil, fmt.Errorf("predicate %q is not a boolean expression: compare something, e.g. amount >= 0 or status IN ('ok', 'retry')", src)
	}
	cols := make([]string, 0, len(p.cols))
	for c := range p.cols {
		cols = append(cols, c)
	}
	sort.Strings(cols)
	return e, cols, nil
}

func (p *parser) peek() token { return p.toks[p.i] }
func (p *parser) next() token { t := p.toks[p.i]; p.i++; return t }

func (p *parser) word(w string) bool {
	t := p.peek()
	if t.kind == tokIdent && strings.EqualFold(t.text, w) {
		p.i++
		return true
	}
	return false
}

func (p *parser) enter() error {
	p.depth++
	if p.depth > maxPredicateDepth {
		return fmt.Errorf("predicate nests deeper than %d levels", maxPredicateDepth)
	}
	return nil
}

func (p *parser) or() (expr, error) {
	if err := p.enter(); err != nil {
		return nil, err
	}
	defer func() { p.depth-- }()
	l, err := p.and()
	if err != nil {
		return nil, err
	}
	for p.word("OR") {
		r, err := p.and()
		if err != nil {
			return nil, err
		}
		l = binary{"OR", l, r}
	}
	return l, nil
}

func (p *parser) and() (expr, error) {
	l, err := p.not()
	if err != nil {
		return nil, err
	}
	for p.word("AND") {
		r, err := p.not()
		if err != nil {
			return nil, err
		}
		l = binary{"AND", l, r}
	}
	return l, nil
}

func (p *parser) not() (expr, error) {
	if p.word("NOT") {
		if err := p.enter(); err != nil {
			return nil, err
		}
		defer func() { p.depth-- }()
		x, err := p.not()
		if err != nil {
			return nil, err
		}
		return notExpr{x}, nil
	}
	return p.comparison()
}

func (p *parser) comparison() (expr, error) {
	l, err := p.additive()
	if err != nil {
		return nil, err
	}
	t := p.peek()
	if t.kind == tokOp {
		switch t.text {
		case "=", "<>", "!=", "<", "<=", ">", ">=":
			p.i++
			r, err := p.additive()
			if err != nil {
				return nil, err
			}
			return binary{t.text, l, r}, nil
		}
	}
	if p.word("IS") {
		not := p.word("NOT")
		if !p.word("NULL") {
			return nil, fmt.Errorf("predicate: expected NULL after IS at position %d", p.peek().pos+1)
		}
		return isNull{l, not}, nil
	}
	save := p.i
	not := p.word("NOT")
	switch {
	case p.word("IN"):
		if p.next().kind != tokLParen {
			return nil, fmt.Errorf("predicate: IN needs a parenthesised list of literals")
		}
		var items []expr
		for {
			it, err := p.literal()
			if err != nil {
				return nil, fmt.Errorf("predicate: IN lists hold literals only: %w", err)
			}
			items = append(items, it)
			t := p.next()
			if t.kind == tokRParen {
				break
			}
			if t.kind != tokComma {
				return nil, fmt.Errorf("predicate: expected , or ) in the IN list at position %d", t.pos+1)
			}
		}
		return inList{l, not, items}, nil
	case p.word("BETWEEN"):
		lo, err := p.additive()
		if err != nil {
			return nil, err
		}
		if !p.word("AND") {
			return nil, fmt.Errorf("predicate: BETWEEN needs AND at position %d", p.peek().pos+1)
		}
		hi, err := p.additive()
		if err != nil {
			return nil, err
		}
		return between{l, lo, hi, not}, nil
	case p.word("LIKE"):
		t := p.next()
		if t.kind != tokString {
			return nil, fmt.Errorf("predicate: LIKE needs a quoted pattern at position %d", t.pos+1)
		}
		return likeExpr{l, not, strLit{t.text}}, nil
	}
	if not {
		p.i = save
		return nil, fmt.Errorf("predicate: expected IN, BETWEEN or LIKE after NOT at position %d", p.toks[save].pos+1)
	}
	return l, nil
}

func (p *parser) additive() (expr, error) {
	l, err := p.multiplicative()
	if err != nil {
		return nil, err
	}
	for {
		t := p.peek()
		if t.kind != tokOp || (t.text != "+" && t.text != "-" && t.text != "||") {
			return l, nil
		}
		p.i++
		r, err := p.multiplicative()
		if err != nil {
			return nil, err
		}
		l = binary{t.text, l, r}
	}
}

func (p *parser) multiplicative() (expr, error) {
	l, err := p.unary()
	if err != nil {
		return nil, err
	}
	for {
		t := p.peek()
		if t.kind != tokOp || (t.text != "*" && t.text != "/") {
			return l, nil
		}
		p.i++
		r, err := p.unary()
		if err != nil {
			return nil, err
		}
		l = binary{t.text, l, r}
	}
}

func (p *parser) unary() (expr, error) {
	if t := p.peek(); t.kind == tokOp && t.text == "-" {
		p.i++
		if err := p.enter(); err != nil {
			return nil, err
		}
		defer func() { p.depth-- }()
		x, err := p.unary()
		if err != nil {
			return nil, err
		}
		return negExpr{x}, nil
	}
	return p.primary()
}

func (p *parser) literal() (expr, error) {
	t := p.next()
	switch t.kind {
	case tokNumber:
		return numLit{t.text}, nil
	case tokString:
		return strLit{t.text}, nil
	case tokOp:
		if t.text == "-" && p.peek().kind == tokNumber {
			return numLit{"-" + p.next().text}, nil
		}
	case tokIdent:
		switch strings.ToUpper(t.text) {
		case "TRUE":
			return boolLit{true}, nil
		case "FALSE":
			return boolLit{false}, nil
		case "NULL":
			return nullLit{}, nil
		}
	}
	return nil, fmt.Errorf("expected a literal at position %d, found %q", t.pos+1, t.text)
}

func (p *parser) primary() (expr, error) {
	t := p.peek()
	switch t.kind {
	case tokNumber, tokString:
		return p.literal()
	case tokLParen:
		p.i++
		if w := p.peek(); w.kind == tokIdent && strings.EqualFold(w.text, "SELECT") {
			return nil, fmt.Errorf("predicate contains a subquery at position %d: subqueries are not allowed", w.pos+1)
		}
		e, err := p.or()
		if err != nil {
			return nil, err
		}
		if c := p.next(); c.kind != tokRParen {
			return nil, fmt.Errorf("predicate: expected ) at position %d", c.pos+1)
		}
		return e, nil
	case tokIdent:
		up := strings.ToUpper(t.text)
		if why, ok := refusedWords[up]; ok {
			return nil, fmt.Errorf("predicate uses %s at position %d: %s", up, t.pos+1, why)
		}
		switch up {
		case "TRUE", "FALSE", "NULL":
			return p.literal()
		}
		if grammarWords[up] {
			return nil, fmt.Errorf("predicate: unexpected %s at position %d", up, t.pos+1)
		}
		p.i++
		if p.peek().kind == tokLParen {
			return p.call(t)
		}
		if n := p.peek(); n.kind == tokOp && n.text == "." {
			return nil, fmt.Errorf("predicate names %s.… at position %d: write column names alone, without a table or schema", t.text, t.pos+1)
		}
		col, err := p.table.Column(p.d, t.text)
		if err != nil {
			return nil, fmt.Errorf("predicate: %w", err)
		}
		p.cols[col.Name] = true
		return colRef{col.Name}, nil
	case tokEOF:
		return nil, fmt.Errorf("predicate ends early: an operand is missing")
	}
	return nil, fmt.Errorf("predicate: unexpected %q at position %d", t.text, t.pos+1)
}

func (p *parser) call(name token) (expr, error) {
	up := strings.ToUpper(name.text)
	minArgs, ok := allowedFunctions[up]
	if !ok {
		return nil, fmt.Errorf("predicate calls %s at position %d: only these functions are allowed: %s", name.text, name.pos+1, allowedFunctionList())
	}
	p.i++ // (
	var args []expr
	if p.peek().kind != tokRParen {
		for {
			a, err := p.or()
			if err != nil {
				return nil, err
			}
			args = append(args, a)
			if p.peek().kind != tokComma {
				break
			}
			p.i++
		}
	}
	if c := p.next(); c.kind != tokRParen {
		return nil, fmt.Errorf("predicate: expected ) closing %s at position %d", up, c.pos+1)
	}
	if len(args) < minArgs {
		return nil, fmt.Errorf("predicate: %s needs at least %d argument(s)", up, minArgs)
	}
	return call{up, args}, nil
}

// isBoolean reports whether e yields a boolean at its top.
func (p *parser) isBoolean(e expr) bool {
	switch n := e.(type) {
	case binary:
		switch n.op {
		case "AND", "OR", "=", "<>", "!=", "<", "<=", ">", ">=":
			return true
		}
	case notExpr, isNull, inList, between, likeExpr, boolLit:
		return true
	case colRef:
		c, err := p.table.Column(p.d, n.name)
		return err == nil && classify(p.d.Name(), c.Type) == kindBool
	case call:
		if n.name == "COALESCE" || n.name == "NULLIF" || n.name == "GREATEST" || n.name == "LEAST" {
			for _, a := range n.args {
				if p.isBoolean(a) {
					return true
				}
			}
		}
	}
	return false
}
