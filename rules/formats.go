package rules

import (
	"slices"
	"strconv"
)

// How operators appear in the formats rulebook reads and writes: ONNX
// models, TASO's rule protobuf and FlexFlow's JSON rendering of it. Each
// operator's row in the registry (Op.ONNX, Op.TASO, Op.FlexFlow) names it
// in every format, or says None; the readers, writers and the optimizer
// take every name from there, so that no other package spells one.

// ONNXForm is how an operator appears in ONNX models.
type ONNXForm struct {
	// Types are the node types that map onto the operator; lowering writes
	// the first. Some map only together with other nodes (ONNXGemm,
	// ONNXPad).
	Types []string
	// Attrs are the node attributes the mapping reads or lowering writes,
	// for any of Types.
	Attrs []string
	// None says that no ONNX node is the operator: constants become
	// weights, an enlarged kernel is a larger weight.
	None bool
}

// ONNX node types the optimizer maps beside each operator's own: Gemm
// onto matmul, transpose and ewadd; a zero Pad together with the
// AveragePool it feeds onto pool_avg; inference-mode BatchNormalization
// onto ewmul and ewadd by per-channel weights; Clip at zero with no upper
// bound onto relu; Identity passes a value on and Constant holds one.
const (
	ONNXGemm               = "Gemm"
	ONNXPad                = "Pad"
	ONNXBatchNormalization = "BatchNormalization"
	ONNXClip               = "Clip"
	ONNXIdentity           = "Identity"
	ONNXConstant           = "Constant"
)

// ONNX attribute names, as the operators' rows list them.
const (
	ONNXAttrAlpha           = "alpha"
	ONNXAttrAutoPad         = "auto_pad"
	ONNXAttrAxis            = "axis"
	ONNXAttrBeta            = "beta"
	ONNXAttrCeilMode        = "ceil_mode"
	ONNXAttrCountIncludePad = "count_include_pad"
	ONNXAttrDilations       = "dilations"
	ONNXAttrEpsilon         = "epsilon"
	ONNXAttrGroup           = "group"
	ONNXAttrKernelShape     = "kernel_shape"
	ONNXAttrMode            = "mode"
	ONNXAttrNumOutputs      = "num_outputs"
	ONNXAttrPads            = "pads"
	ONNXAttrPerm            = "perm"
	ONNXAttrSplit           = "split"
	ONNXAttrStorageOrder    = "storage_order"
	ONNXAttrStrides         = "strides"
	ONNXAttrTransA          = "transA"
	ONNXAttrTransB          = "transB"
	ONNXAttrTrainingMode    = "training_mode"
	ONNXAttrValue           = "value"
)

// ONNXType is the node type lowering writes for the operator; "" when ONNX
// has none.
func (op *Op) ONNXType() string {
	if op.ONNX.None || len(op.ONNX.Types) == 0 {
		return ""
	}
	return op.ONNX.Types[0]
}

// TASOType is an operator type of TASO's rule protobuf: a number of its
// OpType enum.
type TASOType int

// TASOParam is a parameter key of TASO's rule protobuf: a number of its
// PMParameter enum, which FlexFlow's JSON writes by name.
type TASOParam int

// TASO's parameter keys, and FlexFlow's two for parallel operators.
const (
	PMOpType TASOParam = iota
	PMNumInputs
	PMNumOutputs
	PMGroup
	PMKernelH
	PMKernelW
	PMStrideH
	PMStrideW
	PMPad
	PMActi
	PMNumDim
	PMAxis
	PMPerm
	PMOutShuffle
	PMMergeGConvCount
	PMParallelDim
	PMParallelDegree
)

// tasoParamNames are the enum's names, by key.
func tasoParamNames() []string {
	return []string{
		"PM_OP_TYPE", "PM_NUM_INPUTS", "PM_NUM_OUTPUTS", "PM_GROUP", "PM_KERNEL_H", "PM_KERNEL_W",
		"PM_STRIDE_H", "PM_STRIDE_W", "PM_PAD", "PM_ACTI", "PM_NUMDIM", "PM_AXIS", "PM_PERM",
		"PM_OUTSHUFFLE", "PM_MERGE_GCONV_COUNT", "PM_PARALLEL_DIM", "PM_PARALLEL_DEGREE",
	}
}

