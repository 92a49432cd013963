package runtime

import (
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"rulebook/internal/budget"
	"rulebook/onnx"
)

// The versions of the default ONNX domain whose semantics the runtime
// implements. Where an operator changed within the range the opset picks
// the behaviour: ReduceMean takes axes as an attribute up to 17 and as an
// input from 18; Pad takes pads and value as attributes before 11 and as
// inputs from 11; Split takes sizes as an attribute before 13 and as an
// input from 13 (num_outputs from 18); Softmax normalises over all axes
// from axis on before 13 and over the one axis from 13.
const (
	minOpset = 7
	maxOpset = 21
)

// foldLimit bounds the elements a node may produce to be folded at load:
// larger results are computed on every Run instead of held in the model.
const foldLimit = 1 << 24

// Load reads an ONNX model file and prepares it for execution. External
// weights are looked for beside the file.
func Load(path string, opt LoadOptions) (*Model, *LoadReport, error) {
	m, err := onnx.ReadModel(path)
	if err != nil {
		// onnx's errors name the file and, for malformed data, the field
		// path and byte offset.
		return nil, nil, fmt.Errorf("runtime: %w", err)
	}
	return build(m, filepath.Dir(path), path, opt)
}

// FromONNX prepares a decoded model for execution; external weights are
// looked for in dir.
func FromONNX(m *onnx.Model, dir string, opt LoadOptions) (*Model, *LoadReport, error) {
	return build(m, dir, "", opt)
}

// build prepares a decoded model; source is its file, for messages, or ""
// when it did not come from one.
func build(m *onnx.Model, dir, source string, opt LoadOptions) (*Model, *LoadReport, error) {
	fail := func(err error) (*Model, *LoadReport, error) {
		if source == "" {
			return nil, nil, fmt.Errorf("runtime: %w", err)
		}
		return nil, nil, fmt.Errorf("runtime: %s: %w", source, err)
	}
	if m.Graph == nil {
		return fail(fmt.Errorf("the model has no graph"))
	}
	opset, err := checkOpset(m)
	if err != nil {
		return fail(err)
	}
	if err := checkOperators(m.Graph); err != nil {
		return fail(err)
	}
	mode := opt.Weights
	switch mode {
	case "":
		mode = WeightsAuto
	case WeightsAuto, WeightsFile, WeightsRandom:
	default:
		return fail(fmt.Errorf("unknown weights mode %q (want %q, %q or %q)", mode, WeightsAuto, WeightsFile, WeightsRandom))
	}
	report := &LoadReport{Opset: opset}
	mem := budget.NewMeter(opt.Memory)
	b := &builder{
		opset:  opset,
		byName: map[string]int{},
		mem:    mem,
		weights: &weightLoader{dir: dir, mode: mode, seed: opt.Seed, report: report,
			bounds: randomBounds(m.Graph), present: map[string]bool{}, mem: mem},
	}
	model, err := b.build(m.Graph, opt.Dims)
	if err != nil {
		return fail(err)
	}
	model.src = structure(m)
	model.memory, model.held = mem.Budget(), mem.Used()
	report.UnusedDims = unusedDims(m.Graph, opt.Dims)
	return model, report, nil
}

