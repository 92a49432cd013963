package optimizer

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"rulebook/onnx"
	"rulebook/rules"
	"rulebook/runtime"
)

// Graph is a model in the registry's terms, ready for rewriting. Nodes
// whose ONNX operator has exactly the semantics of a registry operator
// become that operator; every other node is opaque: an operator of its own
// ("onnx.Softmax") that no rule pattern names, so rules never cross it.
type Graph struct {
	G rules.Graph
	// Inputs describes each graph input of G: a model input or a weight.
	Inputs []Value
	// Outputs are the model's output names, parallel to G.Outputs.
	Outputs []string
	// Shapes are the concrete shapes of every node output, by node, as
	// the registry infers them (with concat history, which split needs);
	// Infer recomputes them after a rewrite.
	Shapes [][]rules.Shape
	// opaque holds each opaque node's ONNX node and output shapes, indexed
	// by the node's only parameter.
	opaque []opaqueNode
	model  *onnx.Model
	// reg is the registry G's operators come from, and with them their
	// ONNX names.
	reg *rules.Registry
	// inputShapes are the inputs' shapes as the registry's, made once:
	// the search reads them for every node it prices.
	inputShapes []rules.Shape
	// computing counts the model's nodes that compute at run time: all
	// but those the runtime folded into constants at load.
	computing int
	// prefix starts every name the optimizer makes up; no name in the
	// model starts with it, so made-up names never collide with the
	// model's (a model optimized before has "rb." names already).
	prefix string
}

// onnxType is the ONNX node type of the registry operator called name
// ("" when ONNX has none).
func (g *Graph) onnxType(name string) string {
	op, ok := g.reg.Lookup(name)
	if !ok {
		return ""
	}
	return op.ONNXType()
}

// gen makes up a name from parts, under the graph's prefix.
func (g *Graph) gen(parts ...string) string {
	return g.prefix + "." + strings.Join(parts, ".")
}

// freePrefix is the first of "rb", "rb1", "rb2", … that starts no name in
// the graph followed by a dot.
func freePrefix(g *onnx.Graph) string {
	var names []string
	for _, vi := range slices.Concat(g.Inputs, g.Outputs) {
		names = append(names, vi.Name)
	}
	for _, t := range g.Initializers {
		names = append(names, t.Name)
	}
	for _, n := range g.Nodes {
		names = append(names, n.Name)
		names = append(names, n.Inputs...)
		names = append(names, n.Outputs...)
	}
	for k := 0; ; k++ {
		prefix := "rb"
		if k > 0 {
			prefix += strconv.Itoa(k)
		}
		if !slices.ContainsFunc(names, func(n string) bool { return strings.HasPrefix(n, prefix+".") }) {
			return prefix
		}
	}
}

type opaqueNode struct {
	node   *onnx.Node
	shapes []rules.Shape
	// why the mapping kept the node opaque, for people; uncovered names
	// the operator no rule family covers that the node is or is part of
	// (its ONNX type, or a fused run's kind), "" for a form of a registry
	// operator the mapping refuses.
	why, uncovered string
}

// noOperator is why a node whose type the registry lacks stays opaque.
const noOperator = "the registry has no such operator"

