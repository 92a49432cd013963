package rules

import (
	"errors"
)

// Symbols of the enumerated parameters.
var (
	paddingSymbols    = []string{"same", "valid", "sym"}
	activationSymbols = []string{"none", "relu"}
)

// Padding and activation values, as stored in parameter lists.
const (
	PadSame  = 0
	PadValid = 1
	// PadSym pads ⌊k/2⌋ cells on every side of an odd window, as
	// PyTorch's padding=k//2 does: at stride 1 it is same padding, at
	// stride 2 it starts the window a cell earlier than SAME_UPPER.
	PadSym    = 2
	ActNone   = 0
	ActRelu   = 1
	maxKernel = 15
	// GroupsDepthwise is the conv2d groups value "dw": as many groups as
	// input channels, whatever their number.
	GroupsDepthwise = 0
)

func strideParam() ParamSpec {
	return ParamSpec{Name: "stride", Min: 1, Max: 8, Generate: []int{1}, Check: []int{1, 2}}
}

// paddingParam generates same padding only, as TASO does: valid padding
// shrinks the pool's 5×5 maps to 1×1, where pooling and convolution satisfy
// identities of that size only. Symmetric padding is for mapping models
// (ResNet's stride-2 convolutions and pools); TASO and FlexFlow have no
// such value.
func paddingParam() ParamSpec {
	return ParamSpec{Name: "padding", Symbols: paddingSymbols, Generate: []int{PadSame}}
}
func kernelParam() ParamSpec {
	return ParamSpec{Name: "kernel", Min: 1, Max: maxKernel, Generate: []int{3}, Check: []int{1, 3}}
}
func axisParam() ParamSpec {
	return ParamSpec{Name: "axis", Min: 0, Max: MaxRank - 1, Generate: []int{0, 1}, Check: []int{0, 1, 2, 3}}
}

// windowAttrs are the ONNX attributes of a 2-D sliding window, with the
// operator's own.
func windowAttrs(own ...string) []string {
	return append([]string{ONNXAttrKernelShape, ONNXAttrStrides, ONNXAttrPads, ONNXAttrAutoPad, ONNXAttrDilations}, own...)
}

// TASO's parameters of pooling, which TASO and FlexFlow share.
func poolTASOParams() []TASOParam {
	return []TASOParam{PMOpType, PMKernelH, PMKernelW, PMStrideH, PMStrideW, PMPad, PMActi}
}
func poolFlexFlowParams() []string {
	return []string{"PM_OP_TYPE", "PM_KERNEL_H", "PM_KERNEL_W", "PM_STRIDE_H", "PM_STRIDE_W", "PM_PAD", "PM_ACTI"}
}

// SetParallel names the parallel operator set: Unity's parallelization
// operators, FlexFlow's linear, and the algebraic operators parallel rules
// are about (parallelCompanions).
const SetParallel = "parallel"

// parallelCompanions are the default set's operators that the parallel set
// includes: those FlexFlow's parallel rules use, and the convolution and
// pools a CNN needs.
var parallelCompanions = []string{"ewadd", "ewmul", "relu", "concat", "split", "conv2d", "pool_avg", "pool_max"}

// Default returns the default operator set: TASO's Table 2.1. Each row also
// says how the operator appears in ONNX, TASO's protobuf and FlexFlow's
// JSON (see formats.go).
func Default() *Registry { return newRegistry(tasoOps()) }

// All returns every operator: the default set and the parallel set. It is
// the registry that reads and checks stored rules of either set.
func All() *Registry { return newRegistry(append(tasoOps(), parallelOps()...)) }

// Parallel returns the parallel operator set (SetParallel).
func Parallel() *Registry {
	reg, err := All().Select(append(parallelCompanions, "partition", "combine", "replicate", "reduce", "linear", "embedding", "attn_softmax", "attn_mix", "batchnorm"))
	if err != nil {
		panic(err)
	}
	return reg
}

