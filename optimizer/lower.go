package optimizer

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"

	"rulebook/onnx"
	"rulebook/rules"
	"rulebook/runtime"
)

// ToONNX writes the graph back as an ONNX model with the original's
// inputs, outputs and opset. Registry operators become the ONNX operators
// they were mapped from (a convolution and the channel bias added to it
// become one Conv again, a chain of concats one Concat), opaque nodes come
// back as they were, and nodes nothing uses are dropped. Nodes computed
// from weights alone are folded: their results become initializers, with
// their data inline like every weight, so that the model stands alone.
func (g *Graph) ToONNX() (*onnx.Model, error) { return g.lower(false) }

// ToONNXKeepingExternal is ToONNX for a model file: each weight the input
// model stored in an external file (ONNX external data) and that lowering
// writes unchanged, at the same dims, keeps that reference (location,
// offset, length) instead of being embedded; only the weights lowering
// made, folded or reshaped, are inline. A model whose weights file is
// large, or absent, stays small. The locations are relative to the
// model's folder, so the written model finds the weights file only if it
// lies beside it (ExternalData).
func (g *Graph) ToONNXKeepingExternal() (*onnx.Model, error) { return g.lower(true) }

func (g *Graph) lower(keepExternal bool) (*onnx.Model, error) {
	l := newLowering(g, g.liveNodes(), g.weightNodes())
	l.keepExternal = keepExternal
	var err error
	if l.folded, err = g.fold(l.live, l.weight); err != nil {
		return nil, fmt.Errorf("optimizer: %w", err)
	}
	l.planFusions()
	out := &onnx.Graph{Name: g.model.Graph.Name}
	for i := range g.G.Nodes {
		if !l.live[i] || l.absorbed[i] || l.weight[i] {
			continue
		}
		nodes, err := l.node(i)
		if err != nil {
			return nil, fmt.Errorf("optimizer: lower node %d (%s): %w", i, g.G.Nodes[i].Op.Name, err)
		}
		out.Nodes = append(out.Nodes, nodes...)
	}
	for k, v := range g.G.Outputs {
		if name := l.name(v, full); name != g.Outputs[k] {
			out.Nodes = append(out.Nodes, &onnx.Node{Name: g.gen("output", strconv.Itoa(k)), OpType: rules.ONNXIdentity, Inputs: []string{name}, Outputs: []string{g.Outputs[k]}})
		}
	}
	l.inputsAndWeights(out)
	m := *g.model
	m.Graph = out
	return &m, nil
}

type lowering struct {
	g            *Graph
	live, weight []bool
	uses         useCounts
	// folded are the weight-only node outputs that inference reads.
	folded map[rules.Value]Value
	// fusedBias maps an ewadd node that adds a channel bias to the conv2d
	// node it completes; absorbed nodes are emitted as part of another.
	fusedBias map[int]int
	absorbed  map[int]bool
	// inits are the weights the nodes read, by name; extra are other
	// initializers lowering adds, such as Split's sizes.
	inits map[string]*onnx.Tensor
	extra []*onnx.Tensor
	// keepExternal writes references to the input's external data for the
	// weights written unchanged (ToONNXKeepingExternal); originals holds
	// the model's weights by name, filled when first needed.
	keepExternal bool
	originals    map[string]Value
}

// liveNodes marks the nodes the outputs depend on.
func (g *Graph) liveNodes() []bool {
	live := make([]bool, len(g.G.Nodes))
	var mark func(v rules.Value)
	mark = func(v rules.Value) {
		if v.IsInput() || live[v.Node] {
			return
		}
		live[v.Node] = true
		for _, a := range g.G.Nodes[v.Node].Args {
			mark(a)
		}
	}
	for _, o := range g.G.Outputs {
		mark(o)
	}
	return live
}

// uses counts the readers of each node's first output, graph outputs
// included.
func (g *Graph) uses() useCounts {
	uses := make(useCounts, len(g.G.Nodes))
	count := func(v rules.Value) {
		if !v.IsInput() && v.Out == 0 {
			uses[v.Node]++
		}
	}
	for _, n := range g.G.Nodes {
		for _, a := range n.Args {
			count(a)
		}
	}
	for _, o := range g.G.Outputs {
		count(o)
	}
	return uses
}