// FromONNX maps a model onto the registry. rt is the same model loaded by
// the runtime, which supplies every value's shape and the weights' data.
func FromONNX(m *onnx.Model, rt *runtime.Model) (*Graph, error) {
	if m.Graph == nil {
		return nil, fmt.Errorf("optimizer: the model has no graph")
	}
	reg := rules.Default()
	b := &builder{g: &Graph{model: m, prefix: freePrefix(m.Graph), reg: reg}, rt: rt, mappings: mappings(reg),
		byName: map[string]rules.Value{}, padded: map[string]rules.Value{}, fused: map[string]runtime.Fusion{}}
	for _, r := range rt.FusedRuns() {
		if r.Kind == runtime.FusedGELU || r.Kind == runtime.FusedLayerNorm {
			for _, name := range r.Nodes {
				b.fused[name] = r.Kind
			}
		}
	}
	if err := b.inputs(); err != nil {
		return nil, err
	}
	for _, n := range m.Graph.Nodes {
		if err := b.node(n); err != nil {
			return nil, fmt.Errorf("optimizer: node %q (%s): %w", n.Name, n.OpType, err)
		}
	}
	for _, o := range m.Graph.Outputs {
		v, ok := b.byName[o.Name]
		if !ok {
			return nil, fmt.Errorf("optimizer: output %q is computed by no node", o.Name)
		}
		b.g.G.Outputs = append(b.g.G.Outputs, v)
		b.g.Outputs = append(b.g.Outputs, o.Name)
	}
	b.g.G.NumInputs = len(b.g.Inputs)
	for _, in := range b.g.Inputs {
		b.g.inputShapes = append(b.g.inputShapes, rules.NewShape(collapse(in.Shape, rules.MaxRank)...))
	}
	if err := b.g.G.Validate(); err != nil {
		return nil, fmt.Errorf("optimizer: %w", err)
	}
	return b.g, nil
}

type builder struct {
	g  *Graph
	rt *runtime.Model
	// mappings map nodes onto the registry's operators, by ONNX type.
	mappings map[string]mapping
	byName   map[string]rules.Value
	// padded maps the output of a Pad folded into the average pool that
	// reads it to the Pad's input.
	padded map[string]rules.Value
	// fused says which run each node of a layer normalisation or a GELU
	// belongs to, by the node's first output (see mapped).
	fused map[string]runtime.Fusion
	// why the node being mapped stays opaque, when the registry has its
	// operator (see refuse), and what it is outside the rules as, if so
	// (see outsideRules).
	why, uncovered string
}

// inputs makes the model's inputs and its initializers graph inputs.
func (b *builder) inputs() error {
	for _, in := range b.g.model.Graph.Inputs {
		if b.g.model.Graph.Initializer(in.Name) != nil {
			continue // an initializer listed as an input too (old exporters)
		}
		shape, ok := b.rt.Shape(in.Name)
		if !ok {
			return fmt.Errorf("optimizer: input %q has no known shape", in.Name)
		}
		b.addInput(Value{Name: in.Name, Shape: shape})
	}
	for _, t := range b.g.model.Graph.Initializers {
		if err := b.weight(t.Name); err != nil {
			return err
		}
	}
	return nil
}

func (b *builder) addInput(v Value) rules.Value {
	id := rules.InputValue(len(b.g.Inputs))
	b.g.Inputs = append(b.g.Inputs, v)
	b.byName[v.Name] = id
	return id
}

// weight makes a constant value a graph input, with the runtime's data.
func (b *builder) weight(name string) error {
	data, ok := b.rt.Constant(name)
	if !ok {
		return fmt.Errorf("optimizer: constant %q has no data", name)
	}
	b.addInput(Value{Name: name, Shape: slices.Clone(data.Shape), Data: data, Typed: b.typed(name)})
	return nil
}

// typed is the model's tensor of that name, an initializer or a Constant
// node's value, when it is inline and not float; or the integers the
// runtime folded shape arithmetic into, which ONNX's Slice, Reshape and
// the like read as int64.
func (b *builder) typed(name string) *onnx.Tensor {
	t := b.g.model.Graph.Initializer(name)
	constant := false // a Constant node makes the value
	for _, n := range b.g.model.Graph.Nodes {
		if n.OpType != rules.ONNXConstant || !slices.Contains(n.Outputs, name) {
			continue
		}
		constant = true
		if a := n.Attr(rules.ONNXAttrValue); t == nil && len(n.Outputs) == 1 && a != nil {
			t = a.T
		}
	}
	if ints, ok := b.rt.Integers(name); ok && t == nil && !constant {
		return int64Tensor(name, b.rt, ints)
	}
	if t == nil || t.DataType == onnx.Float || len(t.ExternalData) > 0 {
		return nil
	}
	typed := *t
	typed.Name = name
	return &typed
}

