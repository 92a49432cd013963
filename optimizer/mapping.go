package optimizer

import (
	"fmt"
	"math"
	"slices"

	"rulebook/onnx"
	"rulebook/rules"
	"rulebook/runtime"
)

// mapped maps a node onto registry operators when their semantics agree
// exactly with the node's attributes and shapes; ok is false to keep the
// node opaque, with the reason in b.why when the registry has the
// operator. The operators' adapters say which node types map.
func (b *builder) mapped(n *onnx.Node, args []rules.Value) (ok bool, err error) {
	m, found := b.mappings[n.OpType]
	if !found {
		return false, nil
	}
	if kind, ok := b.fused[n.Outputs[0]]; ok {
		// A GELU's halving folded into the next product's weight, say,
		// looked 1.4% cheaper on bert_base and left ONNX Runtime 10 of its
		// 12 Gelu nodes to run unfused.
		return b.outsideRules(string(kind), fmt.Sprintf("part of a %s, which both runtimes run as one fused step: a rewrite inside it would break the fusion", kind))
	}
	if r := b.maxRank(n); r > rules.MaxRank {
		return b.refuse("operands of rank %d (the registry's have at most %d axes)", r, rules.MaxRank)
	}
	return m.to(b, m.op, n, args)
}

// relu maps a node onto relu as it is.
func (b *builder) relu(op string, n *onnx.Node, args []rules.Value) (bool, error) {
	return b.emit(n, op, nil, args...)
}

// transpose maps a Transpose of a matrix.
func (b *builder) transpose(op string, n *onnx.Node, args []rules.Value) (bool, error) {
	perm, rank := attrInts(n, rules.ONNXAttrPerm), len(b.g.shape(args[0]))
	switch {
	case rank != 2:
		return b.refuse("a transpose of rank %d (the registry transposes matrices)", rank)
	case perm != nil && !slices.Equal(perm, []int{1, 0}):
		return b.refuse("perm %v", perm)
	}
	return b.emit(n, op, nil, args...)
}

// outsideRules keeps the node being mapped opaque as (part of) an
// operator no rule family covers, named uncovered, and says why.
func (b *builder) outsideRules(uncovered, why string) (bool, error) {
	b.why, b.uncovered = why, uncovered
	return false, nil
}

// refuse keeps the node being mapped opaque and says why, for the report.
func (b *builder) refuse(format string, args ...any) (bool, error) {
	b.why = fmt.Sprintf(format, args...)
	return false, nil
}

// emit adds one registry node for an ONNX node. A shape the registry
// refuses keeps the node opaque; a shape it infers differently from the
// runtime is a bug, reported.
func (b *builder) emit(n *onnx.Node, op string, params []int, args ...rules.Value) (bool, error) {
	vals, err := b.add(op, params, args...)
	if err != nil {
		return b.refuse("the registry's %s does not take these operands: %v", op, err)
	}
	return true, b.bind(n, vals)
}

// elementwise maps Add and Mul (onto op, ewadd or ewmul) of equal shapes,
// Mul by a scalar, and Add and Mul of a weight that broadcasts to the
// other operand's shape.
func (b *builder) elementwise(op string, n *onnx.Node, args []rules.Value) (bool, error) {
	x, y := b.g.shape(args[0]), b.g.shape(args[1])
	scalar := n.OpType == b.g.onnxType(rules.NameSmul)
	switch {
	case slices.Equal(x, y):
		return b.emit(n, op, nil, args...)
	case scalar && len(y) == 0:
		return b.emit(n, rules.NameSmul, nil, args[0], args[1])
	case scalar && len(x) == 0:
		return b.emit(n, rules.NameSmul, nil, args[1], args[0])
	}
	if w, ok := b.broadcastWeight(args[1], x, n.Outputs[0]); ok {
		return b.emit(n, op, nil, args[0], w)
	}
	if w, ok := b.broadcastWeight(args[0], y, n.Outputs[0]); ok {
		return b.emit(n, op, nil, w, args[1])
	}
	return b.refuse("shapes %v and %v broadcast, and the smaller operand is not a weight", x, y)
}

