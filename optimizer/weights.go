package optimizer

import (
	"fmt"
	"strconv"

	"rulebook/onnx"

	"rulebook/rules"
	"rulebook/runtime"
)

// Value is a graph input: a model input (no data) or a weight.
type Value struct {
	Name  string
	Shape []int
	// Data is a weight's data of shape Shape. A broadcast weight has
	// Compact instead: data of a shape that broadcasts to Shape (numpy's
	// rule, aligned on the right), such as a convolution's bias seen as
	// (C,1,1) or a matrix product's weight seen with a batch axis. Rules
	// see the full shape; lowering and costs use the compact one.
	Data, Compact *runtime.Tensor
	// Typed is the model's own tensor for a weight that is not float
	// (integer shapes and axes, read by opaque nodes): the runtime holds
	// every constant as float, so lowering writes this one back instead.
	Typed *onnx.Tensor
	// Origin names the model's initializer whose data a broadcast weight
	// shows at a larger shape, so that lowering can refer to that
	// initializer again where it writes the data unchanged.
	Origin string
}

// IsWeight reports whether the value is known ahead of time.
func (v Value) IsWeight() bool { return v.Data != nil || v.Compact != nil }

// Tensor is the weight's data at its full shape; a broadcast weight is
// materialised.
func (v Value) Tensor() *runtime.Tensor {
	switch {
	case v.Data != nil || v.Compact == nil:
		return v.Data
	case len(v.Compact.Data) == elements(v.Shape):
		// Only leading axes of 1 were added: the same data, reshaped.
		return &runtime.Tensor{Shape: v.Shape, Data: v.Compact.Data}
	}
	return broadcastTo(v.Compact, v.Shape)
}

// Stored is the data as lowering writes it: compact when broadcast.
func (v Value) Stored() *runtime.Tensor {
	if v.Compact != nil {
		return v.Compact
	}
	return v.Data
}

// broadcastTo expands t to shape by numpy's rule.
func broadcastTo(t *runtime.Tensor, shape []int) *runtime.Tensor {
	out := runtime.NewTensor(shape...)
	src := make([]int, len(shape)) // t's stride along each axis of shape, 0 where broadcast
	stride := 1
	for i := 1; i <= len(t.Shape); i++ {
		if d := t.Shape[len(t.Shape)-i]; d != 1 {
			src[len(shape)-i] = stride
		}
		stride *= t.Shape[len(t.Shape)-i]
	}
	index := make([]int, len(shape))
	at := 0
	for i := range out.Data {
		out.Data[i] = t.Data[at]
		for ax := len(shape) - 1; ax >= 0; ax-- {
			index[ax]++
			at += src[ax]
			if index[ax] < shape[ax] {
				break
			}
			at -= src[ax] * index[ax]
			index[ax] = 0
		}
	}
	return out
}

// compact finds the smallest shape t broadcasts from: every axis along
// which t is constant shrinks to 1, and leading ones are dropped.
func compact(t *runtime.Tensor) *runtime.Tensor {
	shape := append([]int(nil), t.Shape...)
	data := t.Data
	for ax := range shape {
		if shape[ax] > 1 && constantAlong(data, shape, ax) {
			data = firstAlong(data, shape, ax)
			shape[ax] = 1
		}
	}
	return &runtime.Tensor{Shape: trimOnes(shape), Data: data}
}

// trimOnes drops leading axes of 1, which broadcasting adds back.
func trimOnes(shape []int) []int {
	for len(shape) > 1 && shape[0] == 1 {
		shape = shape[1:]
	}
	return shape
}

func axisBlocks(shape []int, ax int) (outer, n, inner int) {
	outer, inner = 1, 1
	for i, d := range shape {
		switch {
		case i < ax:
			outer *= d
		case i > ax:
			inner *= d
		}
	}
	return outer, shape[ax], inner
}

func constantAlong(data []float32, shape []int, ax int) bool {
	outer, n, inner := axisBlocks(shape, ax)
	for o := 0; o < outer; o++ {
		base := o * n * inner
		for k := 1; k < n; k++ {
			for i := 0; i < inner; i++ {
				if data[base+k*inner+i] != data[base+i] {
					return false
				}
			}
		}
	}
	return true
}

func firstAlong(data []float32, shape []int, ax int) []float32 {
	outer, n, inner := axisBlocks(shape, ax)
	out := make([]float32, 0, outer*inner)
	for o := 0; o < outer; o++ {
		out = append(out, data[o*n*inner:o*n*inner+inner]...)
	}
	return out
}

// weightNodes marks the nodes computed from weights alone: inference
// never runs them, lowering folds them into initializers.
func (g *Graph) weightNodes() []bool {
	weight := make([]bool, len(g.G.Nodes))
	for i := range g.G.Nodes {
		weight[i] = g.computedFromWeights(&g.G.Nodes[i], weight)
	}
	return weight
}