// int64Tensor is a folded integer value as ONNX types it.
func int64Tensor(name string, rt *runtime.Model, ints []int64) *onnx.Tensor {
	shape, _ := rt.Shape(name)
	dims := make([]int64, len(shape))
	for i, d := range shape {
		dims[i] = int64(d)
	}
	return &onnx.Tensor{Name: name, Dims: dims, DataType: onnx.Int64, Int64Data: ints}
}

// node maps one ONNX node: onto registry operators where the semantics
// agree exactly, else as an opaque node.
func (b *builder) node(n *onnx.Node) error {
	if !b.folded(n) {
		b.g.computing++
	}
	switch {
	case n.OpType == rules.ONNXIdentity && len(n.Inputs) == 1:
		b.byName[n.Outputs[0]] = b.byName[n.Inputs[0]]
		return nil
	case b.folded(n):
		return b.weight(n.Outputs[0])
	case n.OpType == rules.ONNXPad && b.padsPool(n):
		// Mapped with the pool that reads it (paddedPool).
		b.padded[n.Outputs[0]] = b.byName[n.Inputs[0]]
		return nil
	case n.OpType == b.g.onnxType(rules.NamePoolAvg) && len(n.Inputs) == 1:
		if x, ok := b.padded[n.Inputs[0]]; ok {
			_, err := b.paddedPool(n, x)
			return err
		}
	}
	b.why, b.uncovered = "", ""
	var args []rules.Value // the inputs present; omitted optional ones are ""
	for _, name := range n.Inputs {
		if name == "" {
			continue
		}
		v, ok := b.byName[name]
		if !ok {
			return fmt.Errorf("input %q is not computed before it is used", name)
		}
		args = append(args, v)
	}
	if len(args) < len(n.Inputs) {
		b.why = "an optional input is left out"
	} else if ok, err := b.mapped(n, args); ok || err != nil {
		return err
	}
	return b.opaqueNode(n, args)
}

// folded reports whether the runtime folded the node into a constant.
func (b *builder) folded(n *onnx.Node) bool {
	if len(n.Outputs) != 1 {
		return false
	}
	_, ok := b.rt.Constant(n.Outputs[0])
	return ok
}

// add appends a registry node, checks its shapes against the runtime's and
// returns its outputs.
func (b *builder) add(name string, params []int, args ...rules.Value) ([]rules.Value, error) {
	op, ok := b.g.reg.Lookup(name)
	if !ok {
		return nil, fmt.Errorf("the registry has no %s", name)
	}
	node := rules.Node{Op: op, Params: params, Args: args}
	out, err := b.g.inferNode(&node)
	if err != nil {
		return nil, err
	}
	b.g.G.Nodes = append(b.g.G.Nodes, node)
	b.g.Shapes = append(b.g.Shapes, out)
	vals := make([]rules.Value, len(out))
	for i := range out {
		vals[i] = rules.Value{Node: len(b.g.G.Nodes) - 1, Out: i}
	}
	return vals, nil
}

// bind names the ONNX outputs of a mapped node after checking that the
// registry computes the shapes the runtime inferred.
func (b *builder) bind(n *onnx.Node, vals []rules.Value) error {
	for i, name := range n.Outputs {
		want, ok := b.rt.Shape(name)
		if got := b.g.shape(vals[i]); ok && !slices.Equal(got, want) {
			return fmt.Errorf("output %q: the registry infers shape %v, the runtime %v", name, got, want)
		}
		b.byName[name] = vals[i]
	}
	return nil
}

