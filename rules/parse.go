package rules

import (
	"fmt"
	"strings"
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

func tokenize(src string) []token {
	var toks []token
	line, col := 1, 1
	for i := 0; i < len(src); {
		c := src[i]
		switch {
		case c == '\n':
			line, col = line+1, 1
			i++
		case c == ' ' || c == '\t' || c == '\r':
			i, col = i+1, col+1
		case c == ';':
			for i < len(src) && src[i] != '\n' {
				i++
			}
		case c == '(' || c == ')':
			toks = append(toks, token{string(c), line, col})
			i, col = i+1, col+1
		default:
			j := i
			for j < len(src) && !strings.ContainsRune(" \t\r\n();", rune(src[j])) {
				j++
			}
			toks = append(toks, token{src[i:j], line, col})
			col += j - i
			i = j
		}
	}
	return toks
}

type parser struct {
	reg    *Registry
	toks   []token
	pos    int
	inputs map[string]int
	end    token
}

type nodeKey struct {
	op   *Op
	args string
}

type graphBuilder struct {
	g     *Graph
	nodes map[nodeKey]int
	vars  map[string]Value
}

func (p *parser) peek() token {
	if p.pos < len(p.toks) {
		return p.toks[p.pos]
	}
	return p.end
}

func (p *parser) next() token {
	t := p.peek()
	p.pos++
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

// ParseRule parses "SRC => DST" as written by Rule.Format.
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
	if t := p.peek(); t.text != "" {
		return nil, p.fail(t, "expected end of rule")
	}
	if len(src.Outputs) != len(dst.Outputs) {
		return nil, &SyntaxError{Line: 1, Col: 1, Msg: fmt.Sprintf("source has %d outputs but target has %d", len(src.Outputs), len(dst.Outputs))}
	}
	r := &Rule{NumInputs: len(p.inputs), Src: *src, Dst: *dst}
	r.Src.NumInputs, r.Dst.NumInputs = r.NumInputs, r.NumInputs
	return r, nil
}

// ParseGraph parses one side, as written by FormatGraph.
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
	toks := tokenize(text)
	end := token{line: 1, col: 1}
	if len(toks) > 0 {
		last := toks[len(toks)-1]
		end = token{line: last.line, col: last.col + len(last.text)}
	}
	return &parser{reg: reg, toks: toks, inputs: map[string]int{}, end: end}
}

func (p *parser) side() (*Graph, error) {
	b := &graphBuilder{g: &Graph{}, nodes: map[nodeKey]int{}, vars: map[string]Value{}}
	if p.peek().text == "(" && p.pos+1 < len(p.toks) && p.toks[p.pos+1].text == "let" {
		p.pos += 2
		if err := p.expect("("); err != nil {
			return nil, err
		}
		for p.peek().text == "(" {
			p.next()
			name := p.next()
			if !strings.HasPrefix(name.text, "%") || len(name.text) < 2 {
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
		return b.g, p.expect(")")
	}
	return b.g, p.body(b)
}

func (p *parser) body(b *graphBuilder) error {
	if p.peek().text == "(" && p.pos+1 < len(p.toks) && p.toks[p.pos+1].text == "outputs" {
		p.pos += 2
		for p.peek().text != ")" {
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
		idx = len(b.g.Nodes)
		b.nodes[key] = idx
		b.g.Nodes = append(b.g.Nodes, Node{Op: op, Params: params, Args: args})
	}
	return Value{Node: idx, Out: out}, nil
}
