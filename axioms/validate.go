package axioms

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"slices"
	"strings"

	"rulebook/fingerprint"
	"rulebook/internal/pool"
	"rulebook/internal/progress"
	"rulebook/rules"
)

// Bound limits the concrete check: every tensor shape of rank ≤ MaxRank
// whose extents are in Dims, every parameter value in the registry's check
// values.
type Bound struct {
	Dims    []int
	MaxRank int
	Seed    uint64
	// Combined also sweeps each parallel axiom at combined layouts
	// (layouts.go): every per-dimension, sum and copy degree together.
	Combined bool
	// Progress hears how many axioms are checked of how many, as stage
	// "concrete", from the workers as each one finishes.
	Progress progress.Func
}

// DefaultBound checks every shape up to rank 4 with extents 1 to 3, and
// the parallel axioms at combined layouts: the check of 'rulebook axioms
// check' and of the gate before verify (some axioms fail only at extent 3,
// such as pool_max 3 1 same applied twice being pool_max applied once).
func DefaultBound() Bound { return Bound{Dims: []int{1, 2, 3}, MaxRank: 4, Seed: 1, Combined: true} }

// ShippedDigest is the Digest of the shipped axiom files, which
// TestShippedAxiomsHoldConcretely checks under DefaultBound: a set with
// this digest has passed the concrete check already, so verify's gate
// need not make it again. Change it only with the files, and only once
// that test passes.
const ShippedDigest = "3c29aa2c44a47e96820cf514d8b55fba79485a946b0e46583ce5dce7049408b3"