// opaqueNode keeps an ONNX node as it is; args are its present inputs.
func (b *builder) opaqueNode(n *onnx.Node, args []rules.Value) error {
	op := &rules.Op{Name: "onnx." + n.OpType, Arity: len(args), Outputs: len(n.Outputs),
		Params: []rules.ParamSpec{{Name: "node"}}, Attrs: opaqueAttrs{}}
	b.g.G.Nodes = append(b.g.G.Nodes, rules.Node{Op: op, Params: opaqueAttrs{Node: len(b.g.opaque)}.Params(), Args: args})
	shapes := make([]rules.Shape, len(n.Outputs))
	for i, name := range n.Outputs {
		shape, _ := b.rt.Shape(name) // unknown for outputs nothing reads after folding
		shapes[i] = rules.NewShape(collapse(shape, rules.MaxRank)...)
		b.byName[name] = rules.Value{Node: len(b.g.G.Nodes) - 1, Out: i}
	}
	why, uncovered := b.why, b.uncovered
	if why == "" {
		why, uncovered = noOperator, n.OpType
	}
	b.g.opaque = append(b.g.opaque, opaqueNode{node: n, shapes: shapes, why: why, uncovered: uncovered})
	b.g.Shapes = append(b.g.Shapes, shapes)
	return nil
}

// maxRank is the largest rank among a node's inputs and outputs, as the
// runtime infers them.
func (b *builder) maxRank(n *onnx.Node) int {
	r := 0
	for _, name := range slices.Concat(n.Inputs, n.Outputs) {
		if shape, ok := b.rt.Shape(name); ok {
			r = max(r, len(shape))
		}
	}
	return r
}

// collapse merges the leading axes of a shape of more than rank axes
// into one, keeping its size: an opaque node's value of rank 5 (a channel
// shuffle's) is priced by its size and read only by opaque nodes, since
// every node with such an operand stays opaque.
func collapse(shape []int, rank int) []int {
	if len(shape) <= rank {
		return shape
	}
	lead := 1
	for _, d := range shape[:len(shape)-rank+1] {
		lead *= d
	}
	return append([]int{lead}, shape[len(shape)-rank+1:]...)
}

// shape is a value's concrete dimensions.
func (g *Graph) shape(v rules.Value) []int {
	return g.shapeOf(v).DimList()
}

func (g *Graph) shapeOf(v rules.Value) rules.Shape {
	if v.IsInput() {
		if i := v.Input(); i < len(g.inputShapes) {
			return g.inputShapes[i]
		}
		return rules.NewShape(collapse(g.Inputs[v.Input()].Shape, rules.MaxRank)...)
	}
	return g.Shapes[v.Node][v.Out]
}

// inferNode infers a node's output shapes from its operands' shapes,
// which must be known: the registry's shape rule for a registry operator,
// the shapes recorded at mapping for an opaque one.
func (g *Graph) inferNode(n *rules.Node) ([]rules.Shape, error) {
	if o, ok := g.opaqueOf(n); ok {
		return o.shapes, nil
	}
	in := make([]rules.Shape, len(n.Args))
	for i, a := range n.Args {
		in[i] = g.shapeOf(a)
	}
	return n.Op.InferShapes(n.Params, in)
}

// Infer recomputes every node's shapes, as after a rewrite; an error means
// the rewritten graph does not type-check (rules do not model shapes).
func (g *Graph) Infer() error {
	g.Shapes = make([][]rules.Shape, len(g.G.Nodes))
	for i := range g.G.Nodes {
		out, err := g.inferNode(&g.G.Nodes[i])
		if err != nil {
			return fmt.Errorf("node %d (%s): %w", i, g.G.Nodes[i].Op.Name, err)
		}
		g.Shapes[i] = out
	}
	return nil
}

// opaqueAttrs is an opaque node's one parameter, as rules' typed
// parameters name a registry operator's.
type opaqueAttrs struct {
	// Node indexes Graph.opaque.
	Node int
}

// opaqueAttrsOf names an opaque node's parameter; ok is false for a node
// without exactly one.
func opaqueAttrsOf(p []int) (a opaqueAttrs, ok bool) {
	if len(p) != 1 {
		return opaqueAttrs{}, false
	}
	return opaqueAttrs{Node: p[0]}, true
}

// Params encodes the attributes as a node stores them.
func (a opaqueAttrs) Params() []int { return []int{a.Node} }

