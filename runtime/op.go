package runtime

import (
	"fmt"
	"math"
	"slices"
	"sort"

	"rulebook/internal/budget"
	"rulebook/onnx"
)

// kernel is an operator prepared for fixed input shapes and attributes.
type kernel interface {
	// bind returns the node's computation over tensors that stay the same
	// for the life of a session. The computation must read the tensors'
	// Data when it runs, not when it is bound: a session points graph
	// inputs and outputs at new memory on every Run.
	bind(in, out []*Tensor, e *env) func()
}

// scratchUser is a kernel that needs a workspace (im2col columns, for
// instance) of the given number of floats while it runs on a session of
// threads threads.
type scratchUser interface {
	scratchSize(threads int) int
}

// viewKernel is a kernel whose output has the same elements as its first
// input (Reshape, Flatten): a session lets the output share the input's
// buffer when it can, and the kernel then has nothing to do.
type viewKernel interface {
	isView()
}

// env is what a bound computation may use besides its tensors.
type env struct {
	workers *workers
	// scratch is shared by all nodes of a session, which run one at a time.
	scratch []float32
}

// prepared is the result of preparing one node: a kernel and the output
// shapes, or (for Constant) the output values themselves.
type prepared struct {
	kernel  kernel
	outputs [][]int
	params  string
	// consts, when set, are the outputs' values, known at load.
	consts []*value
}

// opDef describes one ONNX operator.
type opDef struct {
	minIn, maxIn   int // maxIn < 0: any number
	minOut, maxOut int
	prepare        func(c *nodeContext) (prepared, error)
}

// opTable maps op types to their definitions. It is built once and never
// changed.
var opTable = buildOpTable()

func buildOpTable() map[string]opDef {
	t := map[string]opDef{
		"Identity":           {1, 1, 1, 1, prepareIdentity},
		"Constant":           {0, 0, 1, 1, prepareConstant},
		"Clip":               {1, 3, 1, 1, prepareClip},
		"Add":                binaryDef(binaryAdd),
		"Sub":                binaryDef(binarySub),
		"Mul":                binaryDef(binaryMul),
		"Div":                binaryDef(binaryDiv),
		"Pow":                binaryDef(binaryPow),
		"Conv":               {2, 3, 1, 1, prepareConv},
		"MaxPool":            {1, 1, 1, 2, preparePool(poolMax)},
		"AveragePool":        {1, 1, 1, 1, preparePool(poolAverage)},
		"GlobalAveragePool":  {1, 1, 1, 1, prepareGlobalPool(poolAverage)},
		"MatMul":             {2, 2, 1, 1, prepareMatMul},
		"Einsum":             {1, 2, 1, 1, prepareEinsum},
		"Gemm":               {2, 3, 1, 1, prepareGemm},
		"Concat":             {1, -1, 1, 1, prepareConcat},
		"Split":              {1, 2, 1, -1, prepareSplit},
		"Transpose":          {1, 1, 1, 1, prepareTranspose},
		"Reshape":            {2, 2, 1, 1, prepareReshape},
		"Flatten":            {1, 1, 1, 1, prepareFlatten},
		"Pad":                {1, 4, 1, 1, preparePad},
		"Softmax":            {1, 1, 1, 1, prepareSoftmax},
		"LogSoftmax":         {1, 1, 1, 1, prepareLogSoftmax},
		"ReduceMean":         {1, 2, 1, 1, prepareReduce(reduceMean, 18)},
		"ReduceSum":          {1, 2, 1, 1, prepareReduce(reduceSum, 13)},
		"ReduceMax":          {1, 2, 1, 1, prepareReduce(reduceMax, 18)},
		"ReduceMin":          {1, 2, 1, 1, prepareReduce(reduceMin, 18)},
		"ReduceProd":         {1, 2, 1, 1, prepareReduce(reduceProd, 18)},
		"ReduceL1":           {1, 2, 1, 1, prepareReduce(reduceL1, 18)},
		"ReduceL2":           {1, 2, 1, 1, prepareReduce(reduceL2, 18)},
		"ReduceLogSum":       {1, 2, 1, 1, prepareReduce(reduceLogSum, 18)},
		"ReduceLogSumExp":    {1, 2, 1, 1, prepareReduce(reduceLogSumExp, 18)},
		"ReduceSumSquare":    {1, 2, 1, 1, prepareReduce(reduceSumSquare, 18)},
		"Max":                {1, -1, 1, 1, prepareVariadic(binaryMax, false)},
		"Min":                {1, -1, 1, 1, prepareVariadic(binaryMin, false)},
		"Sum":                {1, -1, 1, 1, prepareVariadic(binaryAdd, false)},
		"Mean":               {1, -1, 1, 1, prepareVariadic(binaryAdd, true)},
		"PRelu":              binaryDef(binaryPRelu),
		"GlobalMaxPool":      {1, 1, 1, 1, prepareGlobalPool(poolMax)},
		"BatchNormalization": {5, 5, 1, 5, prepareBatchNormalization},
		"Dropout":            {1, 3, 1, 2, prepareDropout},
		"Squeeze":            {1, 2, 1, 1, prepareSqueeze},
		"Unsqueeze":          {1, 2, 1, 1, prepareUnsqueeze},
		"Expand":             {2, 2, 1, 1, prepareExpand},
		"Shape":              {1, 1, 1, 1, prepareShape},
		"Gather":             {2, 2, 1, 1, prepareGather},
		"Slice":              {1, 5, 1, 1, prepareSlice},
		"LayerNormalization": {2, 3, 1, 3, prepareLayerNormalization},
		"ConstantOfShape":    {1, 1, 1, 1, prepareConstantOfShape},
		"Equal":              {2, 2, 1, 1, prepareEqual},
		"Where":              {3, 3, 1, 1, prepareWhere},
		"Mod":                {2, 2, 1, 1, prepareMod},
		"Cast":               {1, 1, 1, 1, prepareCast},
		"Range":              {3, 3, 1, 1, prepareRange},
		"Not":                {1, 1, 1, 1, prepareNot},
		"ScatterND":          {3, 3, 1, 1, prepareScatterND},
		"Gelu":               {1, 1, 1, 1, prepareGelu},
	}
	unary := map[string]unaryOp{
		"Relu": unaryRelu, "Sqrt": unarySqrt, "Erf": unaryErf, "Abs": unaryAbs, "Neg": unaryNeg,
		"Exp": unaryExp, "Log": unaryLog, "Sigmoid": unarySigmoid, "Tanh": unaryTanh,
		"Reciprocal": unaryReciprocal, "Floor": unaryFloor, "Ceil": unaryCeil, "Round": unaryRound,
		"Sign": unarySign, "Softplus": unarySoftplus, "Softsign": unarySoftsign, "Sin": unarySin,
		"Cos": unaryCos, "Tan": unaryTan, "Asin": unaryAsin, "Acos": unaryAcos, "Atan": unaryAtan,
		"Sinh": unarySinh, "Cosh": unaryCosh, "Asinh": unaryAsinh, "Acosh": unaryAcosh,
		"Atanh": unaryAtanh, "HardSwish": unaryHardSwish, "LeakyRelu": unaryLeakyRelu, "Elu": unaryElu,
		"Celu": unaryCelu, "Selu": unarySelu, "ThresholdedRelu": unaryThresholdedRelu,
		"HardSigmoid": unaryHardSigmoid,
	}
	for name, op := range unary {
		t[name] = unaryDef(op)
	}
	return t
}

