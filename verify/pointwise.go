package verify

import (
	"fmt"
	"slices"
	"strings"

	"rulebook/rules"
)

// Pointwise reasoning decides what TASO's axioms cannot: identities that
// hold element by element because of what relu does, such as
// relu(x·relu(y)) = relu(x)·relu(y) or relu(x)·maxpool(x) =
// relu(x)·maxpool(relu(x)). Every element of ewadd, ewmul, smul and relu
// depends on the same element of their operands only, so such an identity
// holds for tensors exactly when it holds for real numbers, and nonlinear
// real arithmetic, which Z3 decides, settles it. Terms built by other
// operators are abstracted as opaque reals (the same term, the same real),
// which keeps the argument sound: what holds for every real holds for the
// values those terms take. A few facts about the abstracted terms restore
// what the abstraction loses: a stride-1 max pooling with same padding is
// at least the element its window is centred on.
//
// The identities found this way are handed to the axiom-based proof as
// lemmas about the rule's own sub-terms, so that a rule whose difference
// is pointwise inside a larger context (a concat, a convolution) is proved
// too.

// PointwiseAxiom is the name the proof core gives to lemmas from pointwise
// reasoning.
const PointwiseAxiom = "pointwise"

// pwTerm is a node value of a rule side as a tree, shared between sides by
// its key (its SMT-LIB2 text over input0, input1, …).
type pwTerm struct {
	op     *rules.Op
	out    int
	params []int
	args   []*pwTerm
	input  int // ≥ 0 for a graph input
	key    string
	shape  *rules.Shape // at the recorded shapes, when known
}

// pwTerms lists the values of both sides of r, source nodes first.
type pwTerms struct {
	src, dst []*pwTerm // every node output of each side
	outSrc   []*pwTerm
	outDst   []*pwTerm
}

func pointwiseTerms(r *rules.Rule) pwTerms {
	inputs := make([]*pwTerm, r.NumInputs)
	for i := range inputs {
		inputs[i] = &pwTerm{input: i, key: fmt.Sprintf("input%d", i)}
		if i < len(r.InputShapes) {
			inputs[i].shape = &r.InputShapes[i]
		}
	}
	var out pwTerms
	out.src, out.outSrc = sideTerms(&r.Src, inputs)
	out.dst, out.outDst = sideTerms(&r.Dst, inputs)
	out.src = append(out.src, pushedRelus(out.src)...)
	out.dst = append(out.dst, pushedRelus(out.dst)...)
	return out
}

// pushedRelus lists relu(x) and relu(y) for every relu(concat(x, y)) and
// relu(x) for every relu(transpose(x)) among ts: the axioms concat-relu and
// relu-transpose move a relu inside, where a pointwise lemma about its
// operand can meet the other side's.
func pushedRelus(ts []*pwTerm) []*pwTerm {
	var out []*pwTerm
	for _, t := range ts {
		if t.input >= 0 || t.op.Pointwise != rules.PointwiseRelu || t.args[0].input >= 0 {
			continue
		}
		if in := t.args[0]; in.op.Pointwise.ReluInside() {
			for _, part := range in.args {
				out = append(out, applied(t.op, nil, part))
			}
		}
	}
	return out
}

// applied builds op(params, args) as a term, with its shape when the
// operands' are known.
func applied(op *rules.Op, params []int, args ...*pwTerm) *pwTerm {
	t := &pwTerm{op: op, params: params, args: args, input: -1, key: termKey(op, 0, params, args)}
	var shapes []rules.Shape
	for _, a := range args {
		if a.shape == nil {
			return t
		}
		shapes = append(shapes, *a.shape)
	}
	if out, err := op.InferShapes(params, shapes); err == nil {
		t.shape = &out[0]
	}
	return t
}

func sideTerms(g *rules.Graph, inputs []*pwTerm) (all, outs []*pwTerm) {
	vals := make([][]*pwTerm, len(g.Nodes))
	get := func(v rules.Value) *pwTerm {
		if v.IsInput() {
			return inputs[v.Input()]
		}
		return vals[v.Node][v.Out]
	}
	for j, n := range g.Nodes {
		args := make([]*pwTerm, len(n.Args))
		var argShapes []rules.Shape
		for k, a := range n.Args {
			args[k] = get(a)
			if args[k].shape != nil {
				argShapes = append(argShapes, *args[k].shape)
			}
		}
		shapes := nodeShapes(n, argShapes, len(args))
		for o := range n.Op.Z3 {
			t := &pwTerm{op: n.Op, out: o, params: n.Params, args: args, input: -1}
			t.key = termKey(n.Op, o, n.Params, args)
			if shapes != nil {
				t.shape = &shapes[o]
			}
			vals[j] = append(vals[j], t)
			all = append(all, t)
		}
	}
	for _, o := range g.Outputs {
		outs = append(outs, get(o))
	}
	return all, outs
}

