package training

import (
	"slices"

	"rulebook/onnx"
	"rulebook/runtime"
)

// Saved is one tensor an operator keeps for its backward pass.
type Saved struct {
	// Value is the saved value's name; "" for a tensor the operator makes
	// for itself (LayerNorm's mean and rstd, a dropout mask, pool indices).
	Value string
	Bytes float64
}

// Storage is the value whose memory v shares: views (Transpose, Squeeze,
// Unsqueeze, Identity, and a Reshape or Flatten of a contiguous value)
// share their input's storage, as PyTorch's do, so a tensor saved through
// two views is counted once.
func (g *Graph) Storage(v string) string {
	if s, ok := g.storage[v]; ok {
		return s
	}
	return v
}

// saveRule is what the gradient of an operator type reads, as PyTorch's
// autograd keeps it (tools/autograd/derivatives.yaml).
type saveRule int

const (
	saveInputs  saveRule = iota // the activation inputs (the default)
	saveNone                    // only shapes: sums, copies, views
	saveOutput                  // the output: ReLU, Sigmoid, Tanh, Softmax, Exp, Sqrt
	saveOperand                 // each input whose partner needs a gradient: products, Mul, Div
)

var saveRules = map[string]saveRule{
	"Add": saveNone, "Sub": saveNone, "Neg": saveNone, "Sum": saveNone, "Concat": saveNone, "Split": saveNone,
	"Slice": saveNone, "Transpose": saveNone, "Flatten": saveNone, "Pad": saveNone, "Reshape": saveNone,
	"Identity": saveNone, "Constant": saveNone, "Shape": saveNone, "Squeeze": saveNone, "Unsqueeze": saveNone,
	"Expand": saveNone, "Tile": saveNone, "Cast": saveNone, "ReduceMean": saveNone, "ReduceSum": saveNone,
	"GlobalAveragePool": saveNone, "Resize": saveNone,
	"Relu": saveOutput, "Sigmoid": saveOutput, "Tanh": saveOutput, "Softmax": saveOutput, "LogSoftmax": saveOutput,
	"Exp": saveOutput, "Sqrt": saveOutput, "Reciprocal": saveOutput,
	"MatMul": saveOperand, "Gemm": saveOperand, "Conv": saveOperand, "Mul": saveOperand, "Div": saveOperand,
}

// needsGrad reports whether autograd computes a gradient for v: an
// activation or a weight. A one-element float initializer is a number
// torch.onnx wrote down (a scale, GELU's constants), not a parameter.
func (inf *inference) needsGrad(v string) bool {
	if inf.activation(v) {
		return true
	}
	w, ok := inf.weights[v]
	return ok && runtime.Elements(inf.g.shapes[w]) > 1
}

// saved lists what n keeps for backward. Weights are not listed: they are
// kept anyway.
func (inf *inference) saved(n *onnx.Node, in, out [][]int64) []Saved {
	bytes := func(s []int64) float64 { return 4 * float64(runtime.Elements(s)) }
	act := func(i int) []Saved {
		if i < len(n.Inputs) && inf.activation(n.Inputs[i]) {
			return []Saved{{Value: n.Inputs[i], Bytes: bytes(in[i])}}
		}
		return nil
	}
	var s []Saved
	switch n.OpType {
	case "LayerNormalization":
		// the input, and a mean and a reciprocal deviation per row
		s = act(0)
		if len(in[0]) > 0 && len(s) > 0 {
			axis := int(attrInt(n, "axis", -1))
			if axis < 0 {
				axis += len(in[0])
			}
			rows := runtime.Elements(in[0][:max(0, min(axis, len(in[0])))])
			s = append(s, Saved{Bytes: 2 * 4 * float64(rows)})
		}
		return s
	case "Gather":
		// only the indices: the gradient scatters into the gathered rows
		if len(n.Inputs) > 1 && inf.activation(n.Inputs[1]) {
			return []Saved{{Value: n.Inputs[1], Bytes: 8 * float64(runtime.Elements(in[1]))}}
		}
		return nil
	case "Dropout":
		// a mask of one byte per element
		return []Saved{{Bytes: float64(runtime.Elements(out[0]))}}
	case "MaxPool":
		// the input and the argmax of every output (int64)
		return append(act(0), Saved{Bytes: 8 * float64(runtime.Elements(out[0]))})
	case "Where":
		return nil
	}
	switch saveRules[n.OpType] {
	case saveNone:
	case saveOutput:
		if len(n.Outputs) > 0 && n.Outputs[0] != "" {
			s = append(s, Saved{Value: n.Outputs[0], Bytes: bytes(out[0])})
		}
	case saveOperand:
		s = inf.operands(n, act)
	default:
		for i := range n.Inputs {
			s = append(s, act(i)...)
		}
	}
	return s
}

