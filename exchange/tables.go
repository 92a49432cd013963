package exchange

import "strconv"

// TASO's operator types (its old enum; FlexFlow's JSON spells the same
// numbers with these names, and FlexFlow's converter writes type 25 as
// "OP_CONSTANT_POOl", which is read too).
var tasoTypeNames = []string{
	0: "OP_INPUT", 1: "OP_WEIGHT", 2: "OP_ANY", 3: "OP_CONV2D", 4: "OP_DROPOUT", 5: "OP_LINEAR",
	6: "OP_POOL2D_MAX", 7: "OP_POOL2D_AVG", 8: "OP_RELU", 9: "OP_SIGMOID", 10: "OP_TANH",
	11: "OP_BATCHNORM", 12: "OP_CONCAT", 13: "OP_SPLIT", 14: "OP_RESHAPE", 15: "OP_TRANSPOSE",
	16: "OP_EW_ADD", 17: "OP_EW_MUL", 18: "OP_MATMUL", 19: "OP_MUL", 20: "OP_ENLARGE",
	21: "OP_MERGE_GCONV", 22: "OP_CONSTANT_IMM", 23: "OP_CONSTANT_ICONV", 24: "OP_CONSTANT_ONE",
	25: "OP_CONSTANT_POOL", 26: "OP_PARTITION", 27: "OP_COMBINE", 28: "OP_REPLICATE",
	29: "OP_REDUCE", 30: "OP_EMBEDDING",
}

// TASO's operator types for our operators.
const (
	tConv2D    = 3
	tPoolMax   = 6
	tPoolAvg   = 7
	tRelu      = 8
	tConcat    = 12
	tSplit     = 13
	tTranspose = 15
	tEwAdd     = 16
	tEwMul     = 17
	tMatmul    = 18
	tMul       = 19
	tEnlarge   = 20
	tIMatmul   = 22
	tIConv     = 23
	tIEwMul    = 24
	tCPool     = 25
)

var tasoTypeOf = map[string]int{
	"conv2d": tConv2D, "pool_max": tPoolMax, "pool_avg": tPoolAvg, "relu": tRelu,
	"concat": tConcat, "split": tSplit, "transpose": tTranspose, "ewadd": tEwAdd,
	"ewmul": tEwMul, "matmul": tMatmul, "smul": tMul, "enlarge": tEnlarge,
	"I_matmul": tIMatmul, "I_conv": tIConv, "I_ewmul": tIEwMul, "C_pool": tCPool,
}

var ourOpOf = func() map[int]string {
	m := map[int]string{}
	for name, t := range tasoTypeOf {
		m[t] = name
	}
	return m
}()

// typeByName maps FlexFlow type names to TASO's numbers.
var typeByName = func() map[string]int {
	m := map[string]int{"OP_CONSTANT_POOl": tCPool}
	for t, n := range tasoTypeNames {
		m[n] = t
	}
	return m
}()

// Parameter keys (TASO's numbers, FlexFlow's names).
const (
	pmOpType     = 0
	pmNumInputs  = 1
	pmNumOutputs = 2
	pmGroup      = 3
	pmKernelH    = 4
	pmKernelW    = 5
	pmStrideH    = 6
	pmStrideW    = 7
	pmPad        = 8
	pmActi       = 9
	pmNumDim     = 10
	pmAxis       = 11
	pmPerm       = 12
	pmOutShuffle = 13
)

var paramNames = []string{
	"PM_OP_TYPE", "PM_NUM_INPUTS", "PM_NUM_OUTPUTS", "PM_GROUP", "PM_KERNEL_H", "PM_KERNEL_W",
	"PM_STRIDE_H", "PM_STRIDE_W", "PM_PAD", "PM_ACTI", "PM_NUMDIM", "PM_AXIS", "PM_PERM",
	"PM_OUTSHUFFLE", "PM_MERGE_GCONV_COUNT", "PM_PARALLEL_DIM", "PM_PARALLEL_DEGREE",
}

var paramByName = func() map[string]int {
	m := map[string]int{}
	for k, n := range paramNames {
		m[n] = k
	}
	return m
}()

func paramName(p xParam) string {
	if p.key >= 0 && p.key < len(paramNames) {
		return paramNames[p.key]
	}
	if p.name != "" {
		return p.name
	}
	return "key " + strconv.Itoa(p.key)
}

// opSchema lists the parameter keys an operator type may carry, those it
// must carry, and the operand counts accepted (ours first).
func opSchema(typ int) (allowed, required, operands []int) {
	switch typ {
	case tConv2D:
		return []int{pmGroup, pmKernelH, pmKernelW, pmStrideH, pmStrideW, pmPad, pmActi}, []int{pmStrideH, pmStrideW, pmPad}, []int{2}
	case tPoolMax, tPoolAvg:
		return []int{pmOpType, pmKernelH, pmKernelW, pmStrideH, pmStrideW, pmPad, pmActi}, []int{pmKernelH, pmKernelW, pmStrideH, pmStrideW, pmPad}, []int{1, 2}
	case tConcat:
		return []int{pmNumInputs, pmAxis, pmNumDim}, []int{pmAxis}, []int{2}
	case tSplit:
		return []int{pmNumOutputs, pmAxis}, []int{pmAxis}, []int{1}
	case tTranspose:
		return []int{pmNumDim, pmPerm, pmOutShuffle}, []int{pmPerm}, []int{1}
	case tMatmul:
		return []int{pmActi}, nil, []int{2}
	case tEnlarge:
		return []int{pmKernelH, pmKernelW}, []int{pmKernelH, pmKernelW}, []int{1, 2}
	case tCPool, tIConv:
		return []int{pmKernelH, pmKernelW}, []int{pmKernelH, pmKernelW}, []int{0}
	case tIMatmul, tIEwMul:
		return nil, nil, []int{0}
	case tRelu:
		return nil, nil, []int{1}
	}
	return nil, nil, []int{2} // ewadd, ewmul, mul
}