func tasoOps() []*Op {
	return []*Op{
		{Name: NameEwadd, Doc: "element-wise addition", Arity: 2, Outputs: 1, Z3: []string{"ewadd"}, Commutative: true, Pointwise: PointwiseSum,
			Layout: layoutAny, AlikeLayouts: true, Shape: elementwiseShape, Cost: CostPerOutput, IntKernel: perSum(ewaddKernel[uint32, Mod]), FloatKernel: perSum(ewaddKernel[float64, Real]),
			ONNX:     ONNXForm{Types: []string{"Add"}},
			TASO:     TASOForm{Type: 16, Name: "OP_EW_ADD", Operands: []int{2}},
			FlexFlow: FlexFlowForm{Type: "OP_EW_ADD"},
			Keys:     plainKeys(0, 1), Ranks: RankRule{Alike: []int{0, 1}}},
		{Name: NameEwmul, Doc: "element-wise multiplication", Arity: 2, Outputs: 1, Z3: []string{"ewmul"}, Commutative: true, Pointwise: PointwiseProduct,
			Layout: layoutNoSums, AlikeLayouts: true, Shape: elementwiseShape, Cost: CostPerOutput, IntKernel: ewmulKernel[uint32, Mod], FloatKernel: ewmulKernel[float64, Real],
			ONNX:     ONNXForm{Types: []string{"Mul"}},
			TASO:     TASOForm{Type: 17, Name: "OP_EW_MUL", Operands: []int{2}},
			FlexFlow: FlexFlowForm{Type: "OP_EW_MUL"},
			Keys:     plainKeys(0, 1), Ranks: RankRule{Alike: []int{0, 1}}},
		{Name: NameSmul, Doc: "multiplication by a scalar tensor", Arity: 2, Outputs: 1, Z3: []string{"smul"}, Pointwise: PointwiseScale,
			Operands: []Operand{{Name: "input", ScalarToo: true}, {Name: "scalar", Scalar: true}},
			Layout:   layoutOneDevice, Shape: smulShape, Cost: CostPerOutput, IntKernel: smulKernel[uint32, Mod], FloatKernel: smulKernel[float64, Real],
			ONNX:     ONNXForm{Types: []string{"Mul"}},
			TASO:     TASOForm{Type: 19, Name: "OP_MUL", Operands: []int{2}},
			FlexFlow: FlexFlowForm{Type: "OP_MUL"},
			Keys:     plainKeys(0), Ranks: RankRule{Alike: []int{0}, Operands: map[int]int{1: 0}}},
		{Name: NameTranspose, Doc: "transpose a matrix", Arity: 1, Outputs: 1, Z3: []string{"transpose"}, Pointwise: PointwiseRearrange,
			Layout: layoutAny, Shape: transposeShape, Cost: CostPerOutput, IntKernel: perSum(transposeKernel[uint32]), FloatKernel: perSum(transposeKernel[float64]),
			ONNX: ONNXForm{Types: []string{"Transpose"}, Attrs: []string{ONNXAttrPerm}},
			TASO: TASOForm{Type: 15, Name: "OP_TRANSPOSE", Params: []TASOParam{PMNumDim, PMPerm, PMOutShuffle},
				Required: []TASOParam{PMPerm}, Operands: []int{1}},
			FlexFlow: FlexFlowForm{Type: "OP_TRANSPOSE", Params: []string{"PM_NUMDIM", "PM_PERM", "PM_OUTSHUFFLE"}},
			Keys:     transposeKeys(), Ranks: RankRule{Result: 2, Operands: map[int]int{0: 2}}},
		{Name: NameMatmul, Doc: "(batched) matrix multiplication", Arity: 2, Outputs: 1, Z3: []string{"matmul"},
			Pointwise: PointwiseLinear, FanIn: matmulFanIn,
			Layout: layoutAny, Shape: matmulShape, Cost: CostProduct, IntKernel: productKernel[uint32, Mod](matmulKernel[uint32, Mod]), FloatKernel: productKernel[float64, Real](matmulKernel[float64, Real]),
			ONNX:     ONNXForm{Types: []string{"MatMul", ONNXGemm}, Attrs: []string{ONNXAttrAlpha, ONNXAttrBeta, ONNXAttrTransA, ONNXAttrTransB}},
			TASO:     TASOForm{Type: 18, Name: "OP_MATMUL", Params: []TASOParam{PMActi}, Operands: []int{2}},
			FlexFlow: FlexFlowForm{Type: "OP_MATMUL", Params: []string{"PM_ACTI"}},
			Keys:     matmulKeys(), Ranks: RankRule{Alike: []int{0, 1}, Hint: 2}},
		{Name: NameConv2D, Attrs: ConvAttrs{}, Doc: "grouped 2-D convolution, NCHW input, OIHW kernel; input channels = groups × kernel input channels", Arity: 2, Outputs: 1, Z3: []string{"conv2d"},
			Pointwise: PointwiseLinearActivated, FanIn: convFanIn,
			Operands: []Operand{{Name: "input", Data: true}, {Name: "kernel", Weight: true,
				Alone: whole("kernel", true, "a kernel window cut leaves each output piece without cells it needs", 2, 3)}},
			Params: []ParamSpec{strideParam(), paddingParam(),
				{Name: "activation", Symbols: activationSymbols, Generate: []int{ActNone, ActRelu}},
				// Groups are explicit, not inferred from shapes, so that an axiom
				// about ordinary convolutions cannot be misapplied to grouped ones.
				// "dw" keeps depth-wise rules (average pooling as a convolution)
				// free of any one channel count.
				{Name: "groups", Min: 1, Max: 1024, Named: map[int]string{GroupsDepthwise: "dw"},
					Generate: []int{1, GroupsDepthwise}, Check: []int{1, 2, 3, GroupsDepthwise}}},
			Piecewise: func(p []int) bool { return p[2] == ActRelu },
			Layout:    layoutAny, Shape: convShape, Cost: CostConv,
			IntKernel: blockProductKernel[uint32, Mod](convKernel[uint32, Mod], channelAxis), FloatKernel: blockProductKernel[float64, Real](convKernel[float64, Real], channelAxis),
			// A relu activation is the relu operator's node after the Conv.
			ONNX: ONNXForm{Types: []string{"Conv"}, Attrs: windowAttrs(ONNXAttrGroup)},
			// TASO leaves groups to the shapes; FlexFlow may give them.
			TASO: TASOForm{Type: 3, Name: "OP_CONV2D", Params: []TASOParam{PMGroup, PMKernelH, PMKernelW, PMStrideH, PMStrideW, PMPad, PMActi},
				Required: []TASOParam{PMStrideH, PMStrideW, PMPad}, Operands: []int{2}},
			FlexFlow: FlexFlowForm{Type: "OP_CONV2D", Params: []string{"PM_GROUP", "PM_KERNEL_H", "PM_KERNEL_W", "PM_STRIDE_H", "PM_STRIDE_W", "PM_PAD", "PM_ACTI"}},
			Keys:     convKeys(), Ranks: RankRule{Result: 4, Operands: map[int]int{0: 4, 1: 4}}},
		{Name: NameEnlarge, Attrs: KernelAttrs{}, Doc: "pad a convolution kernel with zeros to kernel×kernel, centred", Arity: 1, Outputs: 1, Z3: []string{"enlarge"}, Pointwise: PointwisePad,
			Operands: []Operand{{Name: "kernel", Weight: true, Input: true}},
			Params:   []ParamSpec{kernelParam()},
			Layout:   layoutOneDevice, Shape: enlargeShape, Cost: CostPerOutput, IntKernel: enlargeKernel[uint32, Mod], FloatKernel: enlargeKernel[float64, Real],
			ONNX: ONNXForm{None: true},
			TASO: TASOForm{Type: 20, Name: "OP_ENLARGE", Params: []TASOParam{PMKernelH, PMKernelW},
				Required: []TASOParam{PMKernelH, PMKernelW}, Operands: []int{1, 2}},
			FlexFlow: FlexFlowForm{Type: "OP_ENLARGE", Params: []string{"PM_KERNEL_H", "PM_KERNEL_W"}},
			Keys:     kernelKeys(), Ranks: RankRule{Result: 4, Operands: map[int]int{0: 4}}},
		{Name: NameRelu, Doc: "rectified linear unit", Arity: 1, Outputs: 1, Z3: []string{"relu"}, Piecewise: always, Pointwise: PointwiseRelu,
			Layout: layoutNoSums, Shape: sameShape, Cost: CostPerOutput, IntKernel: reluKernel[uint32, Mod], FloatKernel: reluKernel[float64, Real],
			ONNX:     ONNXForm{Types: []string{"Relu"}},
			TASO:     TASOForm{Type: 8, Name: "OP_RELU", Operands: []int{1}},
			FlexFlow: FlexFlowForm{Type: "OP_RELU"},
			Keys:     plainKeys(0), Ranks: RankRule{Alike: []int{0}}},
		{Name: NamePoolAvg, Attrs: WindowAttrs{}, Doc: "average pooling, NCHW; padded cells count as zeros", Arity: 1, Outputs: 1, Z3: []string{"pool_avg"},
			Pointwise: PointwiseLinear, FanIn: windowFanIn,
			Operands: []Operand{{Name: "input", Data: true}},
			Params:   []ParamSpec{kernelParam(), strideParam(), paddingParam()},
			Layout:   poolLayout(true), Shape: poolShape, Cost: CostWindow, IntKernel: perSum(poolAvgKernel[uint32, Mod]), FloatKernel: perSum(poolAvgKernel[float64, Real]),
			ONNX: ONNXForm{Types: []string{"AveragePool", ONNXPad},
				Attrs: windowAttrs(ONNXAttrCeilMode, ONNXAttrCountIncludePad, ONNXAttrMode, ONNXAttrValue)},
			TASO: TASOForm{Type: 7, Name: "OP_POOL2D_AVG", Params: poolTASOParams(),
				Required: []TASOParam{PMKernelH, PMKernelW, PMStrideH, PMStrideW, PMPad}, Operands: []int{1, 2}},
			FlexFlow: FlexFlowForm{Type: "OP_POOL2D_AVG", Params: poolFlexFlowParams()},
			Keys:     poolKeys(), Ranks: RankRule{Result: 4, Operands: map[int]int{0: 4}}},
		{Name: NamePoolMax, Attrs: WindowAttrs{}, Doc: "max pooling, NCHW; padded cells are ignored", Arity: 1, Outputs: 1, Z3: []string{"pool_max"}, Piecewise: always,
			Pointwise: PointwiseMax, FanIn: windowFanIn,
			Operands: []Operand{{Name: "input", Data: true}},
			Params:   []ParamSpec{kernelParam(), strideParam(), paddingParam()},
			Layout:   poolLayout(false), Shape: poolShape, Cost: CostWindow, IntKernel: poolMaxKernel[uint32, Mod], FloatKernel: poolMaxKernel[float64, Real],
			ONNX: ONNXForm{Types: []string{"MaxPool"}, Attrs: windowAttrs(ONNXAttrCeilMode, ONNXAttrStorageOrder)},
			TASO: TASOForm{Type: 6, Name: "OP_POOL2D_MAX", Params: poolTASOParams(),
				Required: []TASOParam{PMKernelH, PMKernelW, PMStrideH, PMStrideW, PMPad}, Operands: []int{1, 2}},
			FlexFlow: FlexFlowForm{Type: "OP_POOL2D_MAX", Params: poolFlexFlowParams()},
			Keys:     poolKeys(), Ranks: RankRule{Result: 4, Operands: map[int]int{0: 4}}},
		{Name: NameConcat, Attrs: AxisAttrs{}, Doc: "concatenation of two tensors along an axis", Arity: 2, Outputs: 1, Z3: []string{"concat"}, Pointwise: PointwiseRearrange,
			Params: []ParamSpec{axisParam()},
			Layout: layoutAxisWhole, AlikeLayouts: true, Shape: concatShape, Cost: CostPerOutput, IntKernel: perSum(concatKernel[uint32]), FloatKernel: perSum(concatKernel[float64]),
			ONNX: ONNXForm{Types: []string{"Concat"}, Attrs: []string{ONNXAttrAxis}},
			TASO: TASOForm{Type: 12, Name: "OP_CONCAT", Params: []TASOParam{PMNumInputs, PMAxis, PMNumDim},
				Required: []TASOParam{PMAxis}, Operands: []int{2}},
			FlexFlow: FlexFlowForm{Type: "OP_CONCAT", Params: []string{"PM_NUM_INPUTS", "PM_AXIS", "PM_NUMDIM"}},
			Keys:     concatKeys(), Ranks: RankRule{Alike: []int{0, 1}}},
		{Name: NameSplit, Attrs: AxisAttrs{}, Doc: "undo the most recent concat along an axis; outputs split0 and split1", Arity: 1, Outputs: 2, Z3: []string{"split0", "split1"}, Pointwise: PointwiseOpaque,
			Params: []ParamSpec{axisParam()},
			Layout: layoutAxisWhole, Shape: splitShape, Cost: CostPerOutput, IntKernel: perSum(splitKernel[uint32]), FloatKernel: perSum(splitKernel[float64]),
			ONNX: ONNXForm{Types: []string{"Split"}, Attrs: []string{ONNXAttrAxis, ONNXAttrSplit, ONNXAttrNumOutputs}},
			TASO: TASOForm{Type: 13, Name: "OP_SPLIT", Params: []TASOParam{PMNumOutputs, PMAxis},
				Required: []TASOParam{PMAxis}, Operands: []int{1}},
			FlexFlow: FlexFlowForm{Type: "OP_SPLIT", Params: []string{"PM_NUM_OUTPUTS", "PM_AXIS"}},
			Keys:     splitKeys(), Ranks: RankRule{Alike: []int{0}}},
		{Name: NameCPool, Attrs: KernelAttrs{}, Doc: "constant kernel (c,1,k,k) of 1/(k·k): average pooling as a depth-wise convolution", Z3: []string{"C_pool"}, Feeds: []string{"conv2d"}, Pointwise: PointwiseNonNegative,
			Outputs: 1, Params: []ParamSpec{kernelParam()},
			Shape: cPoolShape, Cost: CostPerOutput, IntKernel: cPoolKernel[uint32, Mod], FloatKernel: cPoolKernel[float64, Real],
			ONNX: ONNXForm{None: true},
			TASO: TASOForm{Type: 25, Name: "OP_CONSTANT_POOL", Params: []TASOParam{PMKernelH, PMKernelW},
				Required: []TASOParam{PMKernelH, PMKernelW}, Operands: []int{0}},
			FlexFlow: FlexFlowForm{Type: "OP_CONSTANT_POOL", Aliases: []string{"OP_CONSTANT_POOl"}, Params: []string{"PM_KERNEL_H", "PM_KERNEL_W"}},
			Keys:     kernelKeys(), Ranks: RankRule{Result: 4}},
		{Name: NameIConv, Attrs: KernelAttrs{}, Doc: "identity convolution kernel (c,c,k,k)", Z3: []string{"I_conv"}, Feeds: []string{"conv2d"}, Pointwise: PointwiseOpaque,
			Outputs: 1, Params: []ParamSpec{kernelParam()},
			Shape: iConvShape, Cost: CostPerOutput, IntKernel: iConvKernel[uint32, Mod], FloatKernel: iConvKernel[float64, Real],
			ONNX: ONNXForm{None: true},
			TASO: TASOForm{Type: 23, Name: "OP_CONSTANT_ICONV", Params: []TASOParam{PMKernelH, PMKernelW},
				Required: []TASOParam{PMKernelH, PMKernelW}, Operands: []int{0}},
			FlexFlow: FlexFlowForm{Type: "OP_CONSTANT_ICONV", Params: []string{"PM_KERNEL_H", "PM_KERNEL_W"}},
			Keys:     kernelKeys(), Ranks: RankRule{Result: 4}},
		{Name: NameIMatmul, Doc: "identity matrix (n,n)", Z3: []string{"I_matmul"}, Outputs: 1, Feeds: []string{"matmul"}, Pointwise: PointwiseOpaque,
			Shape: iMatmulShape, Cost: CostPerOutput, IntKernel: iMatmulKernel[uint32, Mod], FloatKernel: iMatmulKernel[float64, Real],
			ONNX:     ONNXForm{None: true},
			TASO:     TASOForm{Type: 22, Name: "OP_CONSTANT_IMM", Operands: []int{0}},
			FlexFlow: FlexFlowForm{Type: "OP_CONSTANT_IMM"},
			Keys:     plainKeys(), Ranks: RankRule{Result: 2}},
		{Name: NameIEwmul, Doc: "tensor of ones", Z3: []string{"I_ewmul"}, Outputs: 1, Feeds: []string{"ewmul"}, Pointwise: PointwiseOnes,
			Shape: plainShape, Cost: CostPerOutput, IntKernel: onesKernel[uint32, Mod], FloatKernel: onesKernel[float64, Real],
			ONNX:     ONNXForm{None: true},
			TASO:     TASOForm{Type: 24, Name: "OP_CONSTANT_ONE", Operands: []int{0}},
			FlexFlow: FlexFlowForm{Type: "OP_CONSTANT_ONE"},
			Keys:     plainKeys()},
	}
}