// broadcastWeight is a weight seen at the larger shape it broadcasts to,
// as a new graph input for the node that writes out: rules see the full
// shape, lowering and costs the stored one.
func (b *builder) broadcastWeight(v rules.Value, shape []int, out string) (rules.Value, bool) {
	if !v.IsInput() || b.g.Inputs[v.Input()].Data == nil {
		return rules.Value{}, false
	}
	w := b.g.Inputs[v.Input()]
	if len(w.Shape) > len(shape) {
		return rules.Value{}, false
	}
	for i := 1; i <= len(w.Shape); i++ {
		if d := w.Shape[len(w.Shape)-i]; d != 1 && d != shape[len(shape)-i] {
			return rules.Value{}, false
		}
	}
	return b.addInput(Value{Name: b.g.gen("bcast", w.Name+"@"+out), Shape: slices.Clone(shape), Compact: w.Data, Origin: w.Name}), true
}

// matmul maps MatMul of equal ranks 2 or 3, and of a rank-3 operand by a
// weight matrix, which is seen with the batch axis it broadcasts along.
func (b *builder) matmul(op string, n *onnx.Node, args []rules.Value) (bool, error) {
	x, y := b.g.shape(args[0]), b.g.shape(args[1])
	switch {
	case len(x) == len(y) && (len(x) == 2 || len(x) == 3 && x[0] == y[0]):
		return b.emit(n, op, nil, args...)
	case len(x) == 3 && len(y) == 2:
		if w, ok := b.broadcastWeight(args[1], []int{x[0], y[0], y[1]}, n.Outputs[0]); ok {
			return b.emit(n, op, nil, args[0], w)
		}
	}
	return b.refuse("a product of shapes %v and %v (the registry's are of matrices or equal batches of them, or by a weight matrix)", x, y)
}

// gemm maps Gemm without scaling or a transposed first operand: a matrix
// product (of the transposed weight when transB is set) plus the bias C,
// a weight that broadcasts to the product or an activation of its shape.
func (b *builder) gemm(_ string, n *onnx.Node, args []rules.Value) (bool, error) {
	alpha, beta := attrFloat(n, rules.ONNXAttrAlpha, 1), attrFloat(n, rules.ONNXAttrBeta, 1)
	if alpha != 1 || beta != 1 || attrInt(n, rules.ONNXAttrTransA, 0) != 0 || len(args) < 2 {
		return b.refuse("alpha %g, beta %g, transA %d (only a plain product plus a bias maps)", alpha, beta, attrInt(n, rules.ONNXAttrTransA, 0))
	}
	x, w := b.g.shape(args[0]), b.g.shape(args[1])
	transB := attrInt(n, rules.ONNXAttrTransB, 0) != 0
	if len(x) != 2 || len(w) != 2 {
		return b.refuse("operands of ranks %d and %d", len(x), len(w))
	}
	rows, cols := w[0], w[1]
	if transB {
		rows, cols = cols, rows
	}
	prodShape := []int{x[0], cols}
	if x[1] != rows {
		return b.refuse("operands of shapes %v and %v do not multiply", x, w)
	}
	var bias rules.Value
	if len(args) == 3 {
		var ok bool
		if bias, ok = b.broadcastWeight(args[2], prodShape, n.Outputs[0]); !ok && !slices.Equal(b.g.shape(args[2]), prodShape) {
			return b.refuse("a bias of shape %v that is not a weight broadcast to %v", b.g.shape(args[2]), prodShape)
		} else if !ok {
			bias = args[2]
		}
	}
	// The shapes fit: from here on a failure to add a node is a bug.
	weight := args[1]
	if transB {
		t, err := b.add(rules.NameTranspose, nil, weight)
		if err != nil {
			return false, err
		}
		weight = t[0]
	}
	prod, err := b.add(rules.NameMatmul, nil, args[0], weight)
	if err != nil {
		return false, err
	}
	if len(args) == 2 {
		return true, b.bind(n, prod)
	}
	sum, err := b.add(rules.NameEwadd, nil, prod[0], bias)
	if err != nil {
		return false, err
	}
	return true, b.bind(n, sum)
}