// operands is what a product, Mul or Div keeps: each of its first two
// inputs whose partner needs a gradient (x·W keeps x for W's gradient),
// and for a Div by an activation both.
func (inf *inference) operands(n *onnx.Node, act func(int) []Saved) []Saved {
	if len(n.Inputs) < 2 {
		return act(0)
	}
	a, b := n.Inputs[0], n.Inputs[1]
	if n.OpType == "Div" {
		if inf.needsGrad(b) {
			return append(act(0), act(1)...)
		}
		return nil
	}
	var s []Saved
	if inf.needsGrad(b) {
		s = append(s, act(0)...)
	}
	if inf.needsGrad(a) {
		s = append(s, act(1)...)
	}
	return s
}

// views are the operators whose output is a view of their input in
// PyTorch; Reshape and Flatten copy a strided (transposed) input.
var views = map[string]bool{"Transpose": true, "Squeeze": true, "Unsqueeze": true, "Identity": true, "Reshape": true, "Flatten": true}

// view records that n's output shares its input's memory, when it does.
func (inf *inference) view(n *onnx.Node) {
	g := inf.g
	if !views[n.OpType] || len(n.Inputs) == 0 || len(n.Outputs) != 1 {
		return
	}
	in, out := n.Inputs[0], n.Outputs[0]
	if (n.OpType == "Reshape" || n.OpType == "Flatten") && inf.strided[in] {
		return
	}
	g.storage[out] = g.Storage(in)
	perm := n.Attr("perm")
	inf.strided[out] = inf.strided[in] || (n.OpType == "Transpose" && (perm == nil || !identityPerm(perm.Ints)))
}

func identityPerm(p []int64) bool {
	for i, d := range p {
		if int64(i) != d {
			return false
		}
	}
	return true
}

// countSaved sets each operator's ActivationBytes to what it saves that
// no earlier operator saved already (the same storage counted once).
func (g *Graph) countSaved() {
	seen := map[string]bool{}
	for i := range g.Ops {
		op := &g.Ops[i]
		op.ActivationBytes = 0
		for _, s := range op.Saved {
			if s.Value != "" {
				k := g.Storage(s.Value)
				if seen[k] {
					continue
				}
				seen[k] = true
			}
			op.ActivationBytes += s.Bytes
		}
	}
}

// SavedBytes is everything the graph keeps for its backward pass, each
// storage once.
func (g *Graph) SavedBytes() float64 {
	var b float64
	for _, op := range g.Ops {
		b += op.ActivationBytes
	}
	return b
}

// fuseGELU reads torch.onnx's export of GELU, x·(1 + erf(x/√2))·½ written
// as Div, Erf, Add, Mul, Mul, as the one operator it was: PyTorch's GELU
// saves only its input x, where the five operators as written would keep
// four tensors.
func (g *Graph) fuseGELU() {
	for i, op := range g.Ops {
		if op.Type != "Erf" || len(op.Inputs) != 1 {
			continue
		}
		group, x, ok := g.gelu(i)
		if !ok {
			continue
		}
		for _, j := range group {
			g.Ops[j].Saved = nil
		}
		g.Ops[group[3]].Saved = []Saved{{Value: x, Bytes: g.ValueBytes(x)}}
	}
}

// gelu matches the GELU around Erf operator e: the Div (or Mul) before
// it, the Add and Mul after it and a final scaling Mul if there is one.
func (g *Graph) gelu(e int) (group []int, x string, ok bool) {
	div, ok := g.Producer(g.Ops[e].Inputs[0])
	if !ok || !g.scaling(div, "Div", "Mul") || len(g.Consumers(g.Ops[div].Outputs[0])) != 1 {
		return nil, "", false
	}
	x = g.Ops[div].Inputs[0]
	add, ok := g.only(e)
	if !ok || !g.scaling(add, "Add") {
		return nil, "", false
	}
	mul, ok := g.only(add)
	if !ok || g.Ops[mul].Type != "Mul" || !slices.Contains(g.Ops[mul].Inputs, x) {
		return nil, "", false
	}
	group = []int{div, e, add, mul}
	if half, ok := g.only(mul); ok && g.scaling(half, "Mul", "Div") {
		group = append(group, half)
	}
	return group, x, true
}

// only is the single operator reading op i's single output.
func (g *Graph) only(i int) (int, bool) {
	if len(g.Ops[i].Outputs) != 1 {
		return 0, false
	}
	c := g.Consumers(g.Ops[i].Outputs[0])
	if len(c) != 1 {
		return 0, false
	}
	return c[0], true
}

// scaling reports whether op i is one of types with a number (a
// one-element constant) as its second input.
func (g *Graph) scaling(i int, types ...string) bool {
	op := g.Ops[i]
	return slices.Contains(types, op.Type) && len(op.Inputs) == 2 && g.number(op.Inputs[1])
}

// number reports whether v is a one-element constant, not data: an
// initializer, a Constant's output or one computed from constants.
func (g *Graph) number(v string) bool {
	if g.inputs[v] || runtime.Elements(g.shapes[v]) != 1 {
		return false
	}
	_, made := g.Producer(v)
	return !made || g.constant[v]
}