func always([]int) bool { return true }

// ---- shape rules ----

func plainShape(_ []int, in []Shape) ([]Shape, error) {
	return []Shape{NewShape(in[0].DimList()...)}, nil
}

func sameShape(_ []int, in []Shape) ([]Shape, error) { return []Shape{in[0]}, nil }

func elementwiseShape(_ []int, in []Shape) ([]Shape, error) {
	a, b := in[0], in[1]
	if !a.SameDims(b) {
		return nil, shapeErrorf("operands must have equal shapes, got %s and %s", a, b)
	}
	out := a
	for i := 0; i < a.Rank; i++ {
		out.Split[i] = combineSplit(a.Split[i], b.Split[i])
	}
	return []Shape{out}, nil
}

func smulShape(_ []int, in []Shape) ([]Shape, error) {
	if in[1].Rank != 0 {
		return nil, shapeErrorf("second operand must be a scalar, got %s", in[1])
	}
	return []Shape{in[0]}, nil
}

// transposeShape accepts matrices only, as TASO's transpose: on a batch of
// matrices the axes a concat refers to shift, and TASO's concat-transpose
// axiom would be false.
func transposeShape(_ []int, in []Shape) ([]Shape, error) {
	x := in[0]
	if x.Rank != 2 {
		return nil, shapeErrorf("operand must be a matrix (rank 2), got %s", x)
	}
	out, r := x, x.Rank
	out.Dims[r-1], out.Dims[r-2] = x.Dims[r-2], x.Dims[r-1]
	out.Degrees[r-1], out.Degrees[r-2] = x.Degrees[r-2], x.Degrees[r-1]
	out.Split[r-1], out.Split[r-2] = x.Split[r-2], x.Split[r-1]
	return []Shape{out}, nil
}