// batchNorm maps inference-mode BatchNormalization onto x·S + T with
// S = scale/√(var+ε) and T = bias − mean·S per channel, weights broadcast
// along every axis but the channels: in these terms rules can move the
// normalisation and fold its weights into a neighbour's, where a
// BatchNormalization node would stay opaque.
func (b *builder) batchNorm(_ string, n *onnx.Node, args []rules.Value) (bool, error) {
	x := b.g.shape(args[0])
	if len(args) != 5 || len(n.Outputs) != 1 || attrInt(n, rules.ONNXAttrTrainingMode, 0) != 0 || len(x) < 2 {
		return b.refuse("training mode, or running statistics as outputs")
	}
	var p [4][]float32 // scale, bias, mean, variance
	for i, a := range args[1:] {
		if !a.IsInput() || b.g.Inputs[a.Input()].Data == nil || len(b.g.Inputs[a.Input()].Data.Data) != x[1] {
			return b.refuse("scale, bias, mean and variance are not weights of %d channels", x[1])
		}
		p[i] = b.g.Inputs[a.Input()].Data.Data
	}
	eps := float64(attrFloat(n, rules.ONNXAttrEpsilon, 1e-5))
	scale, shift := make([]float32, x[1]), make([]float32, x[1])
	for c := range scale {
		scale[c] = float32(float64(p[0][c]) / math.Sqrt(float64(p[3][c])+eps))
		shift[c] = p[1][c] - p[2][c]*scale[c]
	}
	perChannel := func(role string, data []float32) rules.Value {
		shape := append([]int{x[1]}, slices.Repeat([]int{1}, len(x)-2)...)
		return b.addInput(Value{Name: b.g.gen(role, n.Outputs[0]), Shape: slices.Clone(x), Compact: &runtime.Tensor{Shape: shape, Data: data}})
	}
	prod, err := b.add(rules.NameEwmul, nil, args[0], perChannel("bn_scale", scale))
	if err != nil {
		return false, fmt.Errorf("a batch normalisation's scale: %w", err)
	}
	sum, err := b.add(rules.NameEwadd, nil, prod[0], perChannel("bn_shift", shift))
	if err != nil {
		return false, fmt.Errorf("a batch normalisation's shift: %w", err)
	}
	return true, b.bind(n, sum)
}

// clip maps Clip at zero with no upper bound onto op, relu; ReLU6's
// Clip(0, 6) has no registry operator.
func (b *builder) clip(op string, n *onnx.Node, args []rules.Value) (bool, error) {
	bound := func(i int) (float32, bool, bool) { // value, present, known
		if len(n.Inputs) <= i || n.Inputs[i] == "" {
			return 0, false, true
		}
		t, ok := b.rt.Constant(n.Inputs[i])
		if !ok || len(t.Data) != 1 {
			return 0, true, false
		}
		return t.Data[0], true, true
	}
	lo, hasLo, knownLo := bound(1)
	_, hasHi, knownHi := bound(2)
	if opset, _ := b.g.model.Opset(""); opset < 11 {
		lo, hasLo, knownLo = attrFloat(n, "min", 0), n.Attr("min") != nil, true
		hasHi, knownHi = n.Attr("max") != nil, true
	}
	if !knownLo || !knownHi || !hasLo || lo != 0 || hasHi {
		return b.outsideRules(n.OpType, noOperator+": bounds other than [0, ∞) (the registry has relu, not relu6)")
	}
	return b.emit(n, op, nil, args[0])
}

// window is the geometry of a 2-D convolution or pooling window in the
// registry's terms: a kernel of any height and width, equal strides, and
// same or valid padding.
type window struct {
	kernel          []int
	stride, padding int
}

// window2D reads kernel, strides, pads, auto_pad and dilations of a 2-D
// window over an NCHW input of spatial extent in (rules.ONNXWindow); why
// says what the registry cannot express, and is empty when it can.
func window2D(n *onnx.Node, kernel []int, in []int) (w window, why string) {
	w.kernel = kernel
	w.stride, w.padding, why = rules.ONNXWindow{Kernel: kernel, In: in,
		Strides: attrInts(n, rules.ONNXAttrStrides), Dilations: attrInts(n, rules.ONNXAttrDilations),
		Pads: attrInts(n, rules.ONNXAttrPads), AutoPad: attrString(n, rules.ONNXAttrAutoPad, "")}.Registry()
	return w, why
}

