package runtime

import (
	"slices"

	"rulebook/runtime/gemm"
)

// A session runs a list of steps built from the model's nodes, where some
// runs of nodes are fused into one step that makes a single pass over
// memory and a single dispatch:
//
//   - a Relu into the Conv or binary operator that alone feeds it;
//   - the bias Add after a MatMul into the product (C preset to the bias);
//   - layer normalisation as exported by PyTorch (ReduceMean, Sub, Pow,
//     ReduceMean, Add ε, Sqrt, Div, Mul γ, Add β) into one LayerNormalization;
//   - erf GELU (Div c, Erf, Add a, Mul x, Mul m) into one elementwise pass.
//
// Values inside a fused run are never materialised. The model's nodes are
// left as they are, so TimeNode and bench-ops still time each node alone.

// step is one unit of a session's execution.
type step struct {
	in, out []int
	kernel  kernel
	node    int // the model node the step ends with, for messages
}

// reluFuser is a kernel that can return a copy of itself whose outputs
// pass through Relu.
type reluFuser interface {
	withRelu() kernel
}

// fuser finds fusable runs of nodes.
type fuser struct {
	m        *Model
	roles    []valueRole
	readers  [][]int // per value, the nodes that read it
	producer []int   // per value, the node that writes it, or -1
	done     []bool  // per node, absorbed into a step already
}

// Fusion names a kind of fused run.
type Fusion string

// The runs of nodes a session fuses (see above).
const (
	FusedLayerNorm Fusion = "layer normalisation"
	FusedGELU      Fusion = "GELU"
	FusedEpilogue  Fusion = "epilogue" // a Relu or a bias Add into the node before it
)

// FusedRun is a run of the model's nodes that a session executes as one
// step.
type FusedRun struct {
	Kind Fusion
	// Nodes names each node of the run by its first output.
	Nodes []string
}

// FusedRuns lists the runs of nodes that a session fuses into one step.
// The optimizer keeps a layer normalisation or a GELU whole: ONNX Runtime
// fuses both too, and a rewrite inside one would break the fusion.
func (m *Model) FusedRuns() []FusedRun {
	var out []FusedRun
	for _, r := range m.fusedRuns(m.valueRoles()) {
		run := FusedRun{Kind: r.kind}
		for _, i := range r.absorbed {
			run.Nodes = append(run.Nodes, m.values[m.nodes[i].out[0]].name)
		}
		out = append(out, run)
	}
	return out
}

// fusedRun is a run of nodes and the step that runs them.
type fusedRun struct {
	kind     Fusion
	step     step
	absorbed []int // the run's nodes
}

// fusedRuns finds the runs a session fuses, trying each pattern at each
// node not yet in a run, in the order of the nodes.
func (m *Model) fusedRuns(roles []valueRole) []fusedRun {
	f := &fuser{m: m, roles: roles, readers: make([][]int, len(m.values)),
		producer: make([]int, len(m.values)), done: make([]bool, len(m.nodes))}
	for id := range f.producer {
		f.producer[id] = -1
	}
	for i, n := range m.nodes {
		for _, id := range n.in {
			if id >= 0 && !slices.Contains(f.readers[id], i) {
				f.readers[id] = append(f.readers[id], i)
			}
		}
		for _, id := range n.out {
			if id >= 0 {
				f.producer[id] = i
			}
		}
	}
	patterns := []struct {
		kind  Fusion
		match func(int) (step, []int, bool)
	}{{FusedLayerNorm, f.layerNorm}, {FusedGELU, f.gelu}, {FusedEpilogue, f.epilogue}}
	var runs []fusedRun
	for i := range m.nodes {
		if f.done[i] {
			continue
		}
		for _, p := range patterns {
			if s, absorbed, ok := p.match(i); ok {
				runs = append(runs, fusedRun{kind: p.kind, step: s, absorbed: absorbed})
				for _, j := range absorbed {
					f.done[j] = true
				}
				break
			}
		}
	}
	return runs
}

// steps returns the model's nodes as session steps, fused where a pattern
// above matches and fuse is set: each run's step replaces the node the
// run ends with, and its other nodes are left out.
func (m *Model) steps(roles []valueRole, fuse bool) []step {
	fused, absorbed := map[int]step{}, map[int]bool{}
	if fuse {
		for _, r := range m.fusedRuns(roles) {
			fused[r.step.node] = r.step
			for _, j := range r.absorbed {
				absorbed[j] = true
			}
		}
	}
	var out []step
	for i, n := range m.nodes {
		if s, ok := fused[i]; ok {
			out = append(out, s)
		} else if !absorbed[i] {
			out = append(out, step{in: n.in, out: n.out, kernel: n.kernel, node: i})
		}
	}
	return out
}