func matmulShape(_ []int, in []Shape) ([]Shape, error) {
	x, y := in[0], in[1]
	if x.Rank < 2 || x.Rank != y.Rank || x.Rank > 3 {
		return nil, shapeErrorf("operands must be matrices or batches of equal rank (2 or 3), got %s and %s", x, y)
	}
	r := x.Rank
	if x.Dims[r-1] != y.Dims[r-2] || (r == 3 && x.Dims[0] != y.Dims[0]) {
		return nil, shapeErrorf("inner dimensions differ: %s times %s", x, y)
	}
	out := x
	if r == 3 {
		out.Split[0] = combineSplit(x.Split[0], y.Split[0])
	}
	out.Dims[r-1], out.Split[r-1] = y.Dims[r-1], y.Split[r-1]
	if x.Parallel() || y.Parallel() {
		var err error
		if out, err = matmulLayout(x, y, out); err != nil {
			return nil, err
		}
	}
	return []Shape{out}, nil
}

// windowOut returns the output extent and leading padding of a sliding
// window; same padding is ONNX's SAME_UPPER, symmetric padding PyTorch's
// k//2.
func windowOut(in, k, stride, padding int) (out, padBegin int, err error) {
	if padding == PadSym {
		if k%2 == 0 || in+k/2*2 < k {
			return 0, 0, shapeErrorf("symmetric padding of an even window %d, or of extent %d", k, in)
		}
		return (in+k/2*2-k)/stride + 1, k / 2, nil
	}
	if padding == PadValid {
		if in < k {
			return 0, 0, shapeErrorf("window %d exceeds extent %d with valid padding", k, in)
		}
		return (in-k)/stride + 1, 0, nil
	}
	out = (in + stride - 1) / stride
	total := (out-1)*stride + k - in
	if total < 0 {
		total = 0
	}
	return out, total / 2, nil
}