// Digest is SHA-256 over every axiom's name and formula, in order. Unlike
// Hash (a quick identity), it is a cryptographic hash, so that no other
// set can be made to pass for one that was checked.
func (s *Set) Digest() string {
	h := sha256.New()
	for _, a := range s.Axioms {
		fmt.Fprintf(h, "%s\t%s\n", a.Name, a.Formula())
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Report is the concrete check of one axiom under the registry's exact
// (modular) and float64 semantics.
type Report struct {
	Axiom *Axiom
	// Instances counts the parameter and shape assignments where both
	// sides are defined; the axiom is compared at each.
	Instances int
	// Counterexample says where the sides differ, or, when no instance has
	// both sides defined, where one side is defined and the other is not.
	Counterexample string
}

// OK reports whether the axiom held wherever it was checked, at least once.
func (r Report) OK() bool { return r.Counterexample == "" && r.Instances > 0 }

// Validate evaluates every axiom of the set on concrete tensors, on
// workers goroutines.
func Validate(ctx context.Context, set *Set, reg *rules.Registry, b Bound, workers int) ([]Report, error) {
	out := make([]Report, len(set.Axioms))
	tick := b.Progress.Counter("concrete", len(set.Axioms))
	err := pool.Each(ctx, workers, len(set.Axioms), func(_, i int) error {
		a := set.Axioms[i]
		r, err := validateAxiom(ctx, a, reg, b)
		if err != nil {
			return fmt.Errorf("axiom %s: %w", a.Name, err)
		}
		out[i] = r
		tick()
		return nil
	})
	if ctxErr := ctx.Err(); ctxErr != nil {
		return nil, ctxErr
	}
	if err != nil {
		return nil, err
	}
	return out, nil
}

// slot is something to assign a shape to: a tensor variable or a constant
// (a constant's shape is whatever makes the rewrite fit).
type slot struct {
	name  string
	term  *Term // the constant's term; nil for a variable
	isVar bool
}

type checker struct {
	reg    *rules.Registry
	b      Bound
	a      *Axiom
	shapes []rules.Shape // every shape within the bound
	slots  []slot
	ints   map[string]int
	report *Report
	// Shape inference is cached by interned shape ids: the search asks the
	// same question (this operator on these shapes) many times, and a
	// failed inference formats an error.
	slotOf   map[*Term]string
	shapeTab rules.ShapeTable
	infer    map[inferKey]inferResult
	opIndex  map[*rules.Op]int32
	// the compiled sides and the search state over them
	nodes      []cnode
	lhs, rhs   int
	assignID   []int32 // per slot; −1 while unassigned
	candidates []int32 // ids of c.shapes
	ids        []int32
	st         []status
	failedAt   []int // per node: the node whose inference failed, or −1
	argBuf     []int32
	// partial is the first instance where one side is defined and the
	// other is not, used when no instance has both sides defined.
	partial   string
	hasConst  bool
	piecewise bool // float draws are needed only for relu and max
}

func validateAxiom(ctx context.Context, a *Axiom, reg *rules.Registry, b Bound) (Report, error) {
	c := &checker{reg: reg, b: b, a: a, report: &Report{Axiom: a},
		slotOf: map[*Term]string{}, infer: map[inferKey]inferResult{}, opIndex: map[*rules.Op]int32{}}
	c.shapes = allShapes(b)
	if usesParallelOps(a, reg) {
		c.shapes = layoutShapes(b)
		if usesImageOps(a, reg) {
			c.shapes = imageLayoutShapes()
		}
	}
	domains, err := c.intDomains()
	if err != nil {
		return *c.report, err
	}
	for _, v := range a.Vars {
		if v.Sort == TensorSort {
			c.slots = append(c.slots, slot{name: v.Name, isVar: true})
		}
	}
	seen := map[string]bool{}
	for _, side := range []*Term{a.LHS, a.RHS} {
		walk(side, func(t *Term) {
			if op, _, ok := reg.LookupZ3(t.Sym); ok && !t.IsVar {
				params, _ := c.split(op, t)
				c.piecewise = c.piecewise || op.Piecewise != nil && (op.Piecewise(params) || !allInts(t, len(op.Params)))
			}
			if op, _, ok := reg.LookupZ3(t.Sym); ok && !t.IsVar && op.IsConstant() {
				c.slotOf[t] = t.String()
				if !seen[t.String()] {
					seen[t.String()] = true
					c.slots = append(c.slots, slot{name: t.String(), term: t})
					c.hasConst = true
				}
			}
		})
	}
	c.lhs, c.rhs = c.compile()
	c.ids, c.st, c.failedAt = make([]int32, len(c.nodes)), make([]status, len(c.nodes)), make([]int, len(c.nodes))
	c.assignID = make([]int32, len(c.slots))
	for _, s := range c.shapes {
		c.candidates = append(c.candidates, c.shapeTab.Intern(s))
	}
	var intVars []string
	for _, v := range a.Vars {
		if v.Sort == IntSort {
			intVars = append(intVars, v.Name)
		}
	}
	c.ints = map[string]int{}
	var paramLoop func(i int) error
	paramLoop = func(i int) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		if i == len(intVars) {
			if a.Guard != nil && !a.Guard.Holds(c.ints) {
				return nil
			}
			for k := range c.assignID {
				c.assignID[k] = -1
			}
			c.resolveParams()
			return c.shapeLoop(0)
		}
		for _, v := range domains[intVars[i]] {
			c.ints[intVars[i]] = v
			if err := paramLoop(i + 1); err != nil || c.report.Counterexample != "" {
				return err
			}
		}
		return nil
	}
	if err := paramLoop(0); err != nil {
		return *c.report, err
	}
	if b.Combined && usesParallelOps(a, reg) && c.report.Counterexample == "" {
		n, cx, err := validateLayouts(ctx, a, reg, domains, b.Seed)
		if err != nil {
			return *c.report, err
		}
		c.report.Instances += n
		c.report.Counterexample = cx
	}
	if c.report.Instances == 0 && c.report.Counterexample == "" {
		c.report.Counterexample = "no instance within the bound has both sides defined"
		if c.partial != "" {
			c.report.Counterexample += "; for example " + c.partial
		}
	}
	return *c.report, nil
}

// allInts reports whether a term's first n arguments are integer literals.
func allInts(t *Term, n int) bool {
	for _, a := range t.Args[:n] {
		if !a.IsInt {
			return false
		}
	}
	return true
}

func walk(t *Term, f func(*Term)) {
	f(t)
	for _, a := range t.Args {
		walk(a, f)
	}
}

// intDomains gives each integer variable the check values of every
// parameter position it fills (their intersection).
func (c *checker) intDomains() (map[string][]int, error) {
	dom := map[string][]int{}
	for _, side := range []*Term{c.a.LHS, c.a.RHS} {
		walk(side, func(t *Term) {
			op, _, ok := c.reg.LookupZ3(t.Sym)
			if !ok || t.IsVar {
				return
			}
			for i, spec := range op.Params {
				if i >= len(t.Args) || !t.Args[i].IsVar {
					continue
				}
				arg := t.Args[i]
				vals := spec.CheckValues()
				if prev, ok := dom[arg.Sym]; ok {
					vals = slices.DeleteFunc(slices.Clone(prev), func(v int) bool { return !slices.Contains(vals, v) })
				}
				dom[arg.Sym] = vals
			}
		})
	}
	for _, v := range c.a.Vars {
		if v.Sort != IntSort {
			continue
		}
		if _, ok := dom[v.Name]; !ok {
			dom[v.Name] = []int{0, 1, 2, 3} // a variable of guards only
		}
		if len(dom[v.Name]) == 0 {
			return nil, fmt.Errorf("variable %s fills parameters with no common value", v.Name)
		}
	}
	return dom, nil
}

// usesParallelOps reports whether an axiom applies an operator of the
// parallel set (rules.SetParallel): its tensors are checked at parallel
// layouts too.
func usesParallelOps(a *Axiom, reg *rules.Registry) bool {
	found := false
	for _, side := range []*Term{a.LHS, a.RHS} {
		walk(side, func(t *Term) {
			if op, _, ok := reg.LookupZ3(t.Sym); ok && !t.IsVar && op.Set == rules.SetParallel {
				found = true
			}
		})
	}
	return found
}

// Bounds of the check of parallel axioms: shapes up to rank
// maxLayoutRank (the parallel operators' dimensions 0 to 2) with the
// bound's extents from 2 and layoutExtent, so that every degree of the
// check values (1 to 4) divides some extent. Extent 1, which no degree
// above 1 divides, is left out: the layouts multiply the shapes, and the
// search over two or three tensors grows with their square or cube.
const (
	maxLayoutRank = 3
	layoutExtent  = 4
)

// layoutShapes lists the shapes a parallel axiom is checked at: every
// shape of rank ≤ maxLayoutRank with extents from b.Dims (2 and above) and
// layoutExtent, each on one device, cut along one dimension by a degree
// from 2 to 4 that divides it, holding 2 partial sums, or 2 copies.
func layoutShapes(b Bound) []rules.Shape {
	bound := b
	bound.MaxRank = min(b.MaxRank, maxLayoutRank)
	bound.Dims = slices.DeleteFunc(slices.Clone(b.Dims), func(e int) bool { return e < 2 || e == layoutExtent })
	bound.Dims = append(bound.Dims, layoutExtent)
	var out []rules.Shape
	for _, s := range allShapes(bound) {
		out = append(out, s)
		sums, copies := s, s
		sums.Sum, copies.Copy = 2, 2
		out = append(out, sums, copies)
		for i := 0; i < s.Rank; i++ {
			for d := 2; d <= layoutExtent; d++ {
				if s.Dims[i]%d == 0 {
					cut := s
					cut.Degrees[i] = d
					out = append(out, cut)
				}
			}
		}
	}
	return out
}

// usesImageOps reports whether the axiom applies an operator of NCHW
// images (conv2d, the pools, attention), whose tensors are rank 4.
func usesImageOps(a *Axiom, reg *rules.Registry) bool {
	return applies(a, reg, func(op *rules.Op) bool { return op.Ranks.Result == 4 })
}

// applies reports whether the axiom applies an operator with property is.
func applies(a *Axiom, reg *rules.Registry, is func(*rules.Op) bool) bool {
	found := false
	for _, side := range []*Term{a.LHS, a.RHS} {
		walk(side, func(t *Term) {
			if op, _, ok := reg.LookupZ3(t.Sym); ok && !t.IsVar && is(op) {
				found = true
			}
		})
	}
	return found
}

// imageExtents are the extents of the rank-4 shapes a parallel axiom
// about images is checked at: the search grows with the square of the
// shapes, and 2 and 4 give even and odd pieces, windows of 2 and 4, and
// every degree of the check but 3, which the combined layouts take.
var imageExtents = []int{2, 4}

// imageLayoutShapes lists the rank-4 shapes, each on one device, cut
// along one dimension by a degree that divides it, holding 2 partial
// sums, or 2 copies.
func imageLayoutShapes() []rules.Shape {
	var out []rules.Shape
	for _, s := range allShapes(Bound{Dims: imageExtents, MaxRank: 4}) {
		if s.Rank != 4 {
			continue
		}
		sums, copies := s, s
		sums.Sum, copies.Copy = 2, 2
		out = append(out, s, sums, copies)
		for i := 0; i < s.Rank; i++ {
			for _, d := range imageExtents {
				if s.Dims[i]%d == 0 {
					cut := s
					cut.Degrees[i] = d
					out = append(out, cut)
				}
			}
		}
	}
	return out
}

// layoutConditionsHold decides the axiom's layout and shape conditions at
// the current shapes.
func (c *checker) layoutConditionsHold() bool {
	layouts, shapeConds := c.a.Guard.LayoutConditions(), c.a.Guard.ShapeConditions()
	if len(layouts) == 0 && len(shapeConds) == 0 {
		return true
	}
	shapes := map[string]rules.Shape{}
	for i, sl := range c.slots {
		if sl.isVar && c.assignID[i] >= 0 {
			shapes[sl.name] = c.shapeTab.Shape(c.assignID[i])
		}
	}
	for _, g := range layouts {
		if !g.LayoutHolds(shapes) {
			return false
		}
	}
	for _, g := range shapeConds {
		if !g.ShapeHolds(shapes) {
			return false
		}
	}
	return true
}

func allShapes(b Bound) []rules.Shape {
	out := []rules.Shape{rules.NewShape()}
	prev := [][]int{{}}
	for r := 1; r <= b.MaxRank; r++ {
		var next [][]int
		for _, p := range prev {
			for _, d := range b.Dims {
				dims := append(slices.Clone(p), d)
				next = append(next, dims)
				out = append(out, rules.NewShape(dims...))
			}
		}
		prev = next
	}
	return out
}

// inferKey and inferResult hold no pointers, so that the garbage collector
// need not scan the cache, which grows to millions of entries when the
// search pairs hundreds of parallel layouts. A failure keeps no error; the
// message is recomputed for the one instance that reports it (failure).
type inferKey struct {
	op     int32 // index in checker.ops
	params [4]int32
	a, b   int32
}

type inferResult struct {
	outs [2]int32
	ok   bool
}

// inferShapes is op.InferShapes through the cache; ok is false where the
// operator refuses the shapes.
func (c *checker) inferShapes(op *rules.Op, params []int, in []int32) ([2]int32, bool) {
	idx, known := c.opIndex[op]
	if !known {
		idx = int32(len(c.opIndex))
		c.opIndex[op] = idx
	}
	key := inferKey{op: idx, a: -1, b: -1}
	for i, p := range params {
		key.params[i] = int32(p)
	}
	if len(in) > 0 {
		key.a = in[0]
	}
	if len(in) > 1 {
		key.b = in[1]
	}
	if r, ok := c.infer[key]; ok {
		return r.outs, r.ok
	}
	outs, err := op.InferShapes(params, c.shapesOf(in))
	r := inferResult{ok: err == nil}
	for i, o := range outs {
		r.outs[i] = c.shapeTab.Intern(o)
	}
	c.infer[key] = r
	return r.outs, r.ok
}

func (c *checker) shapesOf(ids []int32) []rules.Shape {
	shapes := make([]rules.Shape, len(ids))
	for i, id := range ids {
		shapes[i] = c.shapeTab.Shape(id)
	}
	return shapes
}

// failure is the shape error of node j, whose inference failed.
func (c *checker) failure(j int) error {
	n := &c.nodes[j]
	in := []int32{}
	if n.op.IsConstant() {
		in = append(in, c.assignID[n.slot])
	}
	for _, a := range n.args {
		in = append(in, c.ids[a])
	}
	_, err := n.op.InferShapes(n.params, c.shapesOf(in))
	return err
}

// cnode is one node of an axiom side compiled for the shape search:
// children come before parents, leaves name a slot.
type cnode struct {
	term   *Term
	op     *rules.Op
	out    int
	params []int // resolved per integer assignment
	args   []int // child nodes
	slot   int   // leaf: the slot; -1 for an operator node
}

// compile flattens the axiom's sides; it returns the root of each.
func (c *checker) compile() (lhs, rhs int) {
	slotIdx := map[string]int{}
	for i, sl := range c.slots {
		slotIdx[sl.name] = i
	}
	var rec func(t *Term) int
	rec = func(t *Term) int {
		n := cnode{term: t, slot: -1}
		if t.IsVar {
			n.slot = slotIdx[t.Sym]
		} else {
			n.op, n.out, _ = c.reg.LookupZ3(t.Sym)
			if n.op.IsConstant() {
				n.slot = slotIdx[c.slotOf[t]]
			}
			for _, a := range t.Args[len(n.op.Params):] {
				n.args = append(n.args, rec(a))
			}
		}
		c.nodes = append(c.nodes, n)
		return len(c.nodes) - 1
	}
	return rec(c.a.LHS), rec(c.a.RHS)
}

// resolveParams evaluates every node's parameters for the current integers.
func (c *checker) resolveParams() {
	for i := range c.nodes {
		n := &c.nodes[i]
		if n.op != nil {
			n.params, _ = c.split(n.op, n.term)
		}
	}
}

// nodeShapes infers every node's shape id under the slot assignment.
func (c *checker) nodeShapes() {
	for i := range c.nodes {
		n := &c.nodes[i]
		c.st[i], c.failedAt[i] = pending, -1
		var in []int32
		switch {
		case n.op == nil || n.op.IsConstant():
			id := c.assignID[n.slot]
			if id < 0 {
				continue
			}
			if n.op == nil {
				c.ids[i], c.st[i] = id, defined
				continue
			}
			in = []int32{id}
		default:
			in = c.argBuf[:0]
			ready := true
			for _, a := range n.args {
				switch c.st[a] {
				case failed:
					c.st[i], c.failedAt[i] = failed, c.failedAt[a]
					ready = false
				case pending:
					if c.st[i] != failed {
						ready = false
					}
				}
				in = append(in, c.ids[a])
			}
			if !ready {
				continue
			}
		}
		outs, ok := c.inferShapes(n.op, n.params, in)
		if !ok {
			c.st[i], c.failedAt[i] = failed, i
			continue
		}
		c.ids[i], c.st[i] = outs[n.out], defined
	}
}

type status int

const (
	pending status = iota
	defined
	failed
)

func (c *checker) split(op *rules.Op, t *Term) ([]int, []rules.Shape) {
	params := make([]int, len(op.Params))
	for i := range params {
		params[i] = t.Args[i].IntValue(c.ints)
	}
	return params, nil
}

func (c *checker) shapeLoop(i int) error {
	c.nodeShapes()
	lst, rst := c.st[c.lhs], c.st[c.rhs]
	if lst == failed || rst == failed {
		if c.partial == "" && (lst == defined || rst == defined) {
			side, at := "left", c.failedAt[c.rhs]
			if lst == failed {
				side, at = "right", c.failedAt[c.lhs]
			}
			err := c.failure(at)
			c.partial = fmt.Sprintf("at %s the %s side is defined and the other is not (%v)", c.describe(), side, err)
		}
		return nil
	}
	if i == len(c.slots) {
		if !c.layoutConditionsHold() {
			return nil
		}
		return c.compare(c.shapeTab.Shape(c.ids[c.lhs]), c.shapeTab.Shape(c.ids[c.rhs]))
	}
	sl := c.slots[i]
	var op *rules.Op
	var params []int
	if !sl.isVar {
		op, _, _ = c.reg.LookupZ3(sl.term.Sym)
		params, _ = c.split(op, sl.term)
	}
	for _, id := range c.candidates {
		if op != nil {
			if _, ok := c.inferShapes(op, params, []int32{id}); !ok {
				continue
			}
		}
		c.assignID[i] = id
		if err := c.shapeLoop(i + 1); err != nil {
			return err
		}
		if c.report.Counterexample != "" {
			return nil
		}
	}
	c.assignID[i] = -1
	return nil
}

// shapeOfSlot is the assigned shape of a slot by name.
func (c *checker) shapeOfSlot(name string) (rules.Shape, bool) {
	for i, sl := range c.slots {
		if sl.name == name && c.assignID[i] >= 0 {
			return c.shapeTab.Shape(c.assignID[i]), true
		}
	}
	return rules.Shape{}, false
}

func (c *checker) describe() string {
	var parts []string
	for _, v := range c.a.Vars {
		if v.Sort == IntSort {
			parts = append(parts, fmt.Sprintf("%s=%d", v.Name, c.ints[v.Name]))
		} else if s, ok := c.shapeOfSlot(v.Name); ok {
			parts = append(parts, fmt.Sprintf("%s:%s", v.Name, s))
		}
	}
	for i, sl := range c.slots {
		if !sl.isVar && c.assignID[i] >= 0 {
			parts = append(parts, fmt.Sprintf("%s:%s", sl.name, c.shapeTab.Shape(c.assignID[i])))
		}
	}
	return strings.Join(parts, " ")
}

// draws is two uniform float draws and four one-signed ones: relu and max
// identities fail only for some sign patterns (fingerprint.PiecewiseDraws).
const draws = 2 + 4

func drawStream(d int) uint64 {
	if d < 2 {
		return fingerprint.Draw(d)
	}
	return fingerprint.Draw(16 + d - 2)
}

func (c *checker) compare(ls, rs rules.Shape) error {
	if !ls.SameDims(rs) {
		if !c.hasConst { // a constant's shape is chosen to fit; a variable's is not
			c.report.Counterexample = fmt.Sprintf("at %s the left side has shape %s and the right side %s", c.describe(), ls, rs)
		}
		return nil
	}
	c.report.Instances++
	in := fingerprint.Inputs{Seed: c.b.Seed}
	ints := map[string]*rules.IntTensor{}
	for k, sl := range c.slots {
		if sl.isVar {
			ints[sl.name] = in.Int(k, c.shapeTab.Shape(c.assignID[k]))
		}
	}
	l, err := evalTerm(c, c.a.LHS, ints, rules.IntKernelOf)
	if err != nil {
		return err
	}
	r, err := evalTerm(c, c.a.RHS, ints, rules.IntKernelOf)
	if err != nil {
		return err
	}
	for k := range l.Data {
		if l.Data[k] != r.Data[k] {
			c.report.Counterexample = fmt.Sprintf("at %s element %d differs in exact arithmetic: left %d, right %d (mod 2^31-1)", c.describe(), k, l.Data[k], r.Data[k])
			return nil
		}
	}
	// Without relu or max the exact test decides: a false polynomial
	// identity agrees on random residues with negligible probability.
	for d := 0; d < draws && c.piecewise; d++ {
		fl := map[string]*rules.FloatTensor{}
		for k, sl := range c.slots {
			if sl.isVar {
				fl[sl.name] = in.Float(drawStream(d), k, c.shapeTab.Shape(c.assignID[k]))
			}
		}
		x, err := evalTerm(c, c.a.LHS, fl, rules.FloatKernelOf)
		if err != nil {
			return err
		}
		y, err := evalTerm(c, c.a.RHS, fl, rules.FloatKernelOf)
		if err != nil {
			return err
		}
		for k := range x.Data {
			if math.Abs(x.Data[k]-y.Data[k]) > 1e-9*math.Max(1, math.Max(math.Abs(x.Data[k]), math.Abs(y.Data[k]))) {
				c.report.Counterexample = fmt.Sprintf("at %s element %d differs in float64 (draw %d): left %.6g, right %.6g", c.describe(), k, d, x.Data[k], y.Data[k])
				return nil
			}
		}
	}
	return nil
}

// evalTerm evaluates a term with tensor variables bound by vars.
func evalTerm[T any](c *checker, t *Term, vars map[string]*rules.Tensor[T], kernel func(*rules.Op) func([]int, []*rules.Tensor[T], []*rules.Tensor[T])) (*rules.Tensor[T], error) {
	if t.IsVar {
		return vars[t.Sym], nil
	}
	op, out, _ := c.reg.LookupZ3(t.Sym)
	params, _ := c.split(op, t)
	var args []*rules.Tensor[T]
	for _, a := range t.Args[len(op.Params):] {
		v, err := evalTerm(c, a, vars, kernel)
		if err != nil {
			return nil, err
		}
		args = append(args, v)
	}
	cs, _ := c.shapeOfSlot(c.slotOf[t])
	outs, err := rules.Eval(op, kernel(op), params, args, cs)
	if err != nil {
		return nil, err
	}
	return outs[out], nil
}
