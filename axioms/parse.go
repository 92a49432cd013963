package axioms

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"rulebook/rules"
)

// Error locates a problem in an axiom file as file:line:col.
type Error struct {
	File      string
	Line, Col int
	Msg       string
}

func (e *Error) Error() string { return fmt.Sprintf("%s:%d:%d: %s", e.File, e.Line, e.Col, e.Msg) }

// sexp is a parsed s-expression with its position.
type sexp struct {
	atom      string
	list      []*sexp
	isList    bool
	line, col int
}

func (s *sexp) describe() string {
	if s == nil {
		return "end of file"
	}
	if s.isList {
		return "a list"
	}
	return strconv.Quote(s.atom)
}

type reader struct {
	file      string
	src       string
	pos       int
	line, col int
	comment   string // last comment line read
	commentAt int    // line of that comment
}

func (r *reader) errorf(line, col int, format string, args ...any) error {
	return &Error{File: r.file, Line: line, Col: col, Msg: fmt.Sprintf(format, args...)}
}

func (r *reader) skipSpace() {
	for r.pos < len(r.src) {
		c := r.src[r.pos]
		switch {
		case c == '\n':
			r.pos, r.line, r.col = r.pos+1, r.line+1, 1
		case c == ' ' || c == '\t' || c == '\r':
			r.pos, r.col = r.pos+1, r.col+1
		case c == ';':
			end := strings.IndexByte(r.src[r.pos:], '\n')
			if end < 0 {
				end = len(r.src) - r.pos
			}
			r.comment = strings.TrimSpace(strings.TrimLeft(r.src[r.pos:r.pos+end], ";"))
			r.commentAt = r.line
			r.pos += end
		default:
			return
		}
	}
}

// read returns the next s-expression, or nil at end of input.
func (r *reader) read() (*sexp, error) { return r.readNested(0) }

// readNested reads an s-expression inside open lists. Nesting is bounded
// by rules.MaxDepth, as rule text is: Z3 and the checks walk terms
// recursively.
func (r *reader) readNested(open int) (*sexp, error) {
	r.skipSpace()
	if r.pos >= len(r.src) {
		return nil, nil
	}
	line, col := r.line, r.col
	switch c := r.src[r.pos]; c {
	case ')':
		return nil, r.errorf(line, col, "unexpected \")\"")
	case '(':
		if open == rules.MaxDepth {
			return nil, r.errorf(line, col, "lists nested more than %d deep (rulebook's limit)", rules.MaxDepth)
		}
		r.pos, r.col = r.pos+1, r.col+1
		s := &sexp{isList: true, line: line, col: col}
		for {
			r.skipSpace()
			if r.pos >= len(r.src) {
				return nil, r.errorf(line, col, "\"(\" is never closed")
			}
			if r.src[r.pos] == ')' {
				r.pos, r.col = r.pos+1, r.col+1
				return s, nil
			}
			item, err := r.readNested(open + 1)
			if err != nil {
				return nil, err
			}
			s.list = append(s.list, item)
		}
	case '|', '"':
		return nil, r.errorf(line, col, "quoted symbols and strings are not used in axiom files")
	default:
		start := r.pos
		for r.pos < len(r.src) && !strings.ContainsRune(" \t\r\n();", rune(r.src[r.pos])) {
			r.pos++
		}
		r.col += r.pos - start
		return &sexp{atom: r.src[start:r.pos], line: line, col: col}, nil
	}
}

// Parse reads the axioms of one file.
func Parse(file, src string, reg *rules.Registry) ([]*Axiom, error) {
	r := &reader{file: file, src: src, line: 1, col: 1}
	p := &interp{r: r, reg: reg, named: NamedValues(reg)}
	var out []*Axiom
	for {
		r.skipSpace()
		comment, commentAt := r.comment, r.commentAt
		startLine := r.line
		s, err := r.read()
		if err != nil {
			return nil, err
		}
		if s == nil {
			return out, nil
		}
		a, err := p.assertion(s)
		if err != nil {
			return nil, err
		}
		if comment == "" || commentAt != startLine-1 {
			return nil, r.errorf(s.line, s.col, "axiom %s needs a one-line comment, on the line above, saying what it states", a.Name)
		}
		a.Comment, a.File = comment, file
		r.comment = ""
		out = append(out, a)
	}
}

