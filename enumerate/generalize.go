package enumerate

import (
	"fmt"
	"slices"
	"strings"

	"rulebook/fingerprint"
	"rulebook/rules"
)

// generalize replaces sub-terms that both sides compute identically by
// fresh inputs, for as long as the rule still passes both tests (TASO's
// first common-subgraph form). The more general rule is what gets stored;
// the original is one of its instances.
func (g *generator) generalize(r *rules.Rule) *rules.Rule {
	for {
		next := g.generalizeOnce(r)
		if next == nil {
			return r
		}
		r = next
	}
}

// generalizeOnce tries each shared sub-term, largest first, with the exact
// test; the caller runs the float draws on the final rule.
func (g *generator) generalizeOnce(r *rules.Rule) *rules.Rule {
	srcKeys, dstKeys := termKeys(&r.Src), termKeys(&r.Dst)
	inDst := map[string]bool{}
	for _, k := range dstKeys {
		inDst[k] = true
	}
	var common []string
	for j, k := range srcKeys {
		if inDst[k] && r.Src.Nodes[j].Op.Outputs == 1 && !slices.Contains(common, k) {
			common = append(common, k)
		}
	}
	// Larger shared terms first: replacing them generalises most.
	slices.SortStableFunc(common, func(a, b string) int { return len(b) - len(a) })
	for _, k := range common {
		if cand := replaceTerm(r, srcKeys, dstKeys, k); g.intHolds(cand) {
			return cand
		}
	}
	return nil
}

// termKeys gives each node a structural key independent of numbering.
func termKeys(gr *rules.Graph) []string {
	keys := make([]string, len(gr.Nodes))
	val := func(v rules.Value) string {
		if v.IsInput() {
			return fmt.Sprintf("#%d", v.Input())
		}
		return fmt.Sprintf("%s.%d", keys[v.Node], v.Out)
	}
	for j, n := range gr.Nodes {
		var b strings.Builder
		fmt.Fprintf(&b, "(%s%v", n.Op.Name, n.Params)
		if n.ConstShape != nil {
			fmt.Fprintf(&b, ":%s", n.ConstShape)
		}
		for _, a := range n.Args {
			b.WriteString(" " + val(a))
		}
		b.WriteString(")")
		keys[j] = b.String()
	}
	return keys
}

// replaceTerm turns every node with the given key into one fresh input.
func replaceTerm(r *rules.Rule, srcKeys, dstKeys []string, key string) *rules.Rule {
	next := r.NumInputs
	var shape rules.Shape
	out := &rules.Rule{NumInputs: next + 1, InputShapes: slices.Clone(r.InputShapes)}
	for j, k := range srcKeys {
		if k == key {
			shape = nodeShape(r, &r.Src, j)
		}
	}
	// The fresh input has no concat history, but it keeps the term's
	// parallel layout: a partial sum stays one.
	fresh := rules.NewShape(shape.DimList()...)
	fresh.Degrees, fresh.Sum, fresh.Copy = shape.Degrees, shape.Sum, shape.Copy
	out.InputShapes = append(out.InputShapes, fresh)
	out.Src = substitute(&r.Src, srcKeys, key, next)
	out.Dst = substitute(&r.Dst, dstKeys, key, next)
	return dropSharedOutputs(out)
}

// dropSharedOutputs removes output positions where both sides return the
// same input unchanged (TASO's second common-subgraph form).
func dropSharedOutputs(r *rules.Rule) *rules.Rule {
	var keep []int
	for i := range r.Src.Outputs {
		a, b := r.Src.Outputs[i], r.Dst.Outputs[i]
		if !(a.IsInput() && a == b) {
			keep = append(keep, i)
		}
	}
	if len(keep) == len(r.Src.Outputs) || len(keep) == 0 {
		return r
	}
	pick := func(g *rules.Graph) rules.Graph {
		c := *g
		c.Outputs = nil
		for _, i := range keep {
			c.Outputs = append(c.Outputs, g.Outputs[i])
		}
		return substitute(&c, termKeys(&c), "", c.NumInputs-1)
	}
	out := *r
	out.Src, out.Dst = pick(&r.Src), pick(&r.Dst)
	return &out
}

