package rules

// Rule text is how rules are written, by hand and in canonical form.
// ParseRule reads it and Rule.Format writes it; what Format writes parses
// back to the same rule. The grammar, and what it does not say, is in
// docs/rules.md ("Rule text"). For example:
//
//	(matmul (matmul ?a ?b) ?c) => (matmul ?a (matmul ?b ?c))
//	(pool_avg 3 1 same ?a) => (conv2d 1 same none dw ?a (C_pool 3))

import (
	"fmt"
	"strings"
)

// Limits on one side of a rule; see the grammar above.
const (
	MaxDepth   = 256
	MaxNodes   = 1024
	MaxOutputs = 8
)

// SyntaxError locates a problem in rule text.
type SyntaxError struct {
	Line, Col int
	Msg       string
}

func (e *SyntaxError) Error() string { return fmt.Sprintf("%d:%d: %s", e.Line, e.Col, e.Msg) }

type token struct {
	text      string
	line, col int
}

// lexer reads tokens on demand, so that a parser that stops early (at a
// limit, say) has not tokenized the rest of a huge text.
type lexer struct {
	src       string
	i         int
	line, col int
	last      token // the last token read, for the end-of-text position
}

// next returns the next token, or one with empty text just after the last
// token at the end of the text.
func (l *lexer) next() token {
	for l.i < len(l.src) {
		c := l.src[l.i]
		switch {
		case c == '\n':
			l.line, l.col = l.line+1, 1
			l.i++
		case c == ' ' || c == '\t' || c == '\r':
			l.i, l.col = l.i+1, l.col+1
		case c == ';':
			for l.i < len(l.src) && l.src[l.i] != '\n' {
				l.i++
			}
		case c == '(' || c == ')':
			l.last = token{string(c), l.line, l.col}
			l.i, l.col = l.i+1, l.col+1
			return l.last
		default:
			j := l.i
			for j < len(l.src) && !strings.ContainsRune(" \t\r\n();", rune(l.src[j])) {
				j++
			}
			l.last = token{l.src[l.i:j], l.line, l.col}
			l.col += j - l.i
			l.i = j
			return l.last
		}
	}
	if l.last.text == "" {
		return token{line: 1, col: 1}
	}
	return token{line: l.last.line, col: l.last.col + len(l.last.text)}
}

type parser struct {
	reg    *Registry
	lex    lexer
	ahead  []token // read from lex, not yet consumed
	inputs map[string]int
	open   int // applications open at the current token
}

type nodeKey struct {
	op   *Op
	args string
}

type graphBuilder struct {
	g     *Graph
	nodes map[nodeKey]int
	vars  map[string]Value
	depth []int // per node: the longest chain of operators ending at it
}

// depthOf is the longest chain of operators ending at v.
func (b *graphBuilder) depthOf(v Value) int {
	if v.IsInput() {
		return 0
	}
	return b.depth[v.Node]
}

// peekAt returns the token k places ahead without consuming it.
func (p *parser) peekAt(k int) token {
	for len(p.ahead) <= k {
		p.ahead = append(p.ahead, p.lex.next())
	}
	return p.ahead[k]
}

func (p *parser) peek() token { return p.peekAt(0) }

func (p *parser) next() token {
	t := p.peek()
	p.ahead = p.ahead[1:]
	return t
}

func (p *parser) fail(t token, format string, args ...any) error {
	got := t.text
	if got == "" {
		got = "end of text"
	} else {
		got = fmt.Sprintf("%q", got)
	}
	return &SyntaxError{Line: t.line, Col: t.col, Msg: fmt.Sprintf(format, args...) + ", got " + got}
}

func (p *parser) expect(text string) error {
	if t := p.next(); t.text != text {
		return p.fail(t, "expected %q", text)
	}
	return nil
}