type interp struct {
	r     *reader
	reg   *rules.Registry
	named map[string]int
	apps  int // operator applications in the axiom being read
}

func (p *interp) expect(s *sexp, what string) error {
	if s == nil {
		return p.r.errorf(p.r.line, p.r.col, "expected %s, got end of file", what)
	}
	return p.r.errorf(s.line, s.col, "expected %s, got %s", what, s.describe())
}

// assertion reads (assert (! FORMULA :named NAME)).
func (p *interp) assertion(s *sexp) (*Axiom, error) {
	if !s.isList || len(s.list) == 0 || s.list[0].isList {
		return nil, p.expect(s, "(assert (! FORMULA :named NAME))")
	}
	switch head := s.list[0].atom; head {
	case "assert":
	case "declare-fun", "declare-sort", "declare-const", "define-fun":
		return nil, p.r.errorf(s.line, s.col, "%s: declarations come from the operator registry; axiom files hold only assertions", head)
	default:
		return nil, p.r.errorf(s.list[0].line, s.list[0].col, "expected \"assert\", got %q", head)
	}
	if len(s.list) != 2 {
		return nil, p.r.errorf(s.line, s.col, "expected (assert (! FORMULA :named NAME))")
	}
	bang := s.list[1]
	if !bang.isList || len(bang.list) != 4 || bang.list[0].atom != "!" || bang.list[2].atom != ":named" || bang.list[3].isList {
		return nil, p.expect(bang, "(! FORMULA :named NAME)")
	}
	a := &Axiom{Name: bang.list[3].atom, Line: s.line, Col: s.col}
	p.apps = 0
	formula := bang.list[1]
	vars := map[string]string{}
	if formula.isList && len(formula.list) == 3 && formula.list[0].atom == "forall" {
		decls := formula.list[1]
		if !decls.isList || len(decls.list) == 0 {
			return nil, p.expect(decls, "a list of (name Sort) variable declarations")
		}
		for _, d := range decls.list {
			if !d.isList || len(d.list) != 2 || d.list[0].isList || d.list[1].isList {
				return nil, p.expect(d, "(name Sort)")
			}
			name, sort := d.list[0].atom, d.list[1].atom
			if sort != TensorSort && sort != IntSort {
				return nil, p.r.errorf(d.list[1].line, d.list[1].col, "expected sort Tensor or Int, got %q", sort)
			}
			if _, dup := vars[name]; dup {
				return nil, p.r.errorf(d.line, d.col, "variable %s declared twice", name)
			}
			vars[name] = sort
			a.Vars = append(a.Vars, Var{Name: name, Sort: sort})
		}
		formula = formula.list[2]
	}
	if formula.isList && len(formula.list) == 3 && formula.list[0].atom == "=>" {
		g, err := p.guard(formula.list[1], vars, true)
		if err != nil {
			return nil, err
		}
		a.Guard, formula = g, formula.list[2]
	}
	if !formula.isList || len(formula.list) != 3 || formula.list[0].atom != "=" {
		return nil, p.expect(formula, "an equation (= LHS RHS) or a guarded one (=> GUARD (= LHS RHS))")
	}
	var err error
	if a.LHS, err = p.term(formula.list[1], vars, TensorSort); err != nil {
		return nil, err
	}
	if a.RHS, err = p.term(formula.list[2], vars, TensorSort); err != nil {
		return nil, err
	}
	return a, nil
}

