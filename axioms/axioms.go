// Package axioms loads operator properties written as SMT-LIB2 named
// assertions, one file per operator family. It parses them against the
// operator registry, which supplies the sort, the operator functions and the
// named parameter values. Validate checks every axiom on concrete tensors.
// docs/design.md ("How verification decides a rule") shows the file format.
package axioms

import (
	"embed"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/zeebo/xxh3"

	"rulebook/internal/infile"
	"rulebook/rules"
)

// Sort names of the SMT encoding.
const (
	TensorSort = "Tensor"
	IntSort    = "Int"
)

// Var is a quantified variable.
type Var struct {
	Name, Sort string
}

// Term is a node of an axiom's formula: an application of a registry
// function symbol, a variable or an integer.
type Term struct {
	Sym       string  // function symbol, or variable name when IsVar
	Args      []*Term // operands of an application: parameters, then tensors
	IsVar     bool
	IsInt     bool
	Int       int
	Line, Col int
}

// Axiom is one named equation, universally quantified over Vars, that
// holds where its guard (if any) does.
type Axiom struct {
	Name    string
	Comment string // the one-line comment above the assertion
	File    string
	Line    int
	Col     int
	Vars    []Var
	Guard   *Guard // nil: unconditional
	LHS     *Term
	RHS     *Term
}

// Guard is a condition on integer parameters: (= a b), (>= a b), (<= a b),
// (and ...), (or ...) or (not ...), so that one axiom can state a property
// for the axes or degrees where it holds. A conjunct of the guard may also
// be a layout condition on a tensor variable, (no-sums x): x holds no
// partial sums. Z3 does not model layouts, so the solver's formula leaves
// layout conditions out (SolverFormula) and the verifier tests the proofs
// that use such an axiom at other layouts (verify.ConditionalAxioms).
//
// A conjunct may also be a shape condition on a tensor variable, written
// as a rule's condition is (rules.Condition): (kernel w 1 1), w is a
// kernel of height and width 1. Z3 sees it as an uninterpreted predicate
// (Declarations), which only a rule with the same condition asserts, so
// such an axiom proves conditioned rules and no others; the concrete
// check decides it at each shape.
type Guard struct {
	Op   string   // "=", ">=", "<=", "and", "or", "not", a layout condition (NoSums), or a shape condition's keyword
	Args []*Guard // operands of and/or/not
	L, R *Term    // operands of a comparison; L is the tensor variable of a layout or shape condition
	// Kind and Dims are a shape condition's (Kind 0 for other guards).
	Kind rules.CondKind
	Dims [2]int
}

// NoSums is the layout condition (no-sums x): x holds no partial sums.
const NoSums = "no-sums"

// IsLayout reports whether the guard is a layout condition.
func (g *Guard) IsLayout() bool { return g.Op == NoSums }

// IsShape reports whether the guard is a shape condition.
func (g *Guard) IsShape() bool { return g.Kind != 0 }

// ShapeConditions lists the guard's shape conditions: the guard itself or
// the conjuncts of a top-level and (the parser allows them nowhere else).
func (g *Guard) ShapeConditions() []*Guard {
	switch {
	case g == nil:
		return nil
	case g.IsShape():
		return []*Guard{g}
	case g.Op != "and":
		return nil
	}
	var out []*Guard
	for _, a := range g.Args {
		if a.IsShape() {
			out = append(out, a)
		}
	}
	return out
}

// ShapeHolds decides a shape condition at the shapes of the tensor
// variables.
func (g *Guard) ShapeHolds(shapes map[string]rules.Shape) bool {
	s, ok := shapes[g.L.Sym]
	return !ok || rules.Condition{Kind: g.Kind, Dims: g.Dims}.Holds(s)
}

// Holds evaluates the guard with integer variables bound by env. Layout
// and shape conditions hold here; LayoutHolds and ShapeHolds decide them
// once shapes are known.
func (g *Guard) Holds(env map[string]int) bool {
	if g.IsShape() {
		return true
	}
	switch g.Op {
	case NoSums:
		return true
	case "=":
		return g.L.IntValue(env) == g.R.IntValue(env)
	case ">=":
		return g.L.IntValue(env) >= g.R.IntValue(env)
	case "<=":
		return g.L.IntValue(env) <= g.R.IntValue(env)
	case "not":
		return !g.Args[0].Holds(env)
	case "and":
		for _, a := range g.Args {
			if !a.Holds(env) {
				return false
			}
		}
		return true
	}
	for _, a := range g.Args {
		if a.Holds(env) {
			return true
		}
	}
	return false
}