func convShape(p []int, in []Shape) ([]Shape, error) {
	x, w := in[0], in[1]
	if x.Rank != 4 || w.Rank != 4 {
		return nil, shapeErrorf("expected input NCHW and kernel OIHW of rank 4, got %s and %s", x, w)
	}
	groups := p[3]
	switch {
	case groups == GroupsDepthwise:
		groups = x.Dims[1]
	case groups == GroupsInferred && w.Dims[1] > 0 && x.Dims[1]%w.Dims[1] == 0:
		groups = x.Dims[1] / w.Dims[1]
	case groups < 1:
		return nil, shapeErrorf("groups %d: input channels %d are no multiple of kernel input channels %d", groups, x.Dims[1], w.Dims[1])
	}
	if x.Dims[1] != groups*w.Dims[1] {
		return nil, shapeErrorf("input channels %d are not groups %d times kernel input channels %d", x.Dims[1], groups, w.Dims[1])
	}
	if w.Dims[0]%groups != 0 {
		return nil, shapeErrorf("output channels %d are not a multiple of groups %d", w.Dims[0], groups)
	}
	out := NewShape(x.Dims[0], w.Dims[0], 0, 0)
	for d := 2; d < 4; d++ {
		n, _, err := windowOut(x.Dims[d], w.Dims[d], p[0], p[1])
		if err != nil {
			return nil, err
		}
		out.Dims[d] = n
	}
	out.Split[0], out.Split[1] = x.Split[0], w.Split[0]
	if x.Parallel() || w.Parallel() {
		var err error
		if out, err = convLayout(p, groups, x, w, out); err != nil {
			return nil, err
		}
	}
	return []Shape{out}, nil
}