// guard reads a condition over integer terms. Layout conditions are
// allowed only where top is set (the guard itself, or a conjunct of its
// top-level and): leaving one out for Z3 then weakens the guard.
func (p *interp) guard(s *sexp, vars map[string]string, top bool) (*Guard, error) {
	if !s.isList || len(s.list) < 2 || s.list[0].isList {
		return nil, p.expect(s, "a guard: (= a b), (>= a b), (<= a b), (and ...), (or ...), (not ...) over integers, or (no-sums x)")
	}
	switch op := s.list[0].atom; op {
	case "=", ">=", "<=":
		if len(s.list) != 3 {
			return nil, p.r.errorf(s.line, s.col, "%s in a guard takes two integers", op)
		}
		l, err := p.term(s.list[1], vars, IntSort)
		if err != nil {
			return nil, err
		}
		r, err := p.term(s.list[2], vars, IntSort)
		if err != nil {
			return nil, err
		}
		if !isIntLeaf(l) || !isIntLeaf(r) {
			return nil, p.r.errorf(s.line, s.col, "a guard compares integer variables and constants only")
		}
		return &Guard{Op: op, L: l, R: r}, nil
	case NoSums:
		if !top {
			return nil, p.r.errorf(s.line, s.col, "a layout condition (%s x) may only be the guard or a conjunct of its top-level and", NoSums)
		}
		if len(s.list) != 2 || s.list[1].isList || vars[s.list[1].atom] != TensorSort {
			return nil, p.r.errorf(s.line, s.col, "(%s x) takes one tensor variable", NoSums)
		}
		return &Guard{Op: op, L: &Term{Sym: s.list[1].atom, IsVar: true, Line: s.list[1].line, Col: s.list[1].col}}, nil
	case "and", "or", "not":
		if op == "not" && len(s.list) != 2 {
			return nil, p.r.errorf(s.line, s.col, "not takes one condition")
		}
		g := &Guard{Op: op}
		for _, a := range s.list[1:] {
			ag, err := p.guard(a, vars, top && op == "and")
			if err != nil {
				return nil, err
			}
			g.Args = append(g.Args, ag)
		}
		return g, nil
	default:
		if kind, ok := rules.CondKindOf(op); ok {
			return p.shapeGuard(s, vars, top, kind)
		}
		return nil, p.r.errorf(s.list[0].line, s.list[0].col, "expected =, >=, <=, and, or, not, %s or a shape condition in a guard, got %q", NoSums, op)
	}
}

// shapeGuard reads a shape condition, (kernel w 1 1): a tensor variable
// and positive integer literals, as a rule's condition is written.
func (p *interp) shapeGuard(s *sexp, vars map[string]string, top bool, kind rules.CondKind) (*Guard, error) {
	op := kind.Keyword()
	if !top {
		return nil, p.r.errorf(s.line, s.col, "a shape condition (%s x ...) may only be the guard or a conjunct of its top-level and", op)
	}
	if len(s.list) != 2+kind.Arity() || s.list[1].isList || vars[s.list[1].atom] != TensorSort {
		return nil, p.r.errorf(s.line, s.col, "(%s x ...) takes one tensor variable and %d positive integers", op, kind.Arity())
	}
	g := &Guard{Op: op, Kind: kind, L: &Term{Sym: s.list[1].atom, IsVar: true, Line: s.list[1].line, Col: s.list[1].col}}
	for i := range g.Dims {
		a := s.list[2+i]
		n, err := strconv.Atoi(a.atom)
		if a.isList || err != nil || n <= 0 {
			return nil, p.r.errorf(a.line, a.col, "(%s x ...) takes positive integer literals", op)
		}
		g.Dims[i] = n
	}
	return g, nil
}

func isIntLeaf(t *Term) bool { return t.IsInt || t.IsVar }