// conv maps a 2-D Conv; a bias becomes an ewadd with the bias broadcast
// to the output (a weight, folded back into the Conv when lowering).
func (b *builder) conv(op string, n *onnx.Node, args []rules.Value) (bool, error) {
	x, w := b.g.shape(args[0]), b.g.shape(args[1])
	if len(x) != 4 || len(w) != 4 {
		return b.refuse("a convolution of rank %d (the registry's are 2-D)", len(x))
	}
	if ks := attrInts(n, rules.ONNXAttrKernelShape); ks != nil && !slices.Equal(ks, w[2:]) {
		return b.refuse("kernel_shape %v is not the weight's %v", ks, w[2:])
	}
	win, why := window2D(n, w[2:], x[2:])
	if why != "" {
		return b.refuse("%s", why)
	}
	groups := attrInt(n, rules.ONNXAttrGroup, 1)
	switch {
	case groups == x[1] && w[1] == 1 && groups > 1:
		groups = rules.GroupsDepthwise
	case groups < 1:
		return b.refuse("group %d", groups)
	}
	attrs := rules.ConvAttrs{Stride: win.stride, Padding: win.padding, Activation: rules.ActNone, Groups: groups}
	conv, err := b.add(op, attrs.Params(), args[0], args[1])
	if err != nil {
		return b.refuse("the registry's conv2d does not take these operands: %v", err)
	}
	if len(args) == 2 {
		return true, b.bind(n, conv)
	}
	bias := args[2]
	if !bias.IsInput() || b.g.Inputs[bias.Input()].Data == nil {
		return false, fmt.Errorf("the bias is not a weight")
	}
	orig := b.g.Inputs[bias.Input()]
	channels := &runtime.Tensor{Shape: []int{len(orig.Data.Data), 1, 1}, Data: orig.Data.Data}
	expanded := b.addInput(Value{Name: b.g.gen("bcast", orig.Name+"@"+n.Outputs[0]), Shape: b.g.shape(conv[0]), Compact: channels, Origin: orig.Name})
	sum, err := b.add(rules.NameEwadd, nil, conv[0], expanded)
	if err != nil {
		return false, err
	}
	return true, b.bind(n, sum)
}

// pool maps 2-D MaxPool and AveragePool onto op; average pooling counts
// padded cells as zeros, so only count_include_pad=1 or no padding maps.
func (b *builder) pool(op string, n *onnx.Node, args []rules.Value) (bool, error) {
	x := b.g.shape(args[0])
	switch {
	case len(x) != 4:
		return b.refuse("pooling of rank %d (the registry's is 2-D)", len(x))
	case len(n.Outputs) != 1:
		return b.refuse("a second output, the indices")
	case attrInt(n, rules.ONNXAttrCeilMode, 0) != 0:
		return b.refuse("ceil_mode 1 (the registry's windows round the output size down)")
	case attrInt(n, rules.ONNXAttrStorageOrder, 0) != 0:
		return b.refuse("storage_order %d", attrInt(n, rules.ONNXAttrStorageOrder, 0))
	}
	kernel := attrInts(n, rules.ONNXAttrKernelShape)
	if len(kernel) == 2 && kernel[0] != kernel[1] {
		return b.refuse("a %d×%d window (the registry's pools are square)", kernel[0], kernel[1])
	}
	win, why := window2D(n, kernel, x[2:])
	if why != "" {
		return b.refuse("%s", why)
	}
	if op == rules.NamePoolAvg {
		if win.padding == rules.PadSame && attrInt(n, rules.ONNXAttrCountIncludePad, 0) != 1 && !slices.Equal(rules.ONNXPads(x[2:], win.kernel, win.stride, rules.PadSame), []int{0, 0, 0, 0}) {
			return b.refuse("padding without count_include_pad (the registry's average counts padded cells)")
		}
	}
	return b.emit(n, op, rules.WindowAttrs{Kernel: win.kernel[0], Stride: win.stride, Padding: win.padding}.Params(), args...)
}

// padsPool reports whether a Pad only feeds an AveragePool so that the two
// are average pooling with same padding, counting the padded cells: zeros
// added around the spatial axes, exactly SAME_UPPER's pads, under a pool
// without pads of its own. Exporters write PyTorch's avg_pool2d(padding=1)
// this way.
func (b *builder) padsPool(n *onnx.Node) bool {
	pool, ok := b.onlyReader(n.Outputs[0])
	x, known := b.rt.Shape(n.Inputs[0])
	if !ok || !known || pool.OpType != b.g.onnxType(rules.NamePoolAvg) || len(x) != 4 || attrString(n, rules.ONNXAttrMode, "constant") != "constant" {
		return false
	}
	pads, ok := b.padAmounts(n)
	if !ok || attrInt(pool, rules.ONNXAttrCeilMode, 0) != 0 || slices.ContainsFunc(attrInts(pool, rules.ONNXAttrPads), func(p int) bool { return p != 0 }) {
		return false
	}
	kernel, strides := attrInts(pool, rules.ONNXAttrKernelShape), attrIntsDefault(pool, rules.ONNXAttrStrides, []int{1, 1})
	if len(kernel) != 2 || kernel[0] != kernel[1] || len(strides) != 2 || strides[0] != strides[1] ||
		!slices.Equal(attrIntsDefault(pool, rules.ONNXAttrDilations, []int{1, 1}), []int{1, 1}) ||
		!slices.Contains([]string{"NOTSET", "VALID"}, attrString(pool, rules.ONNXAttrAutoPad, "NOTSET")) {
		return false
	}
	same := rules.ONNXPads(x[2:], kernel, strides[0], rules.PadSame)
	return slices.Equal(pads, []int{0, 0, same[0], same[1], 0, 0, same[2], same[3]})
}

