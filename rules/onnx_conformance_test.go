package rules_test

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"rulebook/internal/testfiles"
	"rulebook/onnx"
	"rulebook/rules"
)

// conformanceOps are the ONNX operators this conformance test maps onto
// the registry: each operator's own node type, as its row names it.
func conformanceOps(reg *rules.Registry) []string {
	var out []string
	for _, op := range reg.Ops() {
		if t := op.ONNXType(); t != "" && !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	return out
}

// onnxType is the ONNX node type of the registry operator called name.
func onnxType(reg *rules.Registry, name string) string {
	op, ok := reg.Lookup(name)
	if !ok {
		panic("registry lacks " + name)
	}
	return op.ONNXType()
}

// dataTensor is one tensor of a test data set, converted to float64.
type dataTensor struct {
	dtype onnx.DataType
	dims  []int
	data  []float64
}

// mapping is an ONNX node expressed as a registry operator application.
type mapping struct {
	op     *rules.Op
	params []int
	inputs []*rules.FloatTensor
	// sliced runs a one-input operator on each slice along axis 0 and
	// stacks the results: the registry transposes matrices, ONNX's tests
	// transpose batches of them.
	sliced bool
}

// String renders the operator with named parameters, e.g.
// "pool_avg(kernel=3, stride=1, padding=same)".
func (m *mapping) String() string {
	parts := make([]string, len(m.params))
	for i, spec := range m.op.Params {
		parts[i] = spec.Name + "=" + spec.Format(m.params[i])
	}
	return m.op.Name + "(" + strings.Join(parts, ", ") + ")"
}

// skipError says why the registry cannot express an ONNX node.
type skipError string

func (s skipError) Error() string { return string(s) }

func skipf(format string, args ...any) error { return skipError(fmt.Sprintf(format, args...)) }

// nodeAttrs gives typed access to a node's attributes with defaults.
type nodeAttrs struct{ n *onnx.Node }

func (a nodeAttrs) has(name string) bool { return a.n.Attr(name) != nil }

func (a nodeAttrs) int(name string, def int64) int64 {
	if at := a.n.Attr(name); at != nil {
		return at.I
	}
	return def
}

func (a nodeAttrs) ints(name string) []int64 {
	if at := a.n.Attr(name); at != nil {
		return at.Ints
	}
	return nil
}

func (a nodeAttrs) str(name, def string) string {
	if at := a.n.Attr(name); at != nil {
		return at.S
	}
	return def
}

func newFloatTensor(d *dataTensor) *rules.FloatTensor {
	return &rules.FloatTensor{Shape: rules.NewShape(d.dims...), Data: d.data}
}

// checkParams rejects values outside the registry's declared ranges.
func checkParams(op *rules.Op, p []int) error {
	for i, spec := range op.Params {
		if spec.Symbols == nil && (p[i] < spec.Min || p[i] > spec.Max) {
			return skipf("%s %d outside the registry's range [%d, %d]", spec.Name, p[i], spec.Min, spec.Max)
		}
	}
	return nil
}

// checkRank rejects operands of rank above the registry's MaxRank.
func checkRank(in []*dataTensor) error {
	for _, d := range in {
		if len(d.dims) > rules.MaxRank {
			return skipf("rank %d exceeds the registry's %d", len(d.dims), rules.MaxRank)
		}
	}
	return nil
}

// windowPadding maps ONNX padding attributes of a 2-D sliding window onto
// the registry's same (SAME_UPPER) or valid padding. in, k and stride are
// per spatial axis (H, W). It also returns whether any padding is applied.
func windowPadding(a nodeAttrs, in, k [2]int, stride int) (padding int, padded bool, err error) {
	var upper, lower [4]int // ONNX order: H begin, W begin, H end, W end
	for d := 0; d < 2; d++ {
		out := (in[d] + stride - 1) / stride
		total := max(0, (out-1)*stride+k[d]-in[d])
		upper[d], upper[d+2] = total/2, total-total/2
		lower[d], lower[d+2] = total-total/2, total/2
	}
	nonzero := func(p [4]int) bool { return p != [4]int{} }
	switch autoPad := a.str(rules.ONNXAttrAutoPad, "NOTSET"); autoPad {
	case "SAME_UPPER":
		return rules.PadSame, nonzero(upper), nil
	case "SAME_LOWER":
		if lower != upper {
			return 0, false, skipf("SAME_LOWER pads differ from SAME_UPPER's")
		}
		return rules.PadSame, nonzero(upper), nil
	case "VALID":
		return rules.PadValid, false, nil
	case "NOTSET", "":
		pads := a.ints(rules.ONNXAttrPads)
		if pads == nil {
			return rules.PadValid, false, nil
		}
		if len(pads) != 4 {
			return 0, false, skipf("%d pads for 2 spatial axes", len(pads))
		}
		var p [4]int
		for i, v := range pads {
			p[i] = int(v)
		}
		switch {
		case !nonzero(p):
			return rules.PadValid, false, nil
		case p == upper:
			return rules.PadSame, true, nil
		case p[0] != p[2] || p[1] != p[3] || p[0] != p[1]:
			return 0, false, skipf("asymmetric pads")
		}
		return 0, false, skipf("explicit pads other than same or valid")
	default:
		return 0, false, skipf("auto_pad %q", autoPad)
	}
}

// uniformStride returns the single stride of a 2-D window.
func uniformStride(a nodeAttrs) (int, error) {
	s := a.ints(rules.ONNXAttrStrides)
	switch {
	case s == nil:
		return 1, nil
	case len(s) != 2:
		return 0, skipf("%d strides for 2 spatial axes", len(s))
	case s[0] != s[1]:
		return 0, skipf("unequal strides")
	}
	return int(s[0]), nil
}

func checkNoDilation(a nodeAttrs) error {
	for _, d := range a.ints(rules.ONNXAttrDilations) {
		if d != 1 {
			return skipf("dilations")
		}
	}
	return nil
}

// mapNode expresses an ONNX node on concrete inputs (nil entries are omitted
// optional inputs) as a registry operator application, or returns a
// skipError saying why it cannot. outs are the expected outputs' shapes.
func mapNode(reg *rules.Registry, n *onnx.Node, in []*dataTensor, outs [][]int) (*mapping, error) {
	a := nodeAttrs{n}
	lookup := func(name string) *rules.Op {
		op, ok := reg.Lookup(name)
		if !ok {
			panic("registry lacks " + name)
		}
		return op
	}
	typeOf := func(name string) string { return onnxType(reg, name) }
	// Element types and ranks of the data operands.
	data := in
	if n.OpType == typeOf("split") && len(in) > 1 {
		data = in[:1]
	}
	for _, d := range data {
		if d == nil {
			continue
		}
		if d.dtype != onnx.Float && d.dtype != onnx.Double {
			return nil, skipf("%s data", strings.ToLower(d.dtype.String()))
		}
		if slices.Contains(d.dims, 0) {
			return nil, skipf("empty tensor")
		}
	}
	arity := func(want int) error {
		if len(in) != want {
			return skipf("%d inputs", len(in))
		}
		for _, d := range in {
			if d == nil {
				return skipf("omitted optional input")
			}
		}
		return nil
	}
	m := &mapping{}
	switch n.OpType {
	case typeOf("ewadd"), typeOf("ewmul"):
		if err := arity(2); err != nil {
			return nil, err
		}
		if !slices.Equal(in[0].dims, in[1].dims) {
			return nil, skipf("broadcasting")
		}
		m.op = lookup("ewadd")
		if n.OpType == typeOf("ewmul") {
			m.op = lookup("ewmul")
		}
	case typeOf("relu"):
		if err := arity(1); err != nil {
			return nil, err
		}
		m.op = lookup("relu")
	case typeOf("matmul"):
		if err := arity(2); err != nil {
			return nil, err
		}
		x, y := in[0].dims, in[1].dims
		switch {
		case len(x) < 2 || len(y) < 2:
			return nil, skipf("1-D matmul operand")
		case len(x) != len(y) || !slices.Equal(x[:len(x)-2], y[:len(y)-2]):
			return nil, skipf("broadcasting")
		case len(x) > 3:
			return nil, skipf("rank-%d matmul", len(x))
		}
		m.op = lookup("matmul")
	case typeOf("transpose"):
		if err := arity(1); err != nil {
			return nil, err
		}
		r := len(in[0].dims)
		perm := a.ints(rules.ONNXAttrPerm)
		if perm == nil {
			for i := r - 1; i >= 0; i-- {
				perm = append(perm, int64(i))
			}
		}
		swap := make([]int64, r)
		for i := range swap {
			swap[i] = int64(i)
		}
		if r >= 2 {
			swap[r-1], swap[r-2] = swap[r-2], swap[r-1]
		}
		switch {
		case r != 2 && r != 3:
			return nil, skipf("rank-%d transpose", r)
		case !slices.Equal(perm, swap):
			if slices.IsSorted(perm) {
				return nil, skipf("identity perm")
			}
			return nil, skipf("perm not a swap of the last two axes")
		}
		m.op, m.sliced = lookup("transpose"), r == 3
	case typeOf("concat"):
		if len(in) != 2 {
			return nil, skipf("%d inputs", len(in))
		}
		if err := arity(2); err != nil {
			return nil, err
		}
		r := len(in[0].dims)
		axis := int(a.int(rules.ONNXAttrAxis, 0))
		if axis < 0 {
			axis += r
		}
		if axis < 0 || axis >= r {
			return nil, skipf("axis %d out of range", a.int(rules.ONNXAttrAxis, 0))
		}
		m.op, m.params = lookup("concat"), []int{axis}
	case typeOf("split"):
		if len(n.Outputs) != 2 {
			return nil, skipf("%d outputs", len(n.Outputs))
		}
		if len(in) == 0 || in[0] == nil {
			return nil, skipf("no input")
		}
		x := in[0]
		r := len(x.dims)
		axis := int(a.int(rules.ONNXAttrAxis, 0))
		if axis < 0 {
			axis += r
		}
		if axis < 0 || axis >= r {
			return nil, skipf("axis %d out of range", a.int(rules.ONNXAttrAxis, 0))
		}
		if err := checkRank(in[:1]); err != nil {
			return nil, err
		}
		var sizes []int
		switch {
		case len(in) > 1 && in[1] != nil:
			for _, v := range in[1].data {
				sizes = append(sizes, int(v))
			}
		case a.has(rules.ONNXAttrSplit):
			for _, v := range a.ints(rules.ONNXAttrSplit) {
				sizes = append(sizes, int(v))
			}
		case a.has(rules.ONNXAttrNumOutputs):
			return nil, skipf("num_outputs attribute")
		default:
			if x.dims[axis]%2 != 0 {
				return nil, skipf("odd extent split into equal halves")
			}
			sizes = []int{x.dims[axis] / 2, x.dims[axis] / 2}
		}
		if len(sizes) != 2 || sizes[0]+sizes[1] != x.dims[axis] || sizes[0] <= 0 || sizes[1] <= 0 {
			return nil, skipf("split sizes not two non-empty parts")
		}
		t := newFloatTensor(x)
		t.Shape.Split[axis] = &rules.SplitTree{LeftSize: sizes[0]}
		m.op, m.params, m.inputs = lookup("split"), []int{axis}, []*rules.FloatTensor{t}
		return m, checkParams(m.op, m.params)
	case typeOf("conv2d"):
		if len(in) == 3 {
			return nil, skipf("3 inputs")
		}
		if err := arity(2); err != nil {
			return nil, err
		}
		x, w := in[0].dims, in[1].dims
		if len(x) != 4 {
			return nil, skipf("%d-D convolution", len(x)-2)
		}
		if err := checkNoDilation(a); err != nil {
			return nil, err
		}
		if ks := a.ints(rules.ONNXAttrKernelShape); ks != nil && (len(ks) != 2 || int(ks[0]) != w[2] || int(ks[1]) != w[3]) {
			return nil, skipf("kernel_shape disagrees with W")
		}
		g := int(a.int(rules.ONNXAttrGroup, 1))
		stride, err := uniformStride(a)
		if err != nil {
			return nil, err
		}
		padding, _, err := windowPadding(a, [2]int{x[2], x[3]}, [2]int{w[2], w[3]}, stride)
		if err != nil {
			return nil, err
		}
		m.op, m.params = lookup("conv2d"), []int{stride, padding, rules.ActNone, g}
	case typeOf("pool_avg"), typeOf("pool_max"):
		if err := arity(1); err != nil {
			return nil, err
		}
		if len(n.Outputs) != 1 {
			return nil, skipf("Indices output")
		}
		x := in[0].dims
		if len(x) != 4 {
			return nil, skipf("%d-D pooling", len(x)-2)
		}
		if err := checkNoDilation(a); err != nil {
			return nil, err
		}
		ks := a.ints(rules.ONNXAttrKernelShape)
		if len(ks) != 2 {
			return nil, skipf("%d-D kernel_shape", len(ks))
		}
		if ks[0] != ks[1] {
			return nil, skipf("non-square kernel")
		}
		k := int(ks[0])
		stride, err := uniformStride(a)
		if err != nil {
			return nil, err
		}
		padding, padded, err := windowPadding(a, [2]int{x[2], x[3]}, [2]int{k, k}, stride)
		if err != nil {
			return nil, err
		}
		avg := n.OpType == typeOf("pool_avg")
		if avg && a.int(rules.ONNXAttrCountIncludePad, 0) == 0 && padded {
			return nil, skipf("count_include_pad=0 with padding")
		}
		m.op, m.params = lookup("pool_max"), []int{k, stride, padding}
		if avg {
			m.op = lookup("pool_avg")
		}
		if a.int(rules.ONNXAttrCeilMode, 0) != 0 {
			// ceil_mode only changes the output extent; where that equals the
			// floor extent the operator is the same.
			shapes, err := m.op.InferShapes(m.params, []rules.Shape{rules.NewShape(x...)})
			if err != nil || len(outs) == 0 || !slices.Equal(shapes[0].DimList(), outs[0]) {
				return nil, skipf("ceil_mode")
			}
		}
	default:
		return nil, skipf("operator %s not mapped", n.OpType)
	}
	if err := checkParams(m.op, m.params); err != nil {
		return nil, err
	}
	if err := checkRank(in); err != nil {
		return nil, err
	}
	for _, d := range in {
		m.inputs = append(m.inputs, newFloatTensor(d))
	}
	return m, nil
}

// conformanceCase is one node test directory.
type conformanceCase struct {
	dir   string
	model *onnx.Model
	node  *onnx.Node
}

// loadDataSet reads one test_data_set_* directory and lines the tensors up
// with the node's inputs and outputs by name.
func loadDataSet(c *conformanceCase, set string) (in, out []*dataTensor, err error) {
	g := c.model.Graph
	byName := map[string]*dataTensor{}
	read := func(path string) (*dataTensor, error) {
		t, err := onnx.ReadTensor(path)
		if err != nil {
			return nil, err
		}
		d := &dataTensor{dtype: t.DataType, dims: t.Shape()}
		if d.data, err = t.Float64s(); err != nil {
			return nil, err
		}
		return d, nil
	}
	for _, init := range g.Initializers {
		d := &dataTensor{dtype: init.DataType, dims: init.Shape()}
		if d.data, err = init.Float64s(); err != nil {
			return nil, nil, err
		}
		byName[init.Name] = d
	}
	for i, vi := range g.Inputs {
		p := filepath.Join(set, fmt.Sprintf("input_%d.pb", i))
		if _, err := os.Stat(p); err != nil {
			continue // an input with an initializer default
		}
		if byName[vi.Name], err = read(p); err != nil {
			return nil, nil, err
		}
	}
	for _, name := range c.node.Inputs {
		if name == "" {
			in = append(in, nil)
			continue
		}
		d, ok := byName[name]
		if !ok {
			return nil, nil, fmt.Errorf("no data for node input %q", name)
		}
		in = append(in, d)
	}
	outIdx := map[string]int{}
	for i, vi := range g.Outputs {
		outIdx[vi.Name] = i
	}
	for _, name := range c.node.Outputs {
		i, ok := outIdx[name]
		if !ok {
			return nil, nil, fmt.Errorf("node output %q is not a graph output", name)
		}
		d, err := read(filepath.Join(set, fmt.Sprintf("output_%d.pb", i)))
		if err != nil {
			return nil, nil, err
		}
		out = append(out, d)
	}
	return in, out, nil
}

// evalMapped runs the registry kernel, turning a panic into an error.
func evalMapped(m *mapping) (out []*rules.FloatTensor, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("kernel panicked: %v", r)
		}
	}()
	if !m.sliced {
		return rules.Eval(m.op, m.op.FloatKernel, m.params, m.inputs, rules.Shape{})
	}
	x := m.inputs[0]
	n := x.Shape.Dims[0]
	inner := rules.NewShape(x.Shape.DimList()[1:]...)
	var stacked *rules.FloatTensor
	for b := 0; b < n; b++ {
		slice := &rules.FloatTensor{Shape: inner, Data: x.Data[b*inner.Size() : (b+1)*inner.Size()]}
		outs, err := rules.Eval(m.op, m.op.FloatKernel, m.params, []*rules.FloatTensor{slice}, rules.Shape{})
		if err != nil {
			return nil, err
		}
		if stacked == nil {
			stacked = rules.NewTensor[float64](rules.NewShape(append([]int{n}, outs[0].Shape.DimList()...)...))
		}
		copy(stacked.Data[b*outs[0].Shape.Size():], outs[0].Data)
	}
	return []*rules.FloatTensor{stacked}, nil
}