// useCounts counts the readers of each node's first output, the one fusion
// decisions ask about.
type useCounts []int

// of is the number of readers of a node's first output.
func (u useCounts) of(v rules.Value) int {
	if v.IsInput() || v.Out != 0 {
		panic("optimizer: use count of a value other than a node's first output")
	}
	return u[v.Node]
}

// newLowering prepares to lower g's live nodes; live may be nil when
// lowering single nodes.
func newLowering(g *Graph, live, weight []bool) *lowering {
	return &lowering{g: g, live: live, weight: weight, uses: g.uses(), folded: map[rules.Value]Value{},
		fusedBias: map[int]int{}, absorbed: map[int]bool{}, inits: map[string]*onnx.Tensor{}}
}

// planFusions finds convolutions whose only use adds a channel bias, and
// the nodes another node's ONNX node absorbs (concats that only feed a
// concat along the same axis).
func (l *lowering) planFusions() {
	for conv, add := range l.g.convBiases(l.live, l.weight, l.uses) {
		l.fusedBias[add] = conv
		l.absorbed[conv] = true
	}
	for i, n := range l.g.G.Nodes {
		if !l.live[i] || l.weight[i] {
			continue
		}
		if a := adapterOf(n.Op); a != nil && a.absorbs != nil {
			if inner, ok := a.absorbs(l, i); ok {
				l.absorbed[inner] = true
			}
		}
	}
}

// innerConcat is the concat along the same axis that only feeds concat
// node i, as its first operand: one Concat writes both.
func (l *lowering) innerConcat(i int) (int, bool) {
	n := &l.g.G.Nodes[i]
	inner := n.Args[0]
	if inner.IsInput() {
		return 0, false
	}
	in := &l.g.G.Nodes[inner.Node]
	return inner.Node, in.Op.Name == n.Op.Name && rules.AxisOf(in.Params).Axis == rules.AxisOf(n.Params).Axis &&
		l.uses.of(inner) == 1 && !l.weight[inner.Node]
}

// convBiases pairs each convolution that a channel bias completes with the
// ewadd that adds it (conv → ewadd): lowering writes the two as one Conv,
// and costs price them as one.
func (g *Graph) convBiases(live, weight []bool, uses useCounts) map[int]int {
	out := map[int]int{}
	for i := range g.G.Nodes {
		n := &g.G.Nodes[i]
		if !live[i] || weight[i] || !addsBias(n.Op) {
			continue
		}
		if conv, ok := g.biasedConv(n, weight, uses); ok {
			out[conv] = i
		}
	}
	return out
}

// biasedConv reports whether an ewadd adds a channel bias to a convolution
// (without activation) that nothing else reads: the two are one Conv.
func (g *Graph) biasedConv(n *rules.Node, weight []bool, uses useCounts) (conv int, ok bool) {
	for k := range 2 {
		c, b := n.Args[k], n.Args[1-k]
		if !c.IsInput() && takingBias(&g.G.Nodes[c.Node]) &&
			uses.of(c) == 1 && g.channelBias(b, weight) {
			return c.Node, true
		}
	}
	return 0, false
}

// bias is the operand of a fused ewadd that is not the convolution.
func (l *lowering) bias(i int) rules.Value {
	n := &l.g.G.Nodes[i]
	if a := n.Args[0]; !a.IsInput() && a.Node == l.fusedBias[i] {
		return n.Args[1]
	}
	return n.Args[0]
}

// use says how a consumer reads a weight: at its full shape, or in its
// stored form where ONNX broadcasts it.
type use int

const (
	full      use = iota
	broadcast     // Add, Mul: numpy broadcasting on every axis
	batch         // MatMul: broadcasting on the batch axes only
)