// padAmounts are a constant-zero Pad's pads, from its input (opset 11 on)
// or attribute.
func (b *builder) padAmounts(n *onnx.Node) ([]int, bool) {
	if opset, _ := b.g.model.Opset(""); opset < 11 {
		return attrInts(n, rules.ONNXAttrPads), attrFloat(n, rules.ONNXAttrValue, 0) == 0
	}
	if len(n.Inputs) > 3 && n.Inputs[3] != "" { // axes
		return nil, false
	}
	if len(n.Inputs) > 2 && n.Inputs[2] != "" {
		if v, ok := b.rt.Constant(n.Inputs[2]); !ok || len(v.Data) != 1 || v.Data[0] != 0 {
			return nil, false
		}
	}
	if len(n.Inputs) < 2 {
		return nil, false
	}
	t, ok := b.rt.Constant(n.Inputs[1])
	if !ok {
		return nil, false
	}
	pads := make([]int, len(t.Data))
	for i, p := range t.Data {
		pads[i] = int(p)
	}
	return pads, true
}

// onlyReader is the one node that reads a value that is not a model output.
func (b *builder) onlyReader(name string) (*onnx.Node, bool) {
	var reader *onnx.Node
	for _, n := range b.g.model.Graph.Nodes {
		for _, in := range n.Inputs {
			if in != name {
				continue
			}
			if reader != nil && reader != n {
				return nil, false
			}
			reader = n
		}
	}
	for _, o := range b.g.model.Graph.Outputs {
		if o.Name == name {
			return nil, false
		}
	}
	return reader, reader != nil
}

// paddedPool maps an AveragePool whose input a Pad made (padsPool): same
// padding, on the Pad's input.
func (b *builder) paddedPool(n *onnx.Node, x rules.Value) (bool, error) {
	k, s := attrInts(n, rules.ONNXAttrKernelShape)[0], attrIntsDefault(n, rules.ONNXAttrStrides, []int{1, 1})[0]
	vals, err := b.add(rules.NamePoolAvg, rules.WindowAttrs{Kernel: k, Stride: s, Padding: rules.PadSame}.Params(), x)
	if err != nil {
		return false, fmt.Errorf("a padded average pool: %w", err)
	}
	return true, b.bind(n, vals)
}

// concat maps a Concat of any number of inputs onto a chain of binary
// concats, left to right.
func (b *builder) concat(op string, n *onnx.Node, args []rules.Value) (bool, error) {
	rank := len(b.g.shape(args[0]))
	axis := attrInt(n, rules.ONNXAttrAxis, 0)
	if axis < 0 {
		axis += rank
	}
	if len(args) < 2 || axis < 0 || axis >= rank {
		return b.refuse("%d inputs on axis %d of rank %d", len(args), axis, rank)
	}
	acc := args[0]
	for _, a := range args[1:] {
		out, err := b.add(op, rules.AxisAttrs{Axis: axis}.Params(), acc, a)
		if err != nil {
			return b.refuse("the registry's concat does not take these operands: %v", err)
		}
		acc = out[0]
	}
	return true, b.bind(n, []rules.Value{acc})
}

func attrInts(n *onnx.Node, name string) []int { return n.AttrInts(name) }

func attrIntsDefault(n *onnx.Node, name string, def []int) []int {
	if v := attrInts(n, name); v != nil {
		return v
	}
	return def
}

func attrInt(n *onnx.Node, name string, def int) int {
	if a := n.Attr(name); a != nil {
		return int(a.I)
	}
	return def
}

func attrFloat(n *onnx.Node, name string, def float32) float32 {
	if a := n.Attr(name); a != nil {
		return a.F
	}
	return def
}

func attrString(n *onnx.Node, name, def string) string { return n.AttrString(name, def) }