// LayoutConditions lists the guard's layout conditions: the guard itself
// or the conjuncts of a top-level and (the parser allows them nowhere
// else).
func (g *Guard) LayoutConditions() []*Guard {
	switch {
	case g == nil:
		return nil
	case g.IsLayout():
		return []*Guard{g}
	case g.Op != "and":
		return nil
	}
	var out []*Guard
	for _, a := range g.Args {
		if a.IsLayout() {
			out = append(out, a)
		}
	}
	return out
}

// LayoutHolds decides a layout condition at the shapes of the tensor
// variables.
func (g *Guard) LayoutHolds(shapes map[string]rules.Shape) bool {
	s, ok := shapes[g.L.Sym]
	return !ok || s.SumDegree() == 1
}

// withoutLayout is the guard with its layout conditions left out; nil when
// nothing is left.
func (g *Guard) withoutLayout() *Guard {
	switch {
	case g == nil || g.IsLayout():
		return nil
	case g.Op != "and":
		return g
	}
	out := &Guard{Op: "and"}
	for _, a := range g.Args {
		if !a.IsLayout() {
			out.Args = append(out.Args, a)
		}
	}
	switch len(out.Args) {
	case 0:
		return nil
	case 1:
		return out.Args[0]
	}
	return out
}

// IntValue evaluates an integer term: a literal, a variable, or a sum or
// difference of such.
func (t *Term) IntValue(env map[string]int) int {
	switch {
	case t.IsInt:
		return t.Int
	case t.IsVar:
		return env[t.Sym]
	case t.Sym == "+":
		return t.Args[0].IntValue(env) + t.Args[1].IntValue(env)
	case t.Sym == "-":
		return t.Args[0].IntValue(env) - t.Args[1].IntValue(env)
	}
	return env[t.Sym]
}

func (g *Guard) String() string {
	if g.IsShape() {
		return fmt.Sprintf("(%s %s %d %d)", g.Op, g.L, g.Dims[0], g.Dims[1])
	}
	switch g.Op {
	case "=", ">=", "<=":
		return "(" + g.Op + " " + g.L.String() + " " + g.R.String() + ")"
	case NoSums:
		return "(" + NoSums + " " + g.L.String() + ")"
	}
	parts := []string{g.Op}
	for _, a := range g.Args {
		parts = append(parts, a.String())
	}
	return "(" + strings.Join(parts, " ") + ")"
}

// Set is the axioms of a directory, sorted by name.
type Set struct {
	Dir    string
	Axioms []*Axiom
	// Hash identifies the set: the registry's signatures and every axiom's
	// name and formula, not its comment or layout.
	Hash string
}

// builtin holds this package's own axiom files, so that the binary carries
// the default axiom set and works outside the repository.
//
//go:embed *.smt2
var builtin embed.FS

// BuiltinDir is how a Set loaded by Builtin names its folder.
const BuiltinDir = "(built in)"

// Builtin parses the axiom files compiled into the binary: the *.smt2
// files of this package's folder at build time.
func Builtin(reg *rules.Registry) (*Set, error) { return load(builtin, BuiltinDir, reg) }

// Load parses every *.smt2 file of dir, each read through the input layer
// (a regular file, symbolic links followed, at most infile.Axioms.Limit()
// bytes), so that a FIFO named x.smt2 cannot hang it.
func Load(dir string, reg *rules.Registry) (*Set, error) {
	return load(axiomDir{os.DirFS(dir), dir}, dir, reg)
}

// axiomDir lists dir as os.DirFS does, and reads its files through
// infile (fs.ReadFile uses ReadFile when the FS has it).
type axiomDir struct {
	fs.FS
	dir string
}

func (d axiomDir) ReadFile(name string) ([]byte, error) {
	return infile.ReadFile(filepath.Join(d.dir, name), infile.Axioms)
}

// load parses every *.smt2 file at the top of fsys, naming files as in dir.
func load(fsys fs.FS, dir string, reg *rules.Registry) (*Set, error) {
	names, err := fs.Glob(fsys, "*.smt2")
	if err != nil {
		return nil, err
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("%s: no *.smt2 axiom files", dir)
	}
	slices.Sort(names)
	set := &Set{Dir: dir}
	seen := map[string]*Axiom{}
	for _, name := range names {
		src, err := fs.ReadFile(fsys, name)
		if err != nil {
			return nil, err
		}
		axs, err := Parse(filepath.Join(dir, name), string(src), reg)
		if err != nil {
			return nil, err
		}
		for _, a := range axs {
			if prev, dup := seen[a.Name]; dup {
				return nil, fmt.Errorf("%s:%d:%d: axiom %s is already defined at %s:%d", a.File, a.Line, a.Col, a.Name, prev.File, prev.Line)
			}
			seen[a.Name] = a
			set.Axioms = append(set.Axioms, a)
		}
	}
	slices.SortFunc(set.Axioms, func(a, b *Axiom) int { return strings.Compare(a.Name, b.Name) })
	h := xxh3.New()
	_, _ = h.WriteString(Declarations(reg))
	for _, a := range set.Axioms {
		_, _ = h.WriteString(a.Name + " " + a.Formula() + "\n")
	}
	set.Hash = fmt.Sprintf("%016x", h.Sum64())
	return set, nil
}