// Ops lists the ONNX op types this runtime executes, sorted.
func Ops() []string {
	ops := make([]string, 0, len(opTable))
	for op := range opTable {
		ops = append(ops, op)
	}
	sort.Strings(ops)
	return ops
}

// nodeContext is what an operator sees while it is prepared: the node, the
// opset, and its inputs' shapes and constant values.
type nodeContext struct {
	node   *onnx.Node
	opset  int64
	inputs []*value // nil for an omitted optional input
	attrs  attrReader
	// mem counts constants folded at load against the memory budget.
	mem *budget.Meter
	// shapesOnly: only the output shapes are wanted (InferShapes), so an
	// operator whose kernel needs constants it lacks still gives them.
	shapesOnly bool
}

// limit bounds the elements of a tensor the node may infer: what the
// runtime can allocate when it loads a model to run, and what a count
// in bytes holds when only shapes are inferred.
func (c *nodeContext) limit() int {
	if c.shapesOnly {
		return maxShapeElements
	}
	return maxTensorElements
}

// reserve takes the bytes of a constant output of the given shape from
// the memory budget before it is built; transient adds the float64 copy
// that folds over constants make on the way.
func (c *nodeContext) reserve(shape []int, integer, transient bool) error {
	return reserve(c.mem, "output", shape, integer, transient)
}

func (c *nodeContext) has(i int) bool { return i < len(c.inputs) && c.inputs[i] != nil }

// shape returns input i's shape; nil when it is omitted.
func (c *nodeContext) shape(i int) []int {
	if !c.has(i) {
		return nil
	}
	return c.inputs[i].shape
}

// constInts returns the integers of a constant input: shapes, sizes, pads
// and axes must be known at load because the runtime infers every shape
// then.
func (c *nodeContext) constInts(i int, what string) ([]int64, error) {
	v := c.inputs[i]
	if !v.isConst() {
		return nil, fmt.Errorf("input %d (%s, %q) must be a constant (an initializer or Constant output): shapes are inferred at load", i, what, v.name)
	}
	if v.ints != nil {
		return v.ints, nil
	}
	// A float constant, e.g. one folded from other constants: its
	// elements must be whole numbers.
	out := make([]int64, len(v.konst.Data))
	for j, f := range v.konst.Data {
		if f != float32(math.Trunc(float64(f))) {
			return nil, fmt.Errorf("input %d (%s, %q) holds %v, not an integer", i, what, v.name, f)
		}
		out[j] = int64(f)
	}
	return out, nil
}

// prepareIdentity is only used when Identity cannot be elided; the graph
// builder normally aliases its output to its input.
func prepareIdentity(c *nodeContext) (prepared, error) {
	return prepared{kernel: copyKernel{}, outputs: [][]int{slices.Clone(c.shape(0))}}, nil
}

// copyKernel copies its input: Reshape and Flatten when they cannot share
// their input's buffer, and Identity.
type copyKernel struct{}

func (copyKernel) isView() {}

func (copyKernel) bind(in, out []*Tensor, e *env) func() {
	return func() {
		if len(out[0].Data) > 0 && &out[0].Data[0] == &in[0].Data[0] {
			return // the session made the output a view of the input
		}
		copy(out[0].Data, in[0].Data)
	}
}