// name is the ONNX name of a value: a graph input's own, a model output's
// own, else one made from the node. A weight is named in the form its
// consumer reads.
func (l *lowering) name(v rules.Value, u use) string {
	if w, ok := l.weightValue(v); ok {
		return l.initializer(w, u)
	}
	if v.IsInput() {
		return l.g.Inputs[v.Input()].Name
	}
	if k := slices.Index(l.g.G.Outputs, v); k >= 0 {
		return l.g.Outputs[k]
	}
	return l.g.gen(strconv.Itoa(v.Node), strconv.Itoa(v.Out))
}

// weightValue is the weight, given or folded, behind a value.
func (l *lowering) weightValue(v rules.Value) (Value, bool) {
	if v.IsInput() {
		w := l.g.Inputs[v.Input()]
		return w, w.IsWeight()
	}
	w, ok := l.folded[v]
	return w, ok
}

// initializer records the weight as an initializer in the form u reads and
// names it.
func (l *lowering) initializer(w Value, u use) string {
	t := w.Stored()
	if !slices.Equal(t.Shape, w.Shape) && !readsStored(u, t.Shape, w.Shape) {
		t = w.Tensor()
	}
	if ref := l.externalRef(w, t); ref != nil {
		l.inits[ref.Name] = ref
		return ref.Name
	}
	name := w.Name
	if !slices.Equal(t.Shape, w.Shape) {
		name = l.g.gen("compact", w.Name)
	}
	if _, done := l.inits[name]; !done {
		l.inits[name] = floatTensor(name, t)
		if w.Typed != nil && name == w.Name {
			l.inits[name] = w.Typed
		}
	}
	return name
}

// readsStored reports whether a consumer reading u sees a weight stored at
// shape stored as its full shape: MatMul broadcasts batch axes, not the
// matrix's.
func readsStored(u use, stored, full []int) bool {
	switch u {
	case broadcast:
		return true
	case batch:
		r, n := len(stored), len(full)
		return r >= 2 && slices.Equal(stored[r-2:], full[n-2:])
	}
	return false
}

// args names a node's operands, each in the form the operator reads (its
// adapter's reads).
func (l *lowering) args(n *rules.Node, u use) []string {
	out := make([]string, len(n.Args))
	for i, v := range n.Args {
		out[i] = l.name(v, u)
	}
	return out
}

// node lowers one node to ONNX nodes, of the types the registry names,
// with its operator's adapter.
func (l *lowering) node(i int) ([]*onnx.Node, error) {
	n := &l.g.G.Nodes[i]
	out := l.name(rules.Value{Node: i}, full)
	if a := adapterOf(n.Op); a != nil && a.lower != nil {
		return a.lower(l, i, out, a.reads), nil
	}
	if o, ok := l.g.opaqueOf(n); ok {
		return []*onnx.Node{l.opaque(i, o.node)}, nil
	}
	return nil, fmt.Errorf("no ONNX lowering for %s yet", n.Op.Name)
}

// one writes node i as one ONNX node of its operator's type.
func (l *lowering) one(i int, out string, reads use, attrs ...*onnx.Attribute) []*onnx.Node {
	n := &l.g.G.Nodes[i]
	return []*onnx.Node{{Name: out, OpType: n.Op.ONNXType(), Inputs: l.args(n, reads), Outputs: []string{out}, Attributes: attrs}}
}

// plain lowers an operator whose ONNX node has no attributes.
func (l *lowering) plain(i int, out string, reads use) []*onnx.Node { return l.one(i, out, reads) }

// ewadd lowers an ewadd, or the Conv it completes as its channel bias.
func (l *lowering) ewadd(i int, out string, reads use) []*onnx.Node {
	if conv, ok := l.fusedBias[i]; ok {
		return l.conv(conv, out, l.convBias(i), full)
	}
	return l.one(i, out, reads)
}