// term interprets s as a term of the wanted sort.
func (p *interp) term(s *sexp, vars map[string]string, want string) (*Term, error) {
	if !s.isList {
		if n, err := strconv.Atoi(s.atom); err == nil {
			return p.checkSort(&Term{IsInt: true, Int: n, Line: s.line, Col: s.col}, IntSort, want, s)
		}
		if sort, ok := vars[s.atom]; ok {
			return p.checkSort(&Term{Sym: s.atom, IsVar: true, Line: s.line, Col: s.col}, sort, want, s)
		}
		if v, ok := p.named[s.atom]; ok {
			return p.checkSort(&Term{IsInt: true, Int: v, Line: s.line, Col: s.col}, IntSort, want, s)
		}
		if op, _, ok := p.reg.LookupZ3(s.atom); ok && op.Arity == 0 && len(op.Params) == 0 {
			return p.checkSort(&Term{Sym: s.atom, Line: s.line, Col: s.col}, TensorSort, want, s)
		}
		return nil, p.r.errorf(s.line, s.col, "unknown symbol %q: expected a declared variable, an integer, a named value (%s) or an operator", s.atom, strings.Join(namedExamples(p.named), ", "))
	}
	if len(s.list) == 0 || s.list[0].isList {
		return nil, p.expect(s, "an operator application (op args...)")
	}
	head := s.list[0]
	if head.atom == "-" && len(s.list) == 2 && !s.list[1].isList {
		if n, err := strconv.Atoi(s.list[1].atom); err == nil {
			return p.checkSort(&Term{IsInt: true, Int: -n, Line: s.line, Col: s.col}, IntSort, want, s)
		}
	}
	if (head.atom == "+" || head.atom == "-") && len(s.list) == 3 {
		return p.arithmetic(s, vars, want)
	}
	op, _, ok := p.reg.LookupZ3(head.atom)
	if !ok {
		return nil, p.r.errorf(head.line, head.col, "unknown operator %q (expected one of %s)", head.atom, strings.Join(z3Names(p.reg), ", "))
	}
	args := s.list[1:]
	if len(args) != len(op.Params)+op.Arity {
		return nil, p.r.errorf(head.line, head.col, "%s takes %d parameters and %d tensors, got %d arguments", head.atom, len(op.Params), op.Arity, len(args))
	}
	if p.apps++; p.apps > rules.MaxNodes {
		return nil, p.r.errorf(head.line, head.col, "more than %d operator applications in one axiom (rulebook's limit)", rules.MaxNodes)
	}
	t := &Term{Sym: head.atom, Line: s.line, Col: s.col}
	for i, a := range args {
		sort := TensorSort
		if i < len(op.Params) {
			sort = IntSort
		}
		at, err := p.term(a, vars, sort)
		if err != nil {
			return nil, err
		}
		t.Args = append(t.Args, at)
	}
	return p.checkSort(t, TensorSort, want, s)
}

// arithmetic reads (+ a b) or (- a b) over integer variables and
// literals: a degree one above or below another, which keeps the axioms in
// linear arithmetic.
func (p *interp) arithmetic(s *sexp, vars map[string]string, want string) (*Term, error) {
	t := &Term{Sym: s.list[0].atom, Line: s.line, Col: s.col}
	for _, a := range s.list[1:] {
		at, err := p.term(a, vars, IntSort)
		if err != nil {
			return nil, err
		}
		if !isIntLeaf(at) {
			return nil, p.r.errorf(a.line, a.col, "%s in an axiom takes integer variables and constants only", t.Sym)
		}
		t.Args = append(t.Args, at)
	}
	return p.checkSort(t, IntSort, want, s)
}

func (p *interp) checkSort(t *Term, got, want string, s *sexp) (*Term, error) {
	if got != want {
		return nil, p.r.errorf(s.line, s.col, "expected %s here, got %s of sort %s", article(want), s.describe(), got)
	}
	return t, nil
}

func article(sort string) string {
	if sort == IntSort {
		return "an Int"
	}
	return "a " + sort
}

func z3Names(reg *rules.Registry) []string {
	var out []string
	for _, op := range reg.Ops() {
		out = append(out, op.Z3...)
	}
	return out
}

func namedExamples(named map[string]int) []string {
	var out []string
	for k := range named {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