func enlargeShape(p []int, in []Shape) ([]Shape, error) {
	w, k := in[0], p[0]
	if w.Rank != 4 {
		return nil, shapeErrorf("operand must be a rank-4 kernel, got %s", w)
	}
	for d := 2; d < 4; d++ {
		if w.Dims[d] > k || (k-w.Dims[d])%2 != 0 {
			return nil, shapeErrorf("kernel %s cannot be centred in %dx%d", w, k, k)
		}
	}
	if w.Dims[2] == k && w.Dims[3] == k {
		return nil, shapeErrorf("kernel %s is already %dx%d", w, k, k)
	}
	out := w
	out.Dims[2], out.Dims[3] = k, k
	out.Split[2], out.Split[3] = nil, nil
	return []Shape{out}, nil
}

func poolShape(p []int, in []Shape) ([]Shape, error) {
	x := in[0]
	if x.Rank != 4 {
		return nil, shapeErrorf("operand must be NCHW of rank 4, got %s", x)
	}
	out := x
	for d := 2; d < 4; d++ {
		n, _, err := windowOut(x.Dims[d], p[0], p[1], p[2])
		if err != nil {
			return nil, err
		}
		out.Dims[d], out.Split[d] = n, nil
	}
	return []Shape{out}, nil
}

func concatShape(p []int, in []Shape) ([]Shape, error) {
	x, y, axis := in[0], in[1], p[0]
	if x.Rank != y.Rank || axis >= x.Rank {
		return nil, shapeErrorf("operands %s and %s cannot be concatenated on axis %d", x, y, axis)
	}
	if !x.SameLayout(y) {
		return nil, shapeErrorf("operands must have equal layouts, got %s and %s", x, y)
	}
	out := x
	for i := 0; i < x.Rank; i++ {
		if i == axis {
			continue
		}
		if x.Dims[i] != y.Dims[i] {
			return nil, shapeErrorf("operands %s and %s differ off axis %d", x, y, axis)
		}
		out.Split[i] = combineSplit(x.Split[i], y.Split[i])
	}
	out.Dims[axis] = x.Dims[axis] + y.Dims[axis]
	out.Split[axis] = &SplitTree{Left: x.Split[axis], Right: y.Split[axis], LeftSize: x.Dims[axis]}
	return []Shape{out}, nil
}