// sole returns the node that alone reads value id, an intermediate.
func (f *fuser) sole(id int) (int, bool) {
	if id < 0 || f.roles[id] != roleIntermediate || len(f.readers[id]) != 1 {
		return -1, false
	}
	r := f.readers[id][0]
	return r, !f.done[r]
}

// op returns node i's operator, or "" when it was absorbed.
func (f *fuser) op(i int) string {
	if i < 0 || f.done[i] {
		return ""
	}
	return f.m.nodes[i].op
}

// constScalar returns the value of a one-element constant.
func (f *fuser) constScalar(id int) (float32, bool) {
	if id < 0 || !f.m.values[id].isConst() || len(f.m.values[id].konst.Data) != 1 {
		return 0, false
	}
	return f.m.values[id].konst.Data[0], true
}

// other returns node n's input that is not id (n has two inputs).
func other(n *node, id int) int {
	if n.in[0] == id {
		return n.in[1]
	}
	return n.in[0]
}

// epilogue fuses a Relu, or a MatMul's bias Add, into node i.
func (f *fuser) epilogue(i int) (step, []int, bool) {
	n := f.m.nodes[i]
	if len(n.out) != 1 {
		return step{}, nil, false
	}
	j, ok := f.sole(n.out[0])
	if !ok {
		return step{}, nil, false
	}
	next := f.m.nodes[j]
	if r, ok := n.kernel.(reluFuser); ok && isRelu(next.kernel) {
		return step{in: n.in, out: next.out, kernel: r.withRelu(), node: j}, []int{i, j}, true
	}
	mk, ok := n.kernel.(*matMulKernel)
	if !ok || next.op != "Add" || mk.batches != 1 || !slices.Equal(f.shape(next.out[0]), f.shape(n.out[0])) {
		return step{}, nil, false
	}
	bias := other(next, n.out[0])
	if bias < 0 || !f.m.values[bias].isConst() || !isRowVector(f.shape(bias), mk.n) {
		return step{}, nil, false
	}
	fusedK := *mk
	fusedK.bias = true
	return step{in: []int{n.in[0], n.in[1], bias}, out: next.out, kernel: &fusedK, node: j}, []int{i, j}, true
}

func (f *fuser) shape(id int) []int { return f.m.values[id].shape }

// isRowVector reports whether shape holds n elements along its last axis
// only, so that it broadcasts over the rows of an m×n product.
func isRowVector(shape []int, n int) bool {
	return len(shape) > 0 && shape[len(shape)-1] == n && numElements(shape) == n
}

func isRelu(k kernel) bool {
	u, ok := k.(unaryKernel)
	return ok && u.op == unaryRelu
}

// reluInPlace applies Relu to x in place.
func reluInPlace(x []float32) { gemm.AddMax(x, x, 0, 0) }

// layerNorm matches PyTorch's exported layer normalisation over the last
// axis, starting at its first ReduceMean (node i).
func (f *fuser) layerNorm(i int) (step, []int, bool) {
	m := f.m
	r1 := m.nodes[i]
	if !f.lastAxisMean(i) {
		return step{}, nil, false
	}
	x, mu := r1.in[0], r1.out[0]
	size := f.shape(x)[len(f.shape(x))-1]
	sub, ok := f.sole(mu)
	if !ok || f.op(sub) != "Sub" || m.nodes[sub].in[0] != x || m.nodes[sub].in[1] != mu {
		return step{}, nil, false
	}
	d := m.nodes[sub].out[0]
	if f.roles[d] != roleIntermediate || len(f.readers[d]) != 2 {
		return step{}, nil, false
	}
	pow, div := f.readers[d][0], f.readers[d][1]
	if f.op(pow) != "Pow" {
		pow, div = div, pow
	}
	if f.op(pow) != "Pow" || m.nodes[pow].in[0] != d {
		return step{}, nil, false
	}
	if two, ok := f.constScalar(m.nodes[pow].in[1]); !ok || two != 2 {
		return step{}, nil, false
	}
	r2, ok := f.sole(m.nodes[pow].out[0])
	if !ok || !f.lastAxisMean(r2) {
		return step{}, nil, false
	}
	addEps, ok := f.sole(m.nodes[r2].out[0])
	if !ok || f.op(addEps) != "Add" {
		return step{}, nil, false
	}
	eps, ok := f.constScalar(other(m.nodes[addEps], m.nodes[r2].out[0]))
	if !ok {
		return step{}, nil, false
	}
	sqrt, ok := f.sole(m.nodes[addEps].out[0])
	if !ok || f.op(sqrt) != "Sqrt" {
		return step{}, nil, false
	}
	if dv, ok := f.sole(m.nodes[sqrt].out[0]); !ok || dv != div || f.op(div) != "Div" || m.nodes[div].in[0] != d {
		return step{}, nil, false
	}
	mul, gamma, ok := f.rowOperand(m.nodes[div].out[0], "Mul", size)
	if !ok {
		return step{}, nil, false
	}
	add, beta, ok := f.rowOperand(m.nodes[mul].out[0], "Add", size)
	if !ok || !slices.Equal(f.shape(m.nodes[add].out[0]), f.shape(x)) {
		return step{}, nil, false
	}
	k := &layerNormKernel{epsilon: eps, rows: numElements(f.shape(x)) / size, size: size, bias: true}
	return step{in: []int{x, gamma, beta}, out: m.nodes[add].out, kernel: k, node: add},
		[]int{i, sub, pow, r2, addEps, sqrt, div, mul, add}, true
}

