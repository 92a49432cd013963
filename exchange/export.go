package exchange

import (
	"fmt"

	"rulebook/rules"
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
			at := site{r: r, g: g, side: s, node: j, ranks: ranks}
			ops[j] = xOp{typ: n.Op.TASO.Type, name: n.Op.FlexFlow.Type, para: exportParams(n, at)}
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
	for spec, v := range n.ParamValues() {
		if spec.Name == "padding" && v == rules.PadSym {
			return true
		}
	}
	return false
}

// exportParams writes a node's parameters as TASO's keys, by its row's
// encoding, with what TASO needs and the rule does not say inferred
// (kernel sizes, ranks).
func exportParams(n rules.Node, at site) []xParam {
	var out []xParam
	for _, kv := range n.Op.EncodeKeys(n.Params, at) {
		out = append(out, xParam{key: kv.Key, value: kv.Value})
	}
	return out
}

// site is a node of a rule, as its encoding asks about it.
type site struct {
	r          *rules.Rule
	g          *rules.Graph
	side, node int
	ranks      *rankInfo
}

// Kernel infers the height and width of the kernel at an operand.
func (s site) Kernel(operand int) (int, int, bool) {
	return kernelSizeOf(s.r, s.g, s.g.Nodes[s.node].Args[operand], 0)
}

// Rank is the rank inferred for the node's result.
func (s site) Rank() int { return s.ranks.rank(s.side, rules.Value{Node: s.node}) }

// Parallel reports whether the rule uses parallel operators.
func (s site) Parallel() bool { return s.r.UsesParallelOps() }

// kernelSizeOf infers the height and width of a kernel from the rule's
// input shapes, the kernel an operator makes (enlarge, C_pool, I_conv), or
// through operators that keep the spatial size.
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
	keys := n.Op.Keys
	if keys.Kernel != nil {
		k := keys.Kernel(n.Params)
		return k, k, true
	}
	if keys.Spatial == nil {
		return 0, 0, false
	}
	for _, a := range keys.Spatial(n.Params) {
		if h, w, ok := kernelSizeOf(r, g, n.Args[a], depth+1); ok {
			return h, w, true
		}
	}
	return 0, 0, false
}