// String is the key's name in the enum ("PM_AXIS"), or "key N" for a
// number the enum lacks.
func (p TASOParam) String() string {
	if names := tasoParamNames(); p >= 0 && int(p) < len(names) {
		return names[p]
	}
	return "key " + strconv.Itoa(int(p))
}

// TASOParamNamed is the key FlexFlow's JSON names ("PM_AXIS").
func TASOParamNamed(name string) (TASOParam, bool) {
	k := slices.Index(tasoParamNames(), name)
	return TASOParam(k), k >= 0
}

// TASOForm is how an operator appears in TASO's rule protobuf.
type TASOForm struct {
	Type TASOType
	// Name is the type's name in TASO's enum ("OP_EW_ADD"), for reports.
	Name string
	// Params are the parameter keys the operator may carry, Required
	// those it must.
	Params, Required []TASOParam
	// Operands are the operand counts accepted, the operator's arity
	// first: older TASO code gives pooling and enlarge a second operand
	// only for its shape.
	Operands []int
	// None says that TASO has no such operator.
	None bool
}

// FlexFlowForm is how an operator appears in FlexFlow's JSON rendering of
// TASO's schema, where operator types and parameter keys are names.
type FlexFlowForm struct {
	// Type is the type name written and read; Aliases are other spellings
	// read (FlexFlow's converter misspells one).
	Type    string
	Aliases []string
	// Params are the parameter names the operator may carry; what it must
	// carry and its operand counts are TASO's, unless TASO has no such
	// operator (the parallel ones): then Required and Operands say.
	Params   []string
	Required []string
	Operands []int
	// None says that FlexFlow has no such operator.
	None bool
}

// ForeignOp is an operator type of TASO's and FlexFlow's rule files that no
// operator here has: rules using one are skipped, and reports name it.
type ForeignOp struct {
	TASO TASOType // its number in TASO's enum
	Name string   // its name there, which FlexFlow's JSON writes
}

// UnsupportedForeignOps lists TASO's and FlexFlow's operator types that the
// registry lacks: inputs and weights as operators, layers it does not
// model (linear, batch norm, …) and Unity's parallel operators.
func UnsupportedForeignOps() []ForeignOp {
	return []ForeignOp{
		{0, "OP_INPUT"}, {1, "OP_WEIGHT"}, {2, "OP_ANY"}, {4, "OP_DROPOUT"}, {5, "OP_LINEAR"},
		{9, "OP_SIGMOID"}, {10, "OP_TANH"}, {11, "OP_BATCHNORM"}, {14, "OP_RESHAPE"},
		{21, "OP_MERGE_GCONV"}, {26, "OP_PARTITION"}, {27, "OP_COMBINE"}, {28, "OP_REPLICATE"},
		{29, "OP_REDUCE"}, {30, "OP_EMBEDDING"},
	}
}

// TASOTypeName names a type of TASO's enum, the default operators' and
// the unsupported ones alike, for reports; ok is false for a number the
// enum lacks.
func TASOTypeName(t TASOType) (name string, ok bool) {
	for _, op := range Default().Ops() {
		if !op.TASO.None && op.TASO.Type == t {
			return op.TASO.Name, true
		}
	}
	for _, f := range UnsupportedForeignOps() {
		if f.TASO == t {
			return f.Name, true
		}
	}
	return "", false
}

// LookupTASO finds the operator of a TASO operator type.
func (r *Registry) LookupTASO(t TASOType) (*Op, bool) {
	for _, op := range r.ops {
		if !op.TASO.None && op.TASO.Type == t {
			return op, true
		}
	}
	return nil, false
}

// LookupFlexFlow finds the operator of a FlexFlow type name.
func (r *Registry) LookupFlexFlow(name string) (*Op, bool) {
	for _, op := range r.ops {
		if !op.FlexFlow.None && (op.FlexFlow.Type == name || slices.Contains(op.FlexFlow.Aliases, name)) {
			return op, true
		}
	}
	return nil, false
}