// ParseRule parses "SRC => DST" as written by Rule.Format; parse.go
// begins with the grammar it accepts.
func ParseRule(reg *Registry, text string) (*Rule, error) {
	p := newParser(reg, text)
	src, err := p.side()
	if err != nil {
		return nil, err
	}
	if err := p.expect("=>"); err != nil {
		return nil, err
	}
	dst, err := p.side()
	if err != nil {
		return nil, err
	}
	conds, err := p.conditions()
	if err != nil {
		return nil, err
	}
	if t := p.peek(); t.text != "" {
		return nil, p.fail(t, "expected end of rule")
	}
	if len(src.Outputs) != len(dst.Outputs) {
		return nil, &SyntaxError{Line: 1, Col: 1, Msg: fmt.Sprintf("source has %d outputs but target has %d", len(src.Outputs), len(dst.Outputs))}
	}
	r := &Rule{NumInputs: len(p.inputs), Src: *src, Dst: *dst, Conds: conds}
	r.Src.NumInputs, r.Dst.NumInputs = r.NumInputs, r.NumInputs
	return r, nil
}

// ParseGraph parses one side (the grammar's side), as written by
// FormatGraph.
func ParseGraph(reg *Registry, text string) (*Graph, error) {
	p := newParser(reg, text)
	g, err := p.side()
	if err != nil {
		return nil, err
	}
	if t := p.peek(); t.text != "" {
		return nil, p.fail(t, "expected end of graph")
	}
	g.NumInputs = len(p.inputs)
	return g, nil
}

func newParser(reg *Registry, text string) *parser {
	return &parser{reg: reg, lex: lexer{src: text, line: 1, col: 1}, inputs: map[string]int{}}
}

func (p *parser) side() (*Graph, error) {
	b := &graphBuilder{g: &Graph{}, nodes: map[nodeKey]int{}, vars: map[string]Value{}}
	if p.peek().text == "(" && p.peekAt(1).text == "let" {
		p.next()
		p.next()
		if err := p.expect("("); err != nil {
			return nil, err
		}
		var names []token
		for p.peek().text == "(" {
			p.next()
			name := p.next()
			names = append(names, name)
			if !strings.HasPrefix(name.text, "%") || !isName(name.text[1:]) {
				return nil, p.fail(name, "expected a binding name like %%0")
			}
			if _, dup := b.vars[name.text]; dup {
				return nil, p.fail(name, "binding %s is defined twice", name.text)
			}
			v, err := p.expr(b)
			if err != nil {
				return nil, err
			}
			b.vars[name.text] = v
			if err := p.expect(")"); err != nil {
				return nil, err
			}
		}
		if err := p.expect(")"); err != nil {
			return nil, err
		}
		if err := p.body(b); err != nil {
			return nil, err
		}
		if err := b.checkUsed(names); err != nil {
			return nil, err
		}
		return b.g, p.expect(")")
	}
	return b.g, p.body(b)
}

// checkUsed refuses a binding no output depends on: the canonical text
// drops such a node, so a rule holding one would not print back to itself.
func (b *graphBuilder) checkUsed(names []token) error {
	live := make([]bool, len(b.g.Nodes))
	var mark func(v Value)
	mark = func(v Value) {
		if v.IsInput() || live[v.Node] {
			return
		}
		live[v.Node] = true
		for _, a := range b.g.Nodes[v.Node].Args {
			mark(a)
		}
	}
	for _, o := range b.g.Outputs {
		mark(o)
	}
	for _, name := range names {
		if v := b.vars[name.text]; !v.IsInput() && !live[v.Node] {
			return &SyntaxError{Line: name.line, Col: name.col, Msg: fmt.Sprintf("binding %s is not used by any output", name.text)}
		}
	}
	return nil
}

func (p *parser) body(b *graphBuilder) error {
	if p.peek().text == "(" && p.peekAt(1).text == "outputs" {
		p.next()
		p.next()
		for p.peek().text != ")" {
			if len(b.g.Outputs) == MaxOutputs {
				t := p.peek()
				return &SyntaxError{Line: t.line, Col: t.col, Msg: fmt.Sprintf("more than %d outputs (rulebook's limit)", MaxOutputs)}
			}
			v, err := p.expr(b)
			if err != nil {
				return err
			}
			b.g.Outputs = append(b.g.Outputs, v)
		}
		if len(b.g.Outputs) < 2 {
			return p.fail(p.peek(), "expected two or more outputs")
		}
		return p.expect(")")
	}
	v, err := p.expr(b)
	if err != nil {
		return err
	}
	b.g.Outputs = []Value{v}
	return nil
}