// matmul lowers a matrix product, as Gemm by a transposed weight.
func (l *lowering) matmul(i int, out string, reads use) []*onnx.Node {
	n := &l.g.G.Nodes[i]
	if w, ok := l.transposedWeight(n); ok {
		return []*onnx.Node{{Name: out, OpType: rules.ONNXGemm, Inputs: []string{l.name(n.Args[0], full), l.name(w, full)}, Outputs: []string{out},
			Attributes: []*onnx.Attribute{intAttr(rules.ONNXAttrTransB, 1)}}}
	}
	return l.one(i, out, reads)
}

// transpose lowers a matrix transpose.
func (l *lowering) transpose(i int, out string, reads use) []*onnx.Node {
	return l.one(i, out, reads, intsAttr(rules.ONNXAttrPerm, 1, 0))
}

// convNode lowers a conv2d without a fused bias.
func (l *lowering) convNode(i int, out string, reads use) []*onnx.Node {
	return l.conv(i, out, "", reads)
}

// concat lowers a concat with the concats it absorbed, as one Concat.
func (l *lowering) concat(i int, out string, _ use) []*onnx.Node {
	n := &l.g.G.Nodes[i]
	return []*onnx.Node{{Name: out, OpType: n.Op.ONNXType(), Inputs: l.concatInputs(i), Outputs: []string{out},
		Attributes: []*onnx.Attribute{intAttr(rules.ONNXAttrAxis, rules.AxisOf(n.Params).Axis)}}}
}

// splitNode lowers a split.
func (l *lowering) splitNode(i int, _ string, _ use) []*onnx.Node { return []*onnx.Node{l.split(i)} }

// transposedWeight is W when a matrix product multiplies a matrix by the
// transpose of a weight W the model stores externally, as Gemm(transB=1)
// maps (the mapping's transpose): written back as that Gemm, the product
// reads W itself, which the model file can keep referring to, instead of
// a folded copy (8 MB in resnet50).
func (l *lowering) transposedWeight(n *rules.Node) (rules.Value, bool) {
	a, b := n.Args[0], n.Args[1]
	if b.IsInput() || !l.weight[b.Node] || l.g.G.Nodes[b.Node].Op.Name != rules.NameTranspose || len(l.g.shape(a)) != 2 {
		return rules.Value{}, false
	}
	w := l.g.G.Nodes[b.Node].Args[0]
	if !w.IsInput() || l.g.Inputs[w.Input()].Data == nil || len(l.g.Inputs[w.Input()].Shape) != 2 {
		return rules.Value{}, false
	}
	orig := l.g.model.Graph.Initializer(l.g.Inputs[w.Input()].Name)
	return w, orig != nil && orig.DataLocation == onnx.LocationExternal
}

// convBias records the one-dimensional bias of a fused ewadd's Conv.
func (l *lowering) convBias(i int) string {
	b := l.bias(i)
	w, _ := l.weightValue(b)
	stored := w.Stored()
	perChannel := broadcastTo(&runtime.Tensor{Shape: trimOnes(stored.Shape), Data: stored.Data}, []int{w.Shape[1], 1, 1})
	data := &runtime.Tensor{Shape: []int{w.Shape[1]}, Data: perChannel.Data}
	if ref := l.externalRef(w, data); ref != nil {
		l.inits[ref.Name] = ref
		return ref.Name
	}
	name := l.g.gen("bias", w.Name)
	l.inits[name] = floatTensor(name, data)
	return name
}

// externalRef is the input model's initializer, stored in an external
// file, whose data t is unchanged and at the same dims: w's own, or the
// one w shows broadcast (Origin). It is nil when lowering embeds every
// weight, or t is data lowering made.
func (l *lowering) externalRef(w Value, t *runtime.Tensor) *onnx.Tensor {
	if !l.keepExternal {
		return nil
	}
	name := cmp.Or(w.Origin, w.Name)
	orig := l.g.model.Graph.Initializer(name)
	if orig == nil || orig.DataLocation != onnx.LocationExternal || !slices.Equal(orig.Shape(), t.Shape) {
		return nil
	}
	if l.originals == nil {
		l.originals = map[string]Value{}
		for _, in := range l.g.Inputs {
			l.originals[in.Name] = in
		}
	}
	src, ok := l.originals[name]
	if !ok || src.Data == nil || !sameBits(src.Data.Data, t.Data) {
		return nil
	}
	return orig
}