// lastAxisMean reports whether node i is a ReduceMean over the last axis
// of its input that keeps that axis.
func (f *fuser) lastAxisMean(i int) bool {
	n := f.m.nodes[i]
	k, ok := n.kernel.(*reduceKernel)
	if f.op(i) != "ReduceMean" || !ok || k.kind != reduceMean || n.in[0] < 0 || n.out[0] < 0 {
		return false
	}
	x, y := f.shape(n.in[0]), f.shape(n.out[0])
	return len(x) > 0 && x[len(x)-1] > 1 && len(y) == len(x) &&
		slices.Equal(y[:len(y)-1], x[:len(x)-1]) && y[len(y)-1] == 1
}

// rowOperand matches the sole reader of id as op with a constant row
// vector of n elements as its other operand.
func (f *fuser) rowOperand(id int, op string, n int) (int, int, bool) {
	j, ok := f.sole(id)
	if !ok || f.op(j) != op {
		return -1, -1, false
	}
	c := other(f.m.nodes[j], id)
	if c < 0 || !f.m.values[c].isConst() || !isRowVector(f.shape(c), n) {
		return -1, -1, false
	}
	return j, c, true
}

// gelu matches erf GELU, (h · (erf(h / c) + a)) · m with constants c, a
// and m, starting at its Div (node i).
func (f *fuser) gelu(i int) (step, []int, bool) {
	m := f.m
	dv := m.nodes[i]
	if f.op(i) != "Div" {
		return step{}, nil, false
	}
	h := dv.in[0]
	c, ok := f.constScalar(dv.in[1])
	if !ok || h < 0 || len(f.readers[h]) != 2 {
		return step{}, nil, false
	}
	erf, ok := f.sole(dv.out[0])
	if !ok {
		return step{}, nil, false
	}
	if u, isUnary := m.nodes[erf].kernel.(unaryKernel); !isUnary || u.op != unaryErf {
		return step{}, nil, false
	}
	add, ok := f.sole(m.nodes[erf].out[0])
	if !ok || f.op(add) != "Add" {
		return step{}, nil, false
	}
	a, ok := f.constScalar(other(m.nodes[add], m.nodes[erf].out[0]))
	if !ok {
		return step{}, nil, false
	}
	mul1, ok := f.sole(m.nodes[add].out[0])
	if !ok || f.op(mul1) != "Mul" || other(m.nodes[mul1], m.nodes[add].out[0]) != h {
		return step{}, nil, false
	}
	mul2, ok := f.sole(m.nodes[mul1].out[0])
	if !ok || f.op(mul2) != "Mul" {
		return step{}, nil, false
	}
	scale, ok := f.constScalar(other(m.nodes[mul2], m.nodes[mul1].out[0]))
	if !ok || !slices.Equal(f.shape(m.nodes[mul2].out[0]), f.shape(h)) {
		return step{}, nil, false
	}
	k := &geluKernel{div: c, add: a, scale: scale}
	return step{in: []int{h}, out: m.nodes[mul2].out, kernel: k, node: mul2},
		[]int{i, erf, add, mul1, mul2}, true
}

// geluKernel computes (h · (erf(h / div) + add)) · scale with the float32
// operations, in the order, of the nodes it replaces, in one pass of
// cache-sized chunks.
type geluKernel struct{ div, add, scale float32 }

func (k *geluKernel) bind(in, out []*Tensor, e *env) func() {
	body := func(lo, hi int) {
		h, y := in[0].Data[lo:hi], out[0].Data[lo:hi]
		for i, v := range h {
			y[i] = v / k.div
		}
		gemm.Erf(y, y)
		for i, v := range h {
			y[i] = (v * (y[i] + k.add)) * k.scale
		}
	}
	return func() { e.workers.parallelFor(len(out[0].Data), elementGrain, body) }
}