// Lookup finds an axiom by name.
func (s *Set) Lookup(name string) (*Axiom, bool) {
	for _, a := range s.Axioms {
		if a.Name == name {
			return a, true
		}
	}
	return nil, false
}

// Declarations is the SMT-LIB2 preamble generated from the registry: the
// Tensor sort, one function per operator output and one constant per named
// parameter value.
func Declarations(reg *rules.Registry) string {
	var b strings.Builder
	fmt.Fprintf(&b, "(declare-sort %s 0)\n", TensorSort)
	for _, op := range reg.Ops() {
		var dom []string
		for range op.Params {
			dom = append(dom, IntSort)
		}
		for i := 0; i < op.Arity; i++ {
			dom = append(dom, TensorSort)
		}
		for _, sym := range op.Z3 {
			fmt.Fprintf(&b, "(declare-fun %s (%s) %s)\n", sym, strings.Join(dom, " "), TensorSort)
		}
	}
	b.WriteString(ConditionDeclarations())
	for _, name := range slices.Sorted(mapsKeys(NamedValues(reg))) {
		fmt.Fprintf(&b, "; %s = %d\n", name, NamedValues(reg)[name])
	}
	return b.String()
}

// ConditionDeclarations declares the shape conditions' predicates
// (rules.CondKinds): "kernel" over a tensor and two integers.
func ConditionDeclarations() string {
	var b strings.Builder
	for _, k := range rules.CondKinds() {
		dom := []string{TensorSort}
		for range k.Arity() {
			dom = append(dom, IntSort)
		}
		fmt.Fprintf(&b, "(declare-fun %s (%s) Bool)\n", k.Keyword(), strings.Join(dom, " "))
	}
	return b.String()
}

func mapsKeys(m map[string]int) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// NamedValues maps "param.symbol" (padding.same, activation.relu) to the
// integer the registry and the SMT encoding use.
func NamedValues(reg *rules.Registry) map[string]int {
	out := map[string]int{}
	for _, op := range reg.Ops() {
		for _, p := range op.Params {
			for i, s := range p.Symbols {
				out[p.Name+"."+s] = i
			}
		}
	}
	return out
}

// Formula prints the axiom as an SMT-LIB2 formula with named values
// replaced by integers, layout conditions included: the text that
// identifies it (Set.Hash) and reads back.
func (a *Axiom) Formula() string { return a.formula(a.Guard) }

// SolverFormula is the formula Z3 gets: Formula without the layout
// conditions, which Z3 cannot state. It is stronger than the axiom where
// the axiom has such a condition (Conditional).
func (a *Axiom) SolverFormula() string { return a.formula(a.Guard.withoutLayout()) }

// Conditional reports whether the axiom holds only under a layout
// condition.
func (a *Axiom) Conditional() bool { return len(a.Guard.LayoutConditions()) > 0 }

// ShapeConditioned reports whether the axiom holds only under a shape
// condition: only a rule with that condition can use it.
func (a *Axiom) ShapeConditioned() bool { return len(a.Guard.ShapeConditions()) > 0 }

func (a *Axiom) formula(guard *Guard) string {
	body := "(= " + a.LHS.String() + " " + a.RHS.String() + ")"
	if guard != nil {
		body = "(=> " + guard.String() + " " + body + ")"
	}
	if len(a.Vars) == 0 {
		return body
	}
	var vs []string
	for _, v := range a.Vars {
		vs = append(vs, "("+v.Name+" "+v.Sort+")")
	}
	return "(forall (" + strings.Join(vs, " ") + ") " + body + ")"
}

// String prints a term in SMT-LIB2 syntax.
func (t *Term) String() string {
	switch {
	case t.IsInt:
		if t.Int < 0 {
			return fmt.Sprintf("(- %d)", -t.Int)
		}
		return fmt.Sprint(t.Int)
	case t.IsVar, len(t.Args) == 0:
		return t.Sym
	}
	parts := []string{t.Sym}
	for _, a := range t.Args {
		parts = append(parts, a.String())
	}
	return "(" + strings.Join(parts, " ") + ")"
}