func (p *parser) expr(b *graphBuilder) (Value, error) {
	t := p.next()
	switch {
	case strings.HasPrefix(t.text, "?") && len(t.text) > 1:
		if !isName(t.text[1:]) {
			return Value{}, p.fail(t, "expected an input ?name of letters, digits and _")
		}
		idx, ok := p.inputs[t.text]
		if !ok {
			idx = len(p.inputs)
			p.inputs[t.text] = idx
		}
		return InputValue(idx), nil
	case strings.HasPrefix(t.text, "%"):
		v, ok := b.vars[t.text]
		if !ok {
			return Value{}, p.fail(t, "binding %s is not defined before use", t.text)
		}
		return v, nil
	case t.text != "(":
		return Value{}, p.fail(t, "expected an input ?name, a binding %%name or an operator application")
	}
	if p.open == MaxDepth {
		return Value{}, &SyntaxError{Line: t.line, Col: t.col, Msg: fmt.Sprintf("operators nested more than %d deep (rulebook's limit)", MaxDepth)}
	}
	p.open++
	defer func() { p.open-- }()
	head := p.next()
	op, out, ok := p.reg.LookupZ3(head.text)
	if !ok {
		return Value{}, p.fail(head, "expected an operator (one of %s)", strings.Join(p.reg.Names(), ", "))
	}
	params := make([]int, len(op.Params))
	for i, spec := range op.Params {
		pt := p.next()
		v, err := spec.Parse(pt.text)
		if err != nil {
			return Value{}, &SyntaxError{Line: pt.line, Col: pt.col, Msg: fmt.Sprintf("%s: %v", head.text, err)}
		}
		params[i] = v
	}
	args := make([]Value, op.Arity)
	for i := range args {
		if p.peek().text == ")" {
			return Value{}, p.fail(p.peek(), "%s expects %d operands", head.text, op.Arity)
		}
		v, err := p.expr(b)
		if err != nil {
			return Value{}, err
		}
		args[i] = v
	}
	if t := p.next(); t.text != ")" {
		return Value{}, p.fail(t, "expected \")\" after %d operands of %s", op.Arity, head.text)
	}
	key := nodeKey{op: op, args: fmt.Sprint(params, args)}
	idx, ok := b.nodes[key]
	if !ok {
		if err := p.checkNew(b, head, args); err != nil {
			return Value{}, err
		}
		idx = len(b.g.Nodes)
		b.nodes[key] = idx
		b.g.Nodes = append(b.g.Nodes, Node{Op: op, Params: params, Args: args})
	}
	return Value{Node: idx, Out: out}, nil
}

// checkNew keeps a side within MaxNodes and MaxDepth as a node with
// operands args is added; let bindings can make a chain longer than the
// text is nested.
func (p *parser) checkNew(b *graphBuilder, head token, args []Value) error {
	if len(b.g.Nodes) == MaxNodes {
		return &SyntaxError{Line: head.line, Col: head.col, Msg: fmt.Sprintf("more than %d operators on one side (rulebook's limit)", MaxNodes)}
	}
	depth := 0
	for _, a := range args {
		depth = max(depth, b.depthOf(a))
	}
	if depth == MaxDepth {
		return &SyntaxError{Line: head.line, Col: head.col, Msg: fmt.Sprintf("a chain of more than %d operators through let bindings (rulebook's limit)", MaxDepth)}
	}
	b.depth = append(b.depth, depth+1)
	return nil
}

// isName reports whether s is a name an input or binding may carry: ASCII
// letters, digits and _, so that a rule reads back as it was written
// (a control character in a name was lost on writing; FuzzReadSexpr).
func isName(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range []byte(s) {
		if !(c == '_' || '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z') {
			return false
		}
	}
	return true
}