// nodeShapes infers a node's output shapes when all operand shapes are
// known; nil otherwise.
func nodeShapes(n rules.Node, argShapes []rules.Shape, arity int) []rules.Shape {
	if n.Op.IsConstant() {
		if n.ConstShape == nil {
			return nil
		}
		argShapes = []rules.Shape{*n.ConstShape}
	} else if len(argShapes) != arity {
		return nil
	}
	out, err := n.Op.InferShapes(n.Params, argShapes)
	if err != nil {
		return nil
	}
	return out
}

func termKey(op *rules.Op, out int, params []int, args []*pwTerm) string {
	sym := op.Z3[out]
	if len(params) == 0 && len(args) == 0 {
		return sym
	}
	parts := []string{sym}
	for spec, p := range op.ParamValues(params) {
		parts = append(parts, smtParam(spec, p))
	}
	for _, a := range args {
		parts = append(parts, a.key)
	}
	return "(" + strings.Join(parts, " ") + ")"
}

// smtParam writes a parameter: the degree variable as the Int constant d
// (DegreeVarName), else the integer.
func smtParam(spec rules.ParamSpec, v int) string {
	if v == rules.DegreeVar && spec.Degree {
		return DegreeVarName
	}
	return smtInt(v)
}

func smtInt(v int) string {
	if v < 0 {
		return fmt.Sprintf("(- %d)", -v)
	}
	return fmt.Sprint(v)
}

// elements translates terms into real arithmetic on one element.
type elements struct {
	vars  map[string]string // opaque term key → real variable
	order []string          // variables in order of creation
	facts []string
	seen  map[string]bool // facts already stated, by atom
}

func newElements() *elements {
	return &elements{vars: map[string]string{}, seen: map[string]bool{}}
}

// variable returns the real standing for an opaque term.
func (e *elements) variable(key string) string {
	if v, ok := e.vars[key]; ok {
		return v
	}
	v := fmt.Sprintf("e%d", len(e.vars))
	e.vars[key] = v
	e.order = append(e.order, v)
	return v
}

// value is the element of t as a real expression.
func (e *elements) value(t *pwTerm) string {
	if t.input >= 0 {
		return e.variable(t.key)
	}
	arg := func(i int) string { return e.value(t.args[i]) }
	switch t.op.Pointwise {
	case rules.PointwiseSum:
		return "(+ " + arg(0) + " " + arg(1) + ")"
	case rules.PointwiseProduct:
		return "(* " + arg(0) + " " + arg(1) + ")"
	case rules.PointwiseScale: // the scalar broadcasts: every element meets the same real
		return "(* " + arg(0) + " " + arg(1) + ")"
	case rules.PointwiseRelu:
		return relu(arg(0))
	case rules.PointwiseOnes:
		return "1.0"
	case rules.PointwiseLinearActivated:
		if t.op.ReluActivated(t.params) { // axiom conv-relu
			return relu(e.linear(withoutActivation(t)))
		}
		return e.linear(t)
	case rules.PointwiseLinear:
		return e.linear(t)
	case rules.PointwiseMax:
		return e.poolMax(t)
	}
	return e.variable(t.key)
}

// linear is the element of a term that is linear in each operand
// (a convolution without activation, a product, an average pooling): a
// scalar factor of an operand moves out of it (axioms conv-smul-out,
// conv-smul-operands, matmul-smul, pool-avg-smul), and what is left is an
// opaque real, non-negative when every operand is.
func (e *elements) linear(t *pwTerm) string {
	args := slices.Clone(t.args)
	var factors []string
	for i, a := range args {
		for a.input < 0 && a.op.Pointwise == rules.PointwiseScale {
			factors = append(factors, e.value(a.args[1]))
			a = a.args[0]
		}
		args[i] = a
	}
	core := &pwTerm{op: t.op, out: t.out, params: t.params, args: args, input: -1}
	core.key = termKey(t.op, t.out, t.params, args)
	v := e.variable(core.key)
	if !e.seen[v] {
		e.seen[v] = true
		if all(args, e.nonNegative) {
			e.facts = append(e.facts, "(>= "+v+" 0.0)")
		}
	}
	for _, f := range factors {
		v = "(* " + v + " " + f + ")"
	}
	return v
}