// computedFromWeights reports whether a registry node reads weights only,
// given which of its operand nodes do.
func (g *Graph) computedFromWeights(n *rules.Node, weight []bool) bool {
	if _, opaque := g.opaqueOf(n); opaque {
		return false
	}
	for _, a := range n.Args {
		if a.IsInput() && !g.Inputs[a.Input()].IsWeight() || !a.IsInput() && !weight[a.Node] {
			return false
		}
	}
	return true
}

// channelBias reports whether a weight-only value is constant over every
// axis but the channels (axis 1) of a rank-4 tensor, so that a Conv can
// add it as its bias. It follows the value's computation symbolically, so
// that costs can tell before folding.
func (g *Graph) channelBias(v rules.Value, weight []bool) bool {
	return g.channelBiasMemo(v, weight, map[int]bool{})
}

// channelBiasMemo remembers each node's answer, since weight-only
// computations share operands.
func (g *Graph) channelBiasMemo(v rules.Value, weight []bool, memo map[int]bool) bool {
	if v.IsInput() && len(g.Inputs[v.Input()].Shape) != 4 || !v.IsInput() && g.Shapes[v.Node][v.Out].Rank != 4 {
		return false
	}
	if v.IsInput() {
		c := g.Inputs[v.Input()].Compact
		if c == nil {
			return false
		}
		s := trimOnes(c.Shape)
		return len(s) == 3 && s[1] == 1 && s[2] == 1 || len(s) == 1 && s[0] == 1
	}
	if !weight[v.Node] {
		return false
	}
	if ok, seen := memo[v.Node]; seen {
		return ok
	}
	n := &g.G.Nodes[v.Node]
	var args []rules.Value
	if a := adapterOf(n.Op); a != nil && a.biasArgs != nil {
		args = a.biasArgs(n.Params, n.Args)
	}
	ok := len(args) > 0
	for _, a := range args {
		ok = ok && g.channelBiasMemo(a, weight, memo)
	}
	memo[v.Node] = ok
	return ok
}

// fold computes the weight-only values that other nodes or the outputs
// read, with the registry's own kernels (in float64), so that inference
// starts from their results.
func (g *Graph) fold(live, weight []bool) (map[rules.Value]Value, error) {
	f := &folder{g: g, results: map[rules.Value]*rules.FloatTensor{}, folded: map[rules.Value]Value{}}
	var reads []rules.Value
	for i, n := range g.G.Nodes {
		if live[i] && !weight[i] {
			reads = append(reads, n.Args...)
		}
	}
	for _, v := range append(reads, g.G.Outputs...) {
		if v.IsInput() || !weight[v.Node] {
			continue
		}
		if err := f.keep(v); err != nil {
			return nil, err
		}
	}
	return f.folded, nil
}

// folder evaluates weight-only values, each once.
type folder struct {
	g       *Graph
	results map[rules.Value]*rules.FloatTensor
	folded  map[rules.Value]Value
}

// keep folds a value that inference reads.
func (f *folder) keep(v rules.Value) error {
	if _, done := f.folded[v]; done {
		return nil
	}
	t, err := f.eval(v)
	if err != nil {
		return err
	}
	full := toFloat32(t)
	f.folded[v] = Value{Name: f.g.foldName(v), Shape: full.Shape, Compact: compact(full)}
	return nil
}

// eval computes a value from the weights.
func (f *folder) eval(v rules.Value) (*rules.FloatTensor, error) {
	if t, ok := f.results[v]; ok {
		return t, nil
	}
	g := f.g
	if v.IsInput() {
		t := toFloat64(g.Inputs[v.Input()].Tensor(), g.shapeOf(v))
		f.results[v] = t
		return t, nil
	}
	n := &g.G.Nodes[v.Node]
	if n.Op.FloatKernel == nil {
		return nil, fmt.Errorf("fold node %d: %s has no kernel", v.Node, n.Op.Name)
	}
	in := make([]*rules.FloatTensor, len(n.Args))
	for k, a := range n.Args {
		t, err := f.eval(a)
		if err != nil {
			return nil, err
		}
		in[k] = t
	}
	out := make([]*rules.FloatTensor, len(g.Shapes[v.Node]))
	for k, s := range g.Shapes[v.Node] {
		out[k] = rules.NewTensor[float64](s)
	}
	n.Op.FloatKernel(n.Params, in, out)
	for k, t := range out {
		f.results[rules.Value{Node: v.Node, Out: k}] = t
	}
	return f.results[v], nil
}

func toFloat64(t *runtime.Tensor, shape rules.Shape) *rules.FloatTensor {
	out := rules.NewTensor[float64](shape)
	for i, x := range t.Data {
		out.Data[i] = float64(x)
	}
	return out
}

func toFloat32(t *rules.FloatTensor) *runtime.Tensor {
	out := runtime.NewTensor(t.Shape.DimList()...)
	for i, x := range t.Data {
		out.Data[i] = float32(x)
	}
	return out
}

// foldName names the initializer of a folded value.
func (g *Graph) foldName(v rules.Value) string {
	return g.gen("fold", strconv.Itoa(v.Node), strconv.Itoa(v.Out))
}