// compareOutputs checks shapes and values within 1e-4 relative tolerance.
func compareOutputs(got []*rules.FloatTensor, want []*dataTensor) error {
	if len(got) != len(want) {
		return fmt.Errorf("%d outputs, want %d", len(got), len(want))
	}
	for i := range got {
		if g, w := got[i].Shape.DimList(), want[i].dims; !slices.Equal(g, w) {
			return fmt.Errorf("output %d: shape %v, want %v", i, g, w)
		}
		bad, first := 0, -1
		for j, b := range want[i].data {
			v := got[i].Data[j]
			if math.IsNaN(b) && math.IsNaN(v) {
				continue
			}
			if !(math.Abs(v-b) <= 1e-4*math.Max(1, math.Abs(b))) {
				if first < 0 {
					first = j
				}
				bad++
			}
		}
		if bad > 0 {
			return fmt.Errorf("output %d: %d of %d elements differ; first at flat index %d: got %.10g, want %.10g",
				i, bad, len(want[i].data), first, got[i].Data[first], want[i].data[first])
		}
	}
	return nil
}

type opTally struct {
	passed, skipped, failed int
}

func TestONNXNodeConformance(t *testing.T) {
	root := testfiles.ONNXNodeTests(t)
	t.Logf("ONNX node tests: %s", root)
	dirs, err := filepath.Glob(filepath.Join(root, "test_*"))
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(dirs)
	reg := rules.Default()
	ops := conformanceOps(reg)
	wanted := map[string]bool{}
	for _, op := range ops {
		wanted[op] = true
	}
	var cases []*conformanceCase
	for _, dir := range dirs {
		path := filepath.Join(dir, "model.onnx")
		if _, err := os.Stat(path); err != nil {
			continue
		}
		m, err := onnx.ReadModel(path)
		if err != nil {
			t.Errorf("%v", err)
			continue
		}
		if m.Graph == nil || len(m.Graph.Nodes) != 1 {
			continue
		}
		n := m.Graph.Nodes[0]
		if (n.Domain != "" && n.Domain != "ai.onnx") || !wanted[n.OpType] {
			continue
		}
		cases = append(cases, &conformanceCase{dir: dir, model: m, node: n})
	}

	tally := map[string]*opTally{}
	for _, op := range ops {
		tally[op] = &opTally{}
	}
	reasons := map[string][]string{} // reason -> case names
	for _, c := range cases {
		name := filepath.Base(c.dir)
		op := c.node.OpType
		t.Run(name, func(t *testing.T) {
			sets, _ := filepath.Glob(filepath.Join(c.dir, "test_data_set_*"))
			sort.Strings(sets)
			if len(sets) == 0 {
				tally[op].failed++
				t.Fatalf("no test_data_set_* in %s", c.dir)
			}
			for _, set := range sets {
				in, want, err := loadDataSet(c, set)
				if err != nil {
					tally[op].failed++
					t.Fatalf("%s: %v", set, err)
				}
				outShapes := make([][]int, len(want))
				for i, w := range want {
					outShapes[i] = w.dims
				}
				m, err := mapNode(reg, c.node, in, outShapes)
				if skip, ok := err.(skipError); ok {
					tally[op].skipped++
					reasons[string(skip)] = append(reasons[string(skip)], name)
					t.Skipf("%s: %s", op, skip)
				}
				if err != nil {
					tally[op].failed++
					t.Fatalf("mapping: %v", err)
				}
				got, err := evalMapped(m)
				if err == nil {
					err = compareOutputs(got, want)
				}
				if err != nil {
					tally[op].failed++
					t.Fatalf("%s as %s on %s: %v", op, m, filepath.Base(set), err)
				}
			}
			tally[op].passed++
		})
	}

	var report strings.Builder
	fmt.Fprintf(&report, "ONNX node conformance (%s)\n", root)
	fmt.Fprintf(&report, "%-12s %6s %7s %6s\n", "op", "passed", "skipped", "failed")
	for _, op := range ops {
		r := tally[op]
		fmt.Fprintf(&report, "%-12s %6d %7d %6d\n", op, r.passed, r.skipped, r.failed)
	}
	report.WriteString("skip reasons:\n")
	keys := make([]string, 0, len(reasons))
	for k := range reasons {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(&report, "  %-50s %2d  %s\n", k, len(reasons[k]), strings.Join(reasons[k], " "))
	}
	t.Log("\n" + report.String())
	if path := os.Getenv("RULEBOOK_CONFORMANCE_REPORT"); path != "" {
		if err := os.WriteFile(path, []byte(report.String()), 0o644); err != nil {
			t.Errorf("writing conformance report: %v", err)
		}
	}
	for _, op := range ops {
		if tally[op].passed == 0 {
			t.Errorf("%s: no passing case (%d skipped, %d failed)", op, tally[op].skipped, tally[op].failed)
		}
	}
}