// nodeShape infers the output shape of node j from the rule's input shapes.
func nodeShape(r *rules.Rule, gr *rules.Graph, j int) rules.Shape {
	shapes := make([][]rules.Shape, len(gr.Nodes))
	get := func(v rules.Value) rules.Shape {
		if v.IsInput() {
			return r.InputShapes[v.Input()]
		}
		return shapes[v.Node][v.Out]
	}
	for i := 0; i <= j; i++ {
		n := gr.Nodes[i]
		var in []rules.Shape
		for _, a := range n.Args {
			in = append(in, get(a))
		}
		if n.Op.IsConstant() {
			in = []rules.Shape{*n.ConstShape}
		}
		s, err := n.Op.InferShapes(n.Params, in)
		if err != nil {
			return rules.Shape{}
		}
		shapes[i] = s
	}
	return shapes[j][0]
}

func substitute(gr *rules.Graph, keys []string, key string, fresh int) rules.Graph {
	// Map old values to new ones, dropping nodes nothing reaches any more.
	live := make([]bool, len(gr.Nodes))
	var mark func(v rules.Value)
	mark = func(v rules.Value) {
		if v.IsInput() || (key != "" && keys[v.Node] == key) || live[v.Node] {
			return
		}
		live[v.Node] = true
		for _, a := range gr.Nodes[v.Node].Args {
			mark(a)
		}
	}
	for _, o := range gr.Outputs {
		mark(o)
	}
	newIndex := make([]int, len(gr.Nodes))
	out := rules.Graph{NumInputs: fresh + 1}
	mapValue := func(v rules.Value) rules.Value {
		if v.IsInput() {
			return v
		}
		if key != "" && keys[v.Node] == key {
			return rules.InputValue(fresh)
		}
		return rules.Value{Node: newIndex[v.Node], Out: v.Out}
	}
	for j, n := range gr.Nodes {
		if !live[j] {
			continue
		}
		c := n
		c.Args = make([]rules.Value, len(n.Args))
		for a, v := range n.Args {
			c.Args[a] = mapValue(v)
		}
		newIndex[j] = len(out.Nodes)
		out.Nodes = append(out.Nodes, c)
	}
	for _, o := range gr.Outputs {
		out.Outputs = append(out.Outputs, mapValue(o))
	}
	return out
}

// intHolds tests a rule exactly on the fingerprint inputs, output by output.
func (g *generator) intHolds(r *rules.Rule) bool {
	ints := make([]*rules.IntTensor, r.NumInputs)
	for i, s := range r.InputShapes {
		if i < g.l.nIn {
			ints[i] = g.intIn[i]
		} else {
			ints[i] = g.inputs.Int(i, s)
		}
	}
	a, errA := rules.Evaluate(&r.Src, rules.IntKernelOf, ints)
	b, errB := rules.Evaluate(&r.Dst, rules.IntKernelOf, ints)
	if errA != nil || errB != nil {
		return false // the generalised rule is ill-shaped: keep the original
	}
	for i := range a {
		if fingerprint.Tensor(a[i]) != fingerprint.Tensor(b[i]) {
			return false
		}
	}
	return true
}

// floatHolds tests a rule on the float draws, output by output: uniform
// draws always, one-signed draws too when either side is piecewise.
func (g *generator) floatHolds(r *rules.Rule) bool {
	for d := 0; d < draws(r.Src.Piecewise() || r.Dst.Piecewise()); d++ {
		pool := g.floatInputs(d)
		fl := make([]*rules.FloatTensor, r.NumInputs)
		for i, s := range r.InputShapes {
			if i < g.l.nIn {
				fl[i] = pool[i]
			} else {
				fl[i] = g.inputs.Float(fingerprint.Draw(d), i, s)
			}
		}
		x, err := rules.Evaluate(&r.Src, rules.FloatKernelOf, fl)
		if err != nil {
			return false
		}
		y, err := rules.Evaluate(&r.Dst, rules.FloatKernelOf, fl)
		if err != nil {
			return false
		}
		for i := range x {
			if !Close(x[i], y[i], g.cfg.Tolerance) {
				return false
			}
		}
	}
	return true
}