// sameBits reports whether two float slices hold the same bit patterns.
func sameBits(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	if len(a) == 0 || &a[0] == &b[0] {
		return true
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return false
		}
	}
	return true
}

// conv lowers a conv2d node, with the bias initializer of that name when
// one was fused into it, and the relu operator's node when its activation
// says so.
func (l *lowering) conv(i int, out, bias string, reads use) []*onnx.Node {
	n := &l.g.G.Nodes[i]
	x, w := l.g.shape(n.Args[0]), l.g.shape(n.Args[1])
	p := rules.ConvOf(n.Params)
	stride, padding, act, groups := p.Stride, p.Padding, p.Activation, p.Groups
	if groups == rules.GroupsDepthwise {
		groups = x[1]
	}
	inputs := l.args(n, reads)
	if bias != "" {
		inputs = append(inputs, bias)
	}
	convOut := out
	if act == rules.ActRelu {
		convOut = l.g.gen("conv", out)
	}
	nodes := []*onnx.Node{{Name: out, OpType: n.Op.ONNXType(), Inputs: inputs, Outputs: []string{convOut}, Attributes: []*onnx.Attribute{
		intsAttr(rules.ONNXAttrKernelShape, w[2], w[3]), intsAttr(rules.ONNXAttrStrides, stride, stride),
		intsAttr(rules.ONNXAttrPads, rules.ONNXPads(x[2:], w[2:], stride, padding)...), intAttr(rules.ONNXAttrGroup, groups)}}}
	if act == rules.ActRelu {
		nodes = append(nodes, &onnx.Node{Name: l.g.gen(rules.NameRelu, out), OpType: l.g.onnxType(rules.NameRelu), Inputs: []string{convOut}, Outputs: []string{out}})
	}
	return nodes
}

// pool lowers pool_avg and pool_max; average pooling counts padded cells.
func (l *lowering) pool(i int, out string, reads use) []*onnx.Node {
	n := &l.g.G.Nodes[i]
	x := l.g.shape(n.Args[0])
	p := rules.WindowOf(n.Params)
	k, stride, padding := p.Kernel, p.Stride, p.Padding
	attrs := []*onnx.Attribute{intsAttr(rules.ONNXAttrKernelShape, k, k), intsAttr(rules.ONNXAttrStrides, stride, stride),
		intsAttr(rules.ONNXAttrPads, rules.ONNXPads(x[2:], []int{k, k}, stride, padding)...)}
	if n.Op.Name == rules.NamePoolAvg {
		attrs = append(attrs, intAttr(rules.ONNXAttrCountIncludePad, 1))
	}
	return []*onnx.Node{{Name: out, OpType: n.Op.ONNXType(), Inputs: l.args(n, reads), Outputs: []string{out}, Attributes: attrs}}
}

// split lowers split to an ONNX Split (opset 13: the sizes are an input)
// at the sizes its outputs have.
func (l *lowering) split(i int) *onnx.Node {
	n := &l.g.G.Nodes[i]
	axis := rules.AxisOf(n.Params).Axis
	sizes := l.g.gen("sizes", strconv.Itoa(i))
	left, right := l.g.Shapes[i][0].Dims[axis], l.g.Shapes[i][1].Dims[axis]
	l.extra = append(l.extra, &onnx.Tensor{Name: sizes, Dims: []int64{2}, DataType: onnx.Int64, Int64Data: []int64{int64(left), int64(right)}})
	return &onnx.Node{Name: l.g.gen(rules.NameSplit, strconv.Itoa(i)), OpType: n.Op.ONNXType(), Inputs: []string{l.name(n.Args[0], full), sizes},
		Outputs:    []string{l.name(rules.Value{Node: i, Out: 0}, full), l.name(rules.Value{Node: i, Out: 1}, full)},
		Attributes: []*onnx.Attribute{intAttr(rules.ONNXAttrAxis, axis)}}
}

