package exchange

import (
	"fmt"

	"rulebook/rules"
)

// Defaults for what TASO needs and our rules do not say.
const (
	// defaultKernel is the conv2d kernel height and width written when
	// neither the rule's shapes nor its kernel operand tell (TASO's own
	// rules mostly use 3×3 kernels).
	defaultKernel = 3
	// defaultNumDim is the concat rank written when nothing in the rule
	// fixes it (TASO's activations are 4-D).
	defaultNumDim = 4
	// parallelNumDim is the concat rank written in a parallel rule when
	// nothing fixes it: FlexFlow's parallel rules concatenate 3-D tensors.
	parallelNumDim = 3
	// replicaDim is the PM_PARALLEL_DIM written for replicate and reduce,
	// whose single replica dimension FlexFlow's format names by a number.
	replicaDim = 0
)

// The formats written on the shared schema, as reasons name them.
const (
	tasoFormat     = "TASO"
	flexFlowFormat = "FlexFlow"
)

// exportRules turns our rules into the shared schema, for tasoFormat or
// flexFlowFormat. Graph input i becomes opId -(i+1), tsId 0; operators
// carry both their TASO type and their FlexFlow name. Parallel rules are
// written at the given degree (atDegree).
func exportRules(rs []*rules.Rule, format string, degree int) ([]xRule, []Skip) {
	var out []xRule
	var skipped []Skip
	for i, r := range rs {
		name := fmt.Sprintf("rule %d", i+1)
		if r.Conditional() {
			// Applied without its condition, the rule would be false.
			skipped = append(skipped, Skip{Name: name, Reason: "a condition on shapes, which " + format + "'s format cannot carry"})
			continue
		}
		r, reason := atDegree(r, degree)
		if reason != "" {
			skipped = append(skipped, Skip{Name: name, Reason: reason})
			continue
		}
		x, reason := exportRule(r, format)
		if reason == "" {
			reason = readsBack(r, &x, format)
		}
		if reason != "" {
			skipped = append(skipped, Skip{Name: name, Reason: reason})
			continue
		}
		x.name = fmt.Sprintf("rulebook_rule_%d", i+1)
		out = append(out, x)
	}
	return out, skipped
}

// readsBack checks that a written rule reads back as the same rule. The
// formats leave convolution groups to the shapes, so a rule whose groups
// TASO's pool of shapes would settle differently cannot be carried.
func readsBack(r *rules.Rule, x *xRule, format string) string {
	back, reason, _ := importer{reg: rules.All(), st: style{json: format == flexFlowFormat}}.convert(x)
	if reason != "" {
		return "does not read back: " + reason
	}
	_, want := r.Oriented()
	if _, got := back.Oriented(); got.String() != want.String() {
		return "conv2d groups that TASO's shapes do not imply (TASO infers groups from shapes)"
	}
	return ""
}

// atDegree writes a rule at a degree: a rule with the degree variable d
// holds at every degree and is written with d replaced; a rule whose
// degrees are concrete holds at those only and is written only if they
// all equal the degree asked for (FlexFlow applies a rule at the machine's
// degree, whatever degree it is written at).
func atDegree(r *rules.Rule, degree int) (*rules.Rule, string) {
	if r.HasDegreeVar() {
		return r.WithDegree(degree), ""
	}
	other := 0
	r.EachDegree(func(d int) {
		if d != degree {
			other = d
		}
	})
	if other != 0 {
		return nil, fmt.Sprintf("holds at degree %d only (no degree variable d), not at the degree written", other)
	}
	return r, ""
}

func exportRule(r *rules.Rule, format string) (xRule, string) {
	var x xRule
	ranks := inferRanks(r)
	tensor := func(v rules.Value) xTensor {
		if v.IsInput() {
			return xTensor{op: -1 - v.Input()}
		}
		return xTensor{op: v.Node, ts: v.Out}
	}
	for s, g := range []*rules.Graph{&r.Src, &r.Dst} {
		if len(g.Outputs) == 0 {
			return x, "a side without outputs"
		}
		for _, o := range g.Outputs {
			if o.IsInput() {
				return x, fmt.Sprintf("an output is a graph input (%s's mappedOutput pairs operators)", format)
			}
		}
		ops := make([]xOp, len(g.Nodes))
		for j, n := range g.Nodes {
			if format == tasoFormat && n.Op.TASO.None || format == flexFlowFormat && n.Op.FlexFlow.None {
				return x, fmt.Sprintf("%s has no %s operator type", n.Op.Name, format)
			}
			if symmetricPadding(n) {
				return x, fmt.Sprintf("%s pads symmetrically, which %s's PM_PAD cannot say", n.Op.Name, format)
			}
			ops[j] = xOp{typ: n.Op.TASO.Type, name: n.Op.FlexFlow.Type, para: exportParams(r, s, g, j, ranks)}
			if format == flexFlowFormat {
				for k := range ops[j].para { // FlexFlow names its keys
					ops[j].para[k].name = ops[j].para[k].key.String()
				}
			}
			for _, a := range n.Args {
				ops[j].in = append(ops[j].in, tensor(a))
			}
		}
		if s == 0 {
			x.src = ops
		} else {
			x.dst = ops
		}
	}
	for k := range r.Src.Outputs {
		a, b := tensor(r.Src.Outputs[k]), tensor(r.Dst.Outputs[k])
		x.out = append(x.out, xMap{srcOp: a.op, srcTs: a.ts, dstOp: b.op, dstTs: b.ts})
	}
	return x, ""
}

