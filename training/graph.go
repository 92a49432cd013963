// Package training derives the work of one training step from an ONNX
// inference graph. Per operator it gives the forward and backward FLOPs
// and memory traffic, the weights owned, what is saved for the backward
// pass, and for weight products the matrix sizes a planner cuts.
//
// Shapes are the runtime's (runtime.InferShapes), inferred without
// weights, with the batch (every input's dimension 0) set by the caller. Products cost 2·outputs·K
// FLOPs forward and twice that backward; other operators cost about their
// outputs, and moving ones (Reshape, Identity, Constant) nothing. Bytes
// are each operator's inputs and outputs, once; backward moves twice the
// forward bytes. docs/planner.md ("Work per operator") has the table.
package training

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"rulebook/internal/checked"
	"rulebook/onnx"
	"rulebook/rules"
	"rulebook/runtime"
)

// Work is an amount of computation and memory traffic, as the registry
// counts it.
type Work = rules.Work

// Product describes a weight product: M rows times a K × N weight. Weight
// is the weight's tensor name, with its input-feature and output-feature
// axes.
type Product struct {
	M, K, N       int64
	Weight        string
	WeightInAxis  int
	WeightOutAxis int
	// Linear is a matrix product (MatMul, Gemm), as against a convolution.
	Linear bool
	// Conv are a convolution's parameters in the registry's terms, which
	// the rules that cut it are written at; nil for a matrix product, or a
	// window the registry cannot express.
	Conv *rules.ConvAttrs
}

// Op is one operator of the training step.
type Op struct {
	Name, Type string
	// Module is the PyTorch module path of the node's name:
	// "/layers.0/q/MatMul" is layers.0.q.
	Module            string
	Inputs, Outputs   []string
	Forward, Backward Work
	// ParamBytes are the weights the operator owns (each weight belongs to
	// its first reader).
	ParamBytes float64
	// Saved is what the operator keeps for its backward pass, as PyTorch's
	// autograd does; ActivationBytes counts the part of it no earlier
	// operator saved already (one storage is kept once).
	Saved           []Saved
	ActivationBytes float64
	OutputBytes     float64
	Product         *Product // nil unless a weight product
	// NeedsAllFeatures: the operator reads every feature of its input
	// (a normalization, reduction, flatten, concat or gather), so a
	// tensor-parallel planner must gather feature slices first.
	NeedsAllFeatures bool
	// Class is what the operator does with its data (ClassOf its Type).
	Class Class
	// Lookup: an embedding lookup, a Gather of rows from a weight (its
	// table); its work counts the rows gathered, not the table.
	Lookup bool
	// Attention is set on every operator of a fused attention group
	// (Graph.FuseAttention): the group's first operator, Attention.Ops[0],
	// carries the fused kernel's work and saved tensors, the others none.
	// Its sizes (Batch, Heads, SeqQ, SeqK, HeadDim) are what a measured
	// profile of the kernel is looked up by.
	Attention *Attention

	// Perm is a Transpose's permutation; Reduces the axes an operator
	// normalizes along (a Softmax's axis). Both let a planner follow a
	// cut axis through the graph (readAxes), and find attention.
	Perm    []int
	Reduces []int
}

// Graph is a model's training step at one batch size.
type Graph struct {
	Model string
	Batch int64
	// BatchAxis is the inputs' axis that is the batch (findBatchAxis):
	// 0, or 1 for a batch_first=False export.
	BatchAxis int
	Ops       []Op

	shapes    map[string][]int64
	batched   map[string]bool
	batchAxes map[string]int // where the batch lies in a value, where it is known
	inputs    map[string]bool
	producer  map[string]int
	consumers map[string][]int
	storage   map[string]string // a view's value -> the value whose memory it shares
	constant  map[string]bool   // constants and what is computed from them alone
	attention []*Attention
	fused     bool
}

// Producer is the operator writing value v, if any.
func (g *Graph) Producer(v string) (int, bool) { i, ok := g.producer[v]; return i, ok }

// Consumers are the operators reading value v.
func (g *Graph) Consumers(v string) []int { return g.consumers[v] }

// Edges are the graph's data dependences: an operator, then one that
// reads an output of it, once per pair, in operator order. Only values
// computed from the graph's inputs count: weights, constants and what is
// computed from them alone (a weight through an Identity) are at hand
// wherever they are read, and carry no activation.
func (g *Graph) Edges() [][2]int {
	data := map[string]bool{}
	for v := range g.inputs {
		data[v] = true
	}
	var out [][2]int
	for i, op := range g.Ops {
		fromData := slices.ContainsFunc(op.Inputs, func(v string) bool { return data[v] })
		seen := map[int]bool{}
		for _, v := range op.Outputs {
			if !fromData {
				continue
			}
			data[v] = true
			for _, j := range g.consumers[v] {
				if !seen[j] {
					seen[j] = true
					out = append(out, [2]int{i, j})
				}
			}
		}
	}
	return out
}

// ValueShape is v's shape at the graph's batch; nil if unknown.
func (g *Graph) ValueShape(v string) []int64 { return g.shapes[v] }