// opaqueOf returns the ONNX node behind an opaque node.
func (g *Graph) opaqueOf(n *rules.Node) (opaqueNode, bool) {
	a, ok := opaqueAttrsOf(n.Params)
	if !ok || a.Node >= len(g.opaque) {
		return opaqueNode{}, false
	}
	// Compared in parts: the search asks for every node it prices.
	name, found := strings.CutPrefix(n.Op.Name, "onnx.")
	if !found || name != g.opaque[a.Node].node.OpType {
		return opaqueNode{}, false
	}
	return g.opaque[a.Node], true
}

// Opaque reports the ONNX operators kept as opaque nodes, with counts.
func (g *Graph) Opaque() map[string]int {
	out := map[string]int{}
	for _, n := range g.G.Nodes {
		if o, ok := g.opaqueOf(&n); ok {
			out[o.node.OpType]++
		}
	}
	return out
}

// OpaqueReason is why some nodes of one ONNX operator stayed opaque.
type OpaqueReason struct {
	Operator string `json:"operator"`
	Nodes    int    `json:"nodes"`
	Reason   string `json:"reason"`
}

// OpaqueReasons groups the opaque nodes by ONNX operator and by why the
// mapping kept them opaque, in that order.
func (g *Graph) OpaqueReasons() []OpaqueReason {
	out := []OpaqueReason{}
	for _, r := range g.opaqueGroups() {
		out = append(out, r.OpaqueReason)
	}
	return out
}

// opaqueGroup is an OpaqueReason with what its nodes are outside the
// rules as (see opaqueNode).
type opaqueGroup struct {
	OpaqueReason
	uncovered string
}

// opaqueGroups groups the opaque nodes as OpaqueReasons does.
func (g *Graph) opaqueGroups() []opaqueGroup {
	count := map[opaqueGroup]int{}
	for _, n := range g.G.Nodes {
		if o, ok := g.opaqueOf(&n); ok {
			count[opaqueGroup{OpaqueReason{Operator: o.node.OpType, Reason: o.why}, o.uncovered}]++
		}
	}
	out := []opaqueGroup{}
	for r, n := range count {
		r.Nodes = n
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b opaqueGroup) int {
		return cmp.Or(cmp.Compare(a.Operator, b.Operator), cmp.Compare(a.Reason, b.Reason))
	})
	return out
}

// OpaqueShare is how much of a model the rules cannot see. Nodes whose
// operator the registry lacks (Softmax, Erf, Flatten, …) are outside every
// rule family, and so are the Adds and Muls of a run the runtimes fuse (a
// GELU, a layer normalisation), which the mapping keeps whole; the rest
// of the opaque nodes are forms of registry operators that the mapping
// refuses (a rank-4 transpose, say), the share the mapping could still
// reduce.
type OpaqueShare struct {
	// Nodes are the model's nodes that compute at run time: all but those
	// folded into constants at load.
	Nodes  int `json:"nodes"`
	Opaque int `json:"opaque"`
	// Uncovered are the opaque nodes of operators the registry lacks or of
	// fused runs, and UncoveredOperators their ONNX types or the runs'
	// kinds ("GELU", "layer normalisation").
	Uncovered          int      `json:"uncovered"`
	UncoveredOperators []string `json:"uncovered_operators"`
	// Refused are the opaque nodes of operators the registry has, and
	// RefusedShare their fraction of Nodes.
	Refused      int     `json:"refused"`
	RefusedShare float64 `json:"refused_share"`
}

// OpaqueShare counts the opaque nodes by whether a rule family covers
// their operator.
func (g *Graph) OpaqueShare() OpaqueShare {
	s := OpaqueShare{Nodes: g.computing, UncoveredOperators: []string{}}
	for _, r := range g.opaqueGroups() {
		s.Opaque += r.Nodes
		if r.uncovered == "" {
			s.Refused += r.Nodes
			continue
		}
		s.Uncovered += r.Nodes
		if !slices.Contains(s.UncoveredOperators, r.uncovered) {
			s.UncoveredOperators = append(s.UncoveredOperators, r.uncovered)
		}
	}
	if s.Nodes > 0 {
		s.RefusedShare = float64(s.Refused) / float64(s.Nodes)
	}
	return s
}