// concatInputs flattens a chain of absorbed concats into one input list.
func (l *lowering) concatInputs(i int) []string {
	n := &l.g.G.Nodes[i]
	var names []string
	if a := n.Args[0]; !a.IsInput() && l.absorbed[a.Node] {
		names = l.concatInputs(a.Node)
	} else {
		names = []string{l.name(a, full)}
	}
	return append(names, l.name(n.Args[1], full))
}

// opaque restores an opaque node with its present inputs renamed.
func (l *lowering) opaque(i int, from *onnx.Node) *onnx.Node {
	n := &l.g.G.Nodes[i]
	orig := *from
	args := l.args(n, full)
	orig.Inputs = make([]string, len(from.Inputs))
	for k, name := range from.Inputs {
		if name != "" {
			orig.Inputs[k], args = args[0], args[1:]
		}
	}
	orig.Outputs = make([]string, n.Op.Outputs)
	for k := range orig.Outputs {
		orig.Outputs[k] = l.name(rules.Value{Node: i, Out: k}, full)
	}
	return &orig
}

// inputsAndWeights keeps the model's inputs and outputs and writes the
// initializers the nodes read, in name order. Symbolic dimensions take the
// values the graph was mapped with: the rewrite holds for those shapes.
func (l *lowering) inputsAndWeights(out *onnx.Graph) {
	for _, vi := range l.g.model.Graph.Inputs {
		if l.g.model.Graph.Initializer(vi.Name) != nil {
			continue
		}
		for _, in := range l.g.Inputs {
			if in.Name == vi.Name {
				vi = withDims(vi, in.Shape)
			}
		}
		out.Inputs = append(out.Inputs, vi)
	}
	l.initializers(out)
	for k, name := range l.g.Outputs {
		for _, vi := range l.g.model.Graph.Outputs {
			if vi.Name == name {
				out.Outputs = append(out.Outputs, withDims(vi, l.g.shape(l.g.G.Outputs[k])))
			}
		}
	}
}

// withDims is vi with its symbolic or unknown dimensions set from shape,
// when vi has a shape of that rank; else vi.
func withDims(vi *onnx.ValueInfo, shape []int) *onnx.ValueInfo {
	if !vi.HasShape || len(vi.Shape) != len(shape) || !slices.ContainsFunc(vi.Shape, func(d onnx.Dim) bool { return !d.HasValue }) {
		return vi
	}
	c := *vi
	c.Shape = slices.Clone(vi.Shape)
	for i, d := range c.Shape {
		if !d.HasValue {
			c.Shape[i] = onnx.Dim{Value: int64(shape[i]), HasValue: true}
		}
	}
	return &c
}

// floatTensor is a float32 initializer with its data inline.
func floatTensor(name string, t *runtime.Tensor) *onnx.Tensor {
	raw := make([]byte, 4*len(t.Data))
	for i, x := range t.Data {
		binary.LittleEndian.PutUint32(raw[4*i:], math.Float32bits(x))
	}
	dims := make([]int64, len(t.Shape))
	for i, d := range t.Shape {
		dims[i] = int64(d)
	}
	return &onnx.Tensor{Name: name, Dims: dims, DataType: onnx.Float, RawData: raw, HasRawData: true}
}

func intAttr(name string, v int) *onnx.Attribute {
	return &onnx.Attribute{Name: name, Type: onnx.AttrInt, I: int64(v)}
}

func intsAttr(name string, vs ...int) *onnx.Attribute {
	a := &onnx.Attribute{Name: name, Type: onnx.AttrInts}
	for _, v := range vs {
		a.Ints = append(a.Ints, int64(v))
	}
	return a
}

// initializers writes the weights the nodes read, in name order, and the
// other initializers lowering made.
func (l *lowering) initializers(out *onnx.Graph) {
	for _, name := range slices.Sorted(maps.Keys(l.inits)) {
		out.Initializers = append(out.Initializers, l.inits[name])
	}
	out.Initializers = append(out.Initializers, l.extra...)
}