// nonNegative reports whether every element of t is at least 0 whatever
// the inputs: a relu, or built from such by the operators that keep signs.
func (e *elements) nonNegative(t *pwTerm) bool {
	if t.input >= 0 {
		return false
	}
	switch c := t.op.Pointwise; {
	case c.NonNegative() || t.op.ReluActivated(t.params):
		return true
	case c.KeepsSign():
		return all(t.args, e.nonNegative)
	}
	return false
}

func all(ts []*pwTerm, f func(*pwTerm) bool) bool {
	for _, t := range ts {
		if !f(t) {
			return false
		}
	}
	return true
}

// withoutActivation returns t, an application of a
// PointwiseLinearActivated operator, without its activation.
func withoutActivation(t *pwTerm) *pwTerm {
	c := *t
	c.params = t.op.WithoutActivation(t.params)
	c.key = termKey(t.op, t.out, c.params, c.args)
	return &c
}

// poolMax is the element of a max pooling. Of a relu (or a convolution
// with relu activation) it is the relu of the pooling (axioms
// pool-max-relu and conv-relu); with stride 1 and same padding the window
// holds the element it is centred on, so the pooling is at least that
// element; and it is non-negative when its operand is.
func (e *elements) poolMax(t *pwTerm) string {
	inner, wrapped := peelRelu(t.args[0])
	v := e.variable(termKey(t.op, 0, t.params, []*pwTerm{inner}))
	if !e.seen[v] {
		e.seen[v] = true
		if w := rules.WindowOf(t.params); w.Stride == 1 && w.Padding == rules.PadSame {
			e.facts = append(e.facts, "(>= "+v+" "+e.value(inner)+")")
		}
		if e.nonNegative(inner) {
			e.facts = append(e.facts, "(>= "+v+" 0.0)")
		}
	}
	if wrapped {
		return relu(v)
	}
	return v
}

// peelRelu returns the operand of a relu, of a convolution's relu
// activation (as the convolution without it) or of a max pooling of either
// (as the pooling of the operand), and whether it peeled one.
func peelRelu(x *pwTerm) (*pwTerm, bool) {
	switch {
	case x.input >= 0:
		return x, false
	case x.op.Pointwise == rules.PointwiseRelu:
		return x.args[0], true
	case x.op.ReluActivated(x.params):
		return withoutActivation(x), true
	case x.op.Pointwise == rules.PointwiseMax:
		if inner, ok := peelRelu(x.args[0]); ok {
			c := *x
			c.args = []*pwTerm{inner}
			c.key = termKey(x.op, 0, x.params, c.args)
			return &c, true
		}
	}
	return x, false
}

func relu(x string) string { return "(ite (> " + x + " 0.0) " + x + " 0.0)" }

// pointwiseRooted reports whether t's own operator is one pointwise
// reasoning sees through; a pair of terms is worth a query only then.
func pointwiseRooted(t *pwTerm) bool {
	if t.input >= 0 {
		return false
	}
	switch {
	case t.op.Pointwise.ElementWise():
		return true
	case t.op.Pointwise == rules.PointwiseMax:
		_, wrapped := peelRelu(t.args[0])
		return wrapped
	}
	return t.op.ReluActivated(t.params)
}

// lemmaCandidates pairs each source term with each target term of the same
// shape (split history included) when either is pointwise at its root and
// the two differ.
func lemmaCandidates(ts pwTerms) [][2]*pwTerm {
	var out [][2]*pwTerm
	seen := map[[2]string]bool{}
	for _, s := range ts.src {
		for _, d := range ts.dst {
			k := [2]string{s.key, d.key}
			if s.key == d.key || seen[k] || !(pointwiseRooted(s) || pointwiseRooted(d)) {
				continue
			}
			if s.shape == nil || d.shape == nil || !s.shape.Equal(*d.shape) {
				continue
			}
			seen[k] = true
			out = append(out, [2]*pwTerm{s, d})
		}
	}
	return out
}

// pointwiseQuery is the SMT-LIB2 text of "the elements of s and d differ"
// under the facts about the opaque terms: unsat proves s = d.
func pointwiseQuery(s, d *pwTerm) string {
	e := newElements()
	a, b := e.value(s), e.value(d)
	var q strings.Builder
	for _, v := range e.order {
		fmt.Fprintf(&q, "(declare-const %s Real)\n", v)
	}
	for _, f := range e.facts {
		fmt.Fprintf(&q, "(assert %s)\n", f)
	}
	fmt.Fprintf(&q, "(assert (not (= %s %s)))\n", a, b)
	return q.String()
}