var errNoConcat = errors.New("operand has no concat history on the split axis")

func splitShape(p []int, in []Shape) ([]Shape, error) {
	x, axis := in[0], p[0]
	if axis >= x.Rank {
		return nil, shapeErrorf("axis %d out of range for %s", axis, x)
	}
	t := x.Split[axis]
	if t == nil {
		return nil, errNoConcat
	}
	left, right := x, x
	left.Dims[axis], left.Split[axis] = t.LeftSize, t.Left
	right.Dims[axis], right.Split[axis] = x.Dims[axis]-t.LeftSize, t.Right
	return []Shape{left, right}, nil
}

func cPoolShape(p []int, in []Shape) ([]Shape, error) {
	s, k := in[0], p[0]
	if s.Rank != 4 || s.Dims[1] != 1 || s.Dims[2] != k || s.Dims[3] != k {
		return nil, shapeErrorf("constant shape must be (c,1,%d,%d), got %s", k, k, s)
	}
	return plainShape(p, in)
}

func iConvShape(p []int, in []Shape) ([]Shape, error) {
	s, k := in[0], p[0]
	if s.Rank != 4 || s.Dims[0] != s.Dims[1] || s.Dims[2] != k || s.Dims[3] != k || k%2 == 0 {
		return nil, shapeErrorf("constant shape must be (c,c,%d,%d) with odd %d, got %s", k, k, k, s)
	}
	return plainShape(p, in)
}

func iMatmulShape(p []int, in []Shape) ([]Shape, error) {
	s := in[0]
	if s.Rank != 2 || s.Dims[0] != s.Dims[1] {
		return nil, shapeErrorf("constant shape must be a square matrix, got %s", s)
	}
	return plainShape(p, in)
}