// symmetricPadding reports whether a node pads its window symmetrically
// (rules.PadSym), which TASO and FlexFlow, padding same or valid only,
// cannot express.
func symmetricPadding(n rules.Node) bool {
	for i, p := range n.Op.Params {
		if p.Name == "padding" && n.Params[i] == rules.PadSym {
			return true
		}
	}
	return false
}

// exportParams writes node j's parameters as TASO's keys, with what TASO
// needs and the rule does not say inferred (kernel sizes, ranks).
func exportParams(r *rules.Rule, side int, g *rules.Graph, j int, ranks *rankInfo) []xParam {
	n := g.Nodes[j]
	kv := func(key rules.TASOParam, value int) xParam { return xParam{key: key, value: value} }
	pad := func(v int) int {
		if v == rules.PadValid {
			return tasoPadValid
		}
		return tasoPadSame
	}
	switch n.Op.Name {
	case "conv2d":
		// Groups are not written: TASO infers them from shapes (see readsBack).
		stride, padding, act := n.Params[0], n.Params[1], n.Params[2]
		acti := tasoActNone
		if act == rules.ActRelu {
			acti = tasoActRelu
		}
		h, w := kernelSize(r, g, n.Args[1], 0)
		return []xParam{kv(rules.PMKernelH, h), kv(rules.PMKernelW, w), kv(rules.PMStrideH, stride), kv(rules.PMStrideW, stride),
			kv(rules.PMPad, pad(padding)), kv(rules.PMActi, acti)}
	case "pool_max", "pool_avg":
		k, stride := n.Params[0], n.Params[1]
		return []xParam{kv(rules.PMOpType, int(n.Op.TASO.Type)), kv(rules.PMKernelH, k), kv(rules.PMKernelW, k),
			kv(rules.PMStrideH, stride), kv(rules.PMStrideW, stride), kv(rules.PMPad, pad(n.Params[2])), kv(rules.PMActi, tasoActNone)}
	case "concat":
		axis := n.Params[0]
		dim := ranks.rank(side, rules.Value{Node: j})
		if dim < 0 {
			dim = defaultNumDim
			if r.UsesParallelOps() {
				dim = parallelNumDim
			}
		}
		dim = max(dim, axis+1)
		return []xParam{kv(rules.PMNumInputs, 2), kv(rules.PMAxis, axis), kv(rules.PMNumDim, dim)}
	case "split":
		return []xParam{kv(rules.PMNumOutputs, 2), kv(rules.PMAxis, n.Params[0])}
	case "transpose":
		// PM_OUTSHUFFLE 0: TASO's default, a transpose without a copy.
		return []xParam{kv(rules.PMNumDim, 2), kv(rules.PMPerm, tasoSwap), kv(rules.PMOutShuffle, 0)}
	case "matmul":
		return []xParam{kv(rules.PMActi, tasoActNone)}
	case "enlarge", "C_pool", "I_conv":
		return []xParam{kv(rules.PMKernelH, n.Params[0]), kv(rules.PMKernelW, n.Params[0])}
	case "partition", "combine":
		return []xParam{kv(rules.PMParallelDim, n.Params[0]), kv(rules.PMParallelDegree, n.Params[1])}
	case "replicate", "reduce":
		// FlexFlow's replicate and reduce name a dimension; ours have one
		// replica dimension, written as dimension replicaDim.
		return []xParam{kv(rules.PMParallelDim, replicaDim), kv(rules.PMParallelDegree, n.Params[0])}
	case "linear":
		acti := tasoActNone
		if n.Params[0] == rules.ActRelu {
			acti = tasoActRelu
		}
		return []xParam{kv(rules.PMActi, acti)}
	}
	return nil
}

// kernelSize infers the height and width of a conv2d kernel operand: from
// the rule's input shapes, the kernel of enlarge, C_pool and I_conv, or
// through operators that keep the spatial size; defaultKernel otherwise.
func kernelSize(r *rules.Rule, g *rules.Graph, v rules.Value, depth int) (int, int) {
	if h, w, ok := kernelSizeOf(r, g, v, depth); ok {
		return h, w
	}
	return defaultKernel, defaultKernel
}

func kernelSizeOf(r *rules.Rule, g *rules.Graph, v rules.Value, depth int) (int, int, bool) {
	if depth > len(g.Nodes) {
		return 0, 0, false
	}
	if v.IsInput() {
		if i := v.Input(); i < len(r.InputShapes) && r.InputShapes[i].Rank == 4 {
			return r.InputShapes[i].Dims[2], r.InputShapes[i].Dims[3], true
		}
		return 0, 0, false
	}
	n := g.Nodes[v.Node]
	switch n.Op.Name {
	case "enlarge", "C_pool", "I_conv":
		return n.Params[0], n.Params[0], true
	case "smul", "split":
		return kernelSizeOf(r, g, n.Args[0], depth+1)
	case "ewadd", "ewmul", "relu":
		for _, a := range n.Args {
			if h, w, ok := kernelSizeOf(r, g, a, depth+1); ok {
				return h, w, true
			}
		}
	case "concat":
		if n.Params[0] < 2 {
			for _, a := range n.Args {
				if h, w, ok := kernelSizeOf(r, g, a, depth+1); ok {
					return h, w, true
				}
			}
		}
	}
	return 0, 0, false
}