// HasBatch reports whether v carries the batch (on BatchAxisOf(v)).
func (g *Graph) HasBatch(v string) bool { return g.batched[v] }

// BatchAxisOf is the axis of v that carries the batch: the one that grew
// with it when the batch axis was found, else dimension 0; −1 when v does
// not carry the batch.
func (g *Graph) BatchAxisOf(v string) int {
	if !g.batched[v] {
		return -1
	}
	if k, ok := g.batchAxes[v]; ok && k < len(g.shapes[v]) {
		return k
	}
	return 0
}

// IsInput reports whether v is a graph input.
func (g *Graph) IsInput(v string) bool { return g.inputs[v] }

// ValueBytes is v's size in bytes (4 per element).
func (g *Graph) ValueBytes(v string) float64 { return 4 * float64(runtime.Elements(g.shapes[v])) }

// Params is the number of weights (4-byte elements).
func (g *Graph) Params() float64 {
	var b float64
	for _, op := range g.Ops {
		b += op.ParamBytes
	}
	return b / 4
}

// Total sums the forward and backward work.
func (g *Graph) Total() (fwd, bwd Work) {
	for _, op := range g.Ops {
		fwd.FLOPs += op.Forward.FLOPs
		fwd.Bytes += op.Forward.Bytes
		bwd.FLOPs += op.Backward.FLOPs
		bwd.Bytes += op.Backward.Bytes
	}
	return fwd, bwd
}

// ErrInvalid marks a model whose shapes or attributes no ONNX runtime
// accepts (a zero stride, a Reshape with two −1, an axis past the rank,
// a shape whose size overflows), as against one the planner does not
// support.
var ErrInvalid = errors.New("invalid model")

// invalid is an error wrapping ErrInvalid.
func invalid(format string, args ...any) error {
	return fmt.Errorf(format+" (%w)", append(args, ErrInvalid)...)
}

// checkShape refuses a negative dimension or a shape whose element count
// (and byte count) overflows; every shape the inference keeps passed it,
// so elements cannot overflow afterwards.
func checkShape(what string, s []int64) error {
	for _, d := range s {
		if d < 0 {
			return invalid("%s has the negative dimension %d in %v", what, d, s)
		}
	}
	if _, err := checked.Product(append([]int64{4}, s...)...); err != nil {
		return invalid("%s has shape %v, too large: its size in bytes, %w", what, s, err)
	}
	return nil
}

// ModulePath reads a PyTorch module path from an exported node name. Each
// scope either extends the path relatively ("q" under "layers.0") or
// repeats it whole ("layer1.0" under "layer1"), as torch.onnx writes them.
func ModulePath(node string) string {
	parts := strings.Split(strings.Trim(node, "/"), "/")
	if len(parts) < 2 {
		return ""
	}
	path := ""
	for _, p := range parts[:len(parts)-1] {
		switch {
		case path == "":
			path = p
		case strings.HasPrefix(p, path+"."):
			path = p
		default:
			path += "." + p
		}
	}
	return path
}

// FromONNX infers shapes with the batch axis of every graph input set to
// batch and derives each operator's work. The batch axis is found (see
// findBatchAxis). The batch must be given (work depends on it); without
// it the error says whether the model's batch is symbolic or fixed.
func FromONNX(m *onnx.Model, name string, batch int64) (*Graph, error) {
	if m.Graph == nil || len(m.Graph.Inputs) == 0 {
		return nil, fmt.Errorf("%s: the model has no graph inputs", name)
	}
	first := firstDataInput(m.Graph)
	if first == nil || !first.HasShape || len(first.Shape) == 0 {
		return nil, fmt.Errorf("%s: the first input has no shape, so no batch dimension", name)
	}
	axis, axes, err := findBatchAxis(m)
	if err != nil {
		return nil, fmt.Errorf("%s: finding the batch axis: %w", name, err)
	}
	if batch <= 0 {
		if d := first.Shape[min(axis, len(first.Shape)-1)]; !d.HasValue {
			return nil, fmt.Errorf("%s: the batch dimension %q of input %s has no size; pass --batch N", name, d.Param, first.Name)
		}
		return nil, fmt.Errorf("%s: no batch dimension (input %s has fixed shape %v); pass --batch N to set dimension %d, the batch, to N", name, first.Name, first.Shape, axis)
	}
	g := &Graph{Model: name, Batch: batch, BatchAxis: axis, batchAxes: axes, shapes: map[string][]int64{}, batched: map[string]bool{},
		inputs: map[string]bool{}, producer: map[string]int{}, consumers: map[string][]int{}, storage: map[string]string{}}
	inf, err := newInference(m, g, batch, axis)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	for _, n := range m.Graph.Nodes {
		if err := inf.node(n); err != nil {
			return nil, fmt.Errorf("%s: node %s (%s): %w", name, n.Name, n.OpType, err)
		}
	}
	g.constant = inf.consts
	g.fuseGELU()
	g.countSaved()
	g.findAttention()
	return g, nil
}

// firstDataInput is the first graph input that is not an initializer.
func firstDataInput(g *onnx.Graph) *onnx.ValueInfo {
	for _, in := range g.Inputs {
		if g.Initializer(in.Name) == nil {
			return in
		}
	}
	return nil
}