// unusedDims lists, sorted, the names in dims that no graph input has as
// a symbolic dimension.
func unusedDims(g *onnx.Graph, dims map[string]int) []string {
	used := map[string]bool{}
	for _, vi := range g.Inputs {
		for _, d := range vi.Shape {
			if d.Param != "" {
				used[d.Param] = true
			}
		}
	}
	var out []string
	for name := range dims {
		if !used[name] {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// checkOpset returns the imported version of the default domain, which
// must be one the runtime implements.
func checkOpset(m *onnx.Model) (int64, error) {
	v, ok := m.Opset("")
	if !ok {
		return 0, fmt.Errorf("the model imports no opset of the default ONNX domain; supported opsets are %d..%d", minOpset, maxOpset)
	}
	if v < minOpset || v > maxOpset {
		return 0, fmt.Errorf("the model imports opset %d of the default ONNX domain; supported opsets are %d..%d", v, minOpset, maxOpset)
	}
	return v, nil
}

// checkOperators reports every operator the runtime lacks, with counts, in
// one error.
func checkOperators(g *onnx.Graph) error {
	missing := map[string]int{}
	for _, n := range g.Nodes {
		op := n.OpType
		if n.Domain != "" && n.Domain != "ai.onnx" {
			op = n.Domain + "." + op
		} else if _, ok := opTable[op]; ok {
			continue
		}
		missing[op]++
	}
	if len(missing) == 0 {
		return nil
	}
	names := make([]string, 0, len(missing))
	for op := range missing {
		names = append(names, op)
	}
	sort.Strings(names)
	parts := make([]string, len(names))
	total := 0
	for i, op := range names {
		parts[i] = fmt.Sprintf("%s ×%d", op, missing[op])
		total += missing[op]
	}
	return &UnsupportedOpsError{Nodes: total, Ops: parts}
}

// UnsupportedOpsError reports the operators of a model that the runtime
// does not implement, as against a model it cannot read.
type UnsupportedOpsError struct {
	Nodes int      // how many nodes use them
	Ops   []string // each as "Op ×count", sorted
}

func (e *UnsupportedOpsError) Error() string {
	return fmt.Sprintf("%d nodes use operators the runtime does not implement: %s (runtime.Ops lists the %d it does)",
		e.Nodes, strings.Join(e.Ops, ", "), len(opTable))
}

// builder assembles a Model from a graph.
type builder struct {
	opset   int64
	values  []*value
	byName  map[string]int // value name -> id; Identity outputs alias their input
	nodes   []*node
	weights *weightLoader
	// mem counts the constants and inputs against the memory budget.
	mem *budget.Meter
	// shapes, when set, makes the builder infer shapes only (InferShapes).
	shapes *shapePass
}

func (b *builder) build(g *onnx.Graph, dims map[string]int) (*Model, error) {
	if err := b.addInitializers(g); err != nil {
		return nil, err
	}
	inputs, err := b.addInputs(g, dims)
	if err != nil {
		return nil, err
	}
	order, err := topologicalOrder(g, b.byName)
	if err != nil {
		return nil, err
	}
	for _, i := range order {
		if err := b.addNode(i, g.Nodes[i]); err != nil {
			return nil, err
		}
	}
	m := &Model{opset: b.opset, values: b.values, inputs: inputs}
	if err := b.addOutputs(m, g); err != nil {
		return nil, err
	}
	m.nodes = liveNodes(b.nodes, m.outputs)
	return m, nil
}

func (b *builder) newValue(v *value) (int, error) {
	if _, dup := b.byName[v.name]; dup {
		return 0, fmt.Errorf("value %q is defined twice", v.name)
	}
	b.values = append(b.values, v)
	b.byName[v.name] = len(b.values) - 1
	return len(b.values) - 1, nil
}

func (b *builder) addInitializers(g *onnx.Graph) error {
	for _, t := range g.Initializers {
		if t.Name == "" {
			return fmt.Errorf("an initializer has no name")
		}
		v, err := b.initializer(t)
		if err != nil {
			return err
		}
		if _, err := b.newValue(v); err != nil {
			return err
		}
	}
	return nil
}

// addInputs adds the graph inputs that are not initializers (older models
// list initializers among the inputs too), resolving symbolic dimensions.
func (b *builder) addInputs(g *onnx.Graph, dims map[string]int) ([]int, error) {
	var ids []int
	var unknown []string
	for _, vi := range g.Inputs {
		if _, isInit := b.byName[vi.Name]; isInit {
			continue
		}
		shape, missing, err := inputShape(vi, dims)
		if err != nil {
			return nil, err
		}
		unknown = append(unknown, missing...)
		id, err := b.newValue(&value{name: vi.Name, shape: shape})
		if err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	if len(unknown) > 0 {
		return nil, &MissingDimsError{Dims: unknown}
	}
	// The caller allocates each input for every run.
	for _, id := range ids {
		v := b.values[id]
		if err := reserve(b.mem, fmt.Sprintf("input %q", v.name), v.shape, false, false); err != nil {
			return nil, err
		}
	}
	return ids, nil
}

// inputShape resolves a graph input's declared shape. Dimensions it cannot
// resolve are returned as descriptions, so that all of them are reported
// together.
func inputShape(vi *onnx.ValueInfo, dims map[string]int) ([]int, []string, error) {
	switch {
	case vi.Name == "":
		return nil, nil, fmt.Errorf("a graph input has no name")
	case !vi.IsTensor:
		return nil, nil, fmt.Errorf("input %q is not a tensor", vi.Name)
	case vi.ElemType != onnx.Float:
		return nil, nil, fmt.Errorf("input %q has element type %s; the runtime takes float32 inputs only", vi.Name, vi.ElemType)
	case !vi.HasShape:
		return nil, nil, fmt.Errorf("input %q declares no shape", vi.Name)
	}
	shape := make([]int, len(vi.Shape))
	var unknown []string
	for i, d := range vi.Shape {
		switch {
		case d.HasValue && d.Value >= 0 && d.Value <= maxTensorElements:
			shape[i] = int(d.Value)
		case d.HasValue:
			return nil, nil, fmt.Errorf("input %q: dimension %d is %d", vi.Name, i, d.Value)
		case d.Param != "":
			v, ok := dims[d.Param]
			if !ok {
				unknown = append(unknown, fmt.Sprintf("%q (input %q dimension %d)", d.Param, vi.Name, i))
				continue
			}
			if v < 0 {
				return nil, nil, fmt.Errorf("LoadOptions.Dims[%q] is %d", d.Param, v)
			}
			shape[i] = v
		default:
			unknown = append(unknown, fmt.Sprintf("unnamed (input %q dimension %d)", vi.Name, i))
		}
	}
	if _, err := checkedElements(shape); err != nil && unknown == nil {
		return nil, nil, fmt.Errorf("input %q: %w", vi.Name, err)
	}
	return shape, unknown, nil
}

// topologicalOrder orders the nodes so that each comes after the producers
// of its inputs, keeping the file's order where it already is one.
// defined holds the names available before any node runs.
func topologicalOrder(g *onnx.Graph, defined map[string]int) ([]int, error) {
	producer := map[string]int{}
	for i, n := range g.Nodes {
		for _, out := range n.Outputs {
			if out == "" {
				continue
			}
			if _, ok := defined[out]; ok {
				return nil, fmt.Errorf("node %d (%s %q) outputs %q, which is already a graph input or initializer", i, n.OpType, n.Name, out)
			}
			if p, dup := producer[out]; dup {
				return nil, fmt.Errorf("value %q is produced by node %d and node %d", out, p, i)
			}
			producer[out] = i
		}
	}
	pending := make([]int, len(g.Nodes))
	consumers := map[string][]int{}
	for i, n := range g.Nodes {
		for _, in := range uniqueNames(n.Inputs) {
			if _, ok := defined[in]; ok || in == "" {
				continue
			}
			if _, ok := producer[in]; !ok {
				return nil, fmt.Errorf("node %d (%s %q): input %q is not a graph input, an initializer or any node's output", i, n.OpType, n.Name, in)
			}
			pending[i]++
			consumers[in] = append(consumers[in], i)
		}
	}
	var order []int
	for i := range g.Nodes {
		if pending[i] == 0 {
			order = append(order, i)
		}
	}
	for next := 0; next < len(order); next++ {
		for _, out := range g.Nodes[order[next]].Outputs {
			for _, c := range consumers[out] {
				if pending[c]--; pending[c] == 0 {
					order = append(order, c)
				}
			}
		}
	}
	if len(order) < len(g.Nodes) {
		for i, n := range g.Nodes {
			if pending[i] > 0 {
				return nil, fmt.Errorf("node %d (%s %q) is part of a cycle", i, n.OpType, n.Name)
			}
		}
	}
	return order, nil
}

func uniqueNames(names []string) []string {
	out := slices.Clone(names)
	slices.Sort(out)
	return slices.Compact(out)
}

// addNode prepares one node: an Identity becomes an alias, a node whose
// inputs are all constant is folded, anything else is kept for execution.
func (b *builder) addNode(index int, n *onnx.Node) error {
	fail := func(err error) error {
		return fmt.Errorf("node %d (%s %q): %w", index, n.OpType, n.Name, err)
	}
	def := opTable[n.OpType]
	if err := checkArity(def, n); err != nil {
		return fail(err)
	}
	inputs := make([]*value, len(n.Inputs))
	ids := make([]int, len(n.Inputs))
	for i, name := range n.Inputs {
		ids[i] = -1
		if name != "" {
			ids[i] = b.byName[name]
			inputs[i] = b.values[ids[i]]
		}
	}
	if n.OpType == "Identity" {
		if n.Outputs[0] != "" {
			b.byName[n.Outputs[0]] = ids[0]
		}
		return nil
	}
	if b.shapes != nil {
		var err error
		// A RetraceError names the node already.
		if inputs, err = b.shapes.retrace(n, ids, inputs); err != nil {
			return err
		}
	}
	c := &nodeContext{node: n, opset: b.opset, inputs: inputs, attrs: attrReader{n: n}, mem: b.mem, shapesOnly: b.shapes != nil}
	p, err := def.prepare(c)
	if err == nil {
		err = c.attrs.err
	}
	if err != nil {
		return fail(err)
	}
	if p.consts != nil {
		return b.addConstants(n, ids, p.consts)
	}
	outs, err := b.addOutputValues(n, p.outputs)
	if err != nil {
		return fail(err)
	}
	if b.shapes != nil {
		b.shapes.propagate(n, ids, outs, b.values)
	}
	nd := &node{op: n.OpType, name: n.Name, in: ids, out: outs, kernel: p.kernel, params: p.params, src: index}
	if b.foldable(nd) {
		for _, id := range outs {
			if id >= 0 {
				if err := reserve(b.mem, "output", b.values[id].shape, false, false); err != nil {
					return fail(err)
				}
			}
		}
		b.fold(nd)
		return nil
	}
	if b.shapes == nil {
		b.nodes = append(b.nodes, nd)
	}
	return nil
}

func checkArity(def opDef, n *onnx.Node) error {
	if len(n.Inputs) < def.minIn || (def.maxIn >= 0 && len(n.Inputs) > def.maxIn) {
		return fmt.Errorf("has %d inputs, want %s", len(n.Inputs), arityRange(def.minIn, def.maxIn))
	}
	for i := 0; i < def.minIn; i++ {
		if n.Inputs[i] == "" {
			return fmt.Errorf("required input %d is omitted", i)
		}
	}
	if len(n.Outputs) < def.minOut || (def.maxOut >= 0 && len(n.Outputs) > def.maxOut) {
		return fmt.Errorf("has %d outputs, want %s", len(n.Outputs), arityRange(def.minOut, def.maxOut))
	}
	for i := 0; i < def.minOut; i++ {
		if n.Outputs[i] == "" {
			return fmt.Errorf("output %d has no name", i)
		}
	}
	return nil
}

func arityRange(lo, hi int) string {
	switch {
	case hi < 0:
		return fmt.Sprintf("at least %d", lo)
	case lo == hi:
		return fmt.Sprint(lo)
	}
	return fmt.Sprintf("%d to %d", lo, hi)
}

// addConstants names a node's outputs known at load; in, the node's
// input ids, say (to InferShapes) whether they carry the batch.
func (b *builder) addConstants(n *onnx.Node, in []int, consts []*value) error {
	outs := make([]int, len(consts))
	for i, v := range consts {
		v.name = n.Outputs[i]
		id, err := b.newValue(v)
		if err != nil {
			return err
		}
		outs[i] = id
	}
	if b.shapes != nil {
		b.shapes.propagate(n, in, outs, b.values)
	}
	return nil
}

// addOutputValues registers a node's outputs with their inferred shapes;
// an omitted optional output gets id -1.
func (b *builder) addOutputValues(n *onnx.Node, shapes [][]int) ([]int, error) {
	ids := make([]int, len(n.Outputs))
	for i, name := range n.Outputs {
		ids[i] = -1
		if name == "" {
			continue
		}
		if i >= len(shapes) {
			return nil, fmt.Errorf("output %d (%q) is not produced", i, name)
		}
		limit := maxTensorElements
		if b.shapes != nil {
			limit = maxShapeElements
		}
		if _, err := elementsUpTo(shapes[i], limit); err != nil {
			return nil, fmt.Errorf("output %q: %w", name, err)
		}
		id, err := b.newValue(&value{name: name, shape: shapes[i]})
		if err != nil {
			return nil, err
		}
		ids[i] = id
	}
	return ids, nil
}

// foldable reports whether a node can be computed at load: all its inputs
// are constant and its outputs (and workspace) are not too large to keep.
func (b *builder) foldable(nd *node) bool {
	for _, id := range nd.in {
		if id >= 0 && !b.values[id].isConst() {
			return false
		}
	}
	size := 0
	for _, id := range nd.out {
		if id >= 0 {
			size += numElements(b.values[id].shape)
		}
	}
	if s, ok := nd.kernel.(scratchUser); ok {
		size += s.scratchSize(1)
	}
	return size <= foldLimit
}

// fold computes a node at load and turns its outputs into constants.
func (b *builder) fold(nd *node) {
	in := make([]*Tensor, len(nd.in))
	for i, id := range nd.in {
		if id >= 0 {
			in[i] = b.values[id].konst
		}
	}
	out := make([]*Tensor, len(nd.out))
	for i, id := range nd.out {
		if id < 0 {
			continue
		}
		out[i] = NewTensor(b.values[id].shape...)
		b.values[id].konst = out[i]
	}
	w := newWorkers(1)
	defer w.stop()
	e := &env{workers: w}
	if s, ok := nd.kernel.(scratchUser); ok {
		e.scratch = make([]float32, s.scratchSize(1))
	}
	nd.kernel.bind(in, out, e)()
	b.keepIntegers(nd)
}

// keepIntegers marks the outputs of a node folded from integer constants
// as integers too, as ONNX types them: shape arithmetic (Add, Mul, Div,
// Concat, Unsqueeze of Shape's output) stays exact, and Div truncates as
// integer division does.
func (b *builder) keepIntegers(nd *node) {
	for _, id := range nd.in {
		if id >= 0 && b.values[id].ints == nil {
			return
		}
	}
	for _, id := range nd.out {
		if id < 0 {
			continue
		}
		v := b.values[id]
		v.ints = make([]int64, len(v.konst.Data))
		for i, f := range v.konst.Data {
			v.ints[i] = int64(f)
			// The float view agrees, so that readers of Constant (the
			// optimizer) see 24 where integer division made 49/2 24.
			v.konst.Data[i] = float32(v.ints[i])
		}
	}
}

// addOutputs resolves the graph outputs and checks their declared shapes
// against the inferred ones.
func (b *builder) addOutputs(m *Model, g *onnx.Graph) error {
	for _, vi := range g.Outputs {
		id, ok := b.byName[vi.Name]
		if !ok {
			return fmt.Errorf("graph output %q is not a graph input, an initializer or any node's output", vi.Name)
		}
		if err := checkDeclaredOutput(vi, b.values[id]); err != nil {
			return err
		}
		m.outputs = append(m.outputs, id)
		m.outputNames = append(m.outputNames, vi.Name)
	}
	return nil
}

// checkDeclaredOutput compares an output's declared type and shape with
// what the runtime inferred. Outputs are float32, except that an integer
// output known at load (Shape's, say) is given as float32 values.
func checkDeclaredOutput(vi *onnx.ValueInfo, v *value) error {
	inferred := v.shape
	if !vi.IsTensor {
		return fmt.Errorf("output %q is not a tensor", vi.Name)
	}
	if vi.ElemType != onnx.Float && vi.ElemType != onnx.Undefined && !(isIntegerType(vi.ElemType) && v.ints != nil) {
		return fmt.Errorf("output %q has element type %s; the runtime produces float32 only", vi.Name, vi.ElemType)
	}
	if !vi.HasShape {
		return nil
	}
	mismatch := len(vi.Shape) != len(inferred)
	for i := 0; !mismatch && i < len(inferred); i++ {
		mismatch = vi.Shape[i].HasValue && vi.Shape[i].Value != int64(inferred[i])
	}
	if mismatch {
		declared := make([]string, len(vi.Shape))
		for i, d := range vi.Shape {
			declared[i] = d.String()
		}
		return fmt.Errorf("output %q: inferred shape %s, the model declares [%s]", vi.Name, formatShape(inferred), strings.Join(declared, " "))
	}
	return nil
}

// liveNodes drops the nodes that no graph output depends on.
func liveNodes(nodes []*node, outputs []int) []*node {
	needed := map[int]bool{}
	for _, id := range outputs {
		needed[id] = true
	}
	live := make([]bool, len(nodes))
	for i := len(nodes) - 1; i >= 0; i-- {
		for _, id := range nodes[i].out {
			live[i] = live[i] || (id >= 0 && needed[id])
		}
		if live[i] {
			for _, id := range nodes[i].in {
				needed[id] = true
			}
		}
	}
	var out []*node
	for i, n := range nodes {
		if live[i] {
			out = append(out, n)
		}
	}
	return out
}

// MissingDimsError reports symbolic input dimensions that LoadOptions.Dims
// gives no value. Callers find it with errors.As and say how to give them.
type MissingDimsError struct {
	Dims []string // each as `"N" (input "x" dimension 0)`
}

func (e *MissingDimsError) Error() string {
	return "input dimensions without a value (give them in LoadOptions.Dims): " + strings.Join(e.Dims, ", ")
}
