package training

import "rulebook/profile"

// Class is what an ONNX operator does with its data, as a planner that
// cuts and prices it needs to know. training is the planner's ONNX
// interpreter, so the ONNX names are spelled here and nowhere in plan.
type Class struct {
	// Cut is how a cut of its inputs carries to its output.
	Cut CutRule
	// Kernel is the measured operator a device profile prices it as; ""
	// where no profile row stands for it.
	Kernel profile.Kind
	// TensorCores: a product or convolution, run in a reduced precision
	// under autocast.
	TensorCores bool
	// ChannelsFirst: its features are axis 1 (a convolution's channels),
	// not the last axis.
	ChannelsFirst bool
	// BiasAdd: an Add, which after a product with a bias weight is the
	// product's epilogue.
	BiasAdd bool
}

// CutRule is how a tensor-parallel cut carries through an operator.
type CutRule int

// The cut rules.
const (
	// CutNone: the operator needs whole inputs.
	CutNone CutRule = iota
	// CutMetadata: it reads only its input's shape, so a cut is no matter.
	CutMetadata
	// CutElementwise: each output element reads the same element of its
	// inputs (broadcast from the right).
	CutElementwise
	// CutPerChannel: each channel (axis 1) alone.
	CutPerChannel
	// CutReshape: a reshape, which keeps a cut that whole slices follow.
	CutReshape
	// CutTranspose: a cut moves with its axis (Op.Perm).
	CutTranspose
	// CutNormalize: normalizes along Op.Reduces; a cut elsewhere stays.
	CutNormalize
	// CutBatchedProduct: a product of two activations, whose batch axes
	// (attention's heads) may be cut on both.
	CutBatchedProduct
	// CutSelect: picks entries along Op.Reduces' axis by its second input
	// (a Gather); a cut on another axis stays, moved by the axes the
	// indices put in place of the one picked along.
	CutSelect
)

var classes = buildClasses()

// buildClasses lists the classes; the operators that only keep a cut are
// listed by name.
func buildClasses() map[string]Class {
	m := map[string]Class{
		"Shape": {Cut: CutMetadata}, "Size": {Cut: CutMetadata},
		"Reshape": {Cut: CutReshape}, "Squeeze": {Cut: CutReshape}, "Unsqueeze": {Cut: CutReshape},
		"Transpose":          {Cut: CutTranspose},
		"Gather":             {Cut: CutSelect},
		"Softmax":            {Cut: CutNormalize, Kernel: profile.Softmax},
		"LogSoftmax":         {Cut: CutNormalize, Kernel: profile.Softmax},
		"MatMul":             {Cut: CutBatchedProduct, Kernel: profile.Linear, TensorCores: true},
		"Gemm":               {Kernel: profile.Linear, TensorCores: true},
		"Conv":               {Kernel: profile.Conv2D, TensorCores: true, ChannelsFirst: true},
		"LayerNormalization": {Kernel: profile.LayerNorm},
		"Relu":               {Cut: CutElementwise, Kernel: profile.ReLU},
		"Gelu":               {Cut: CutElementwise, Kernel: profile.GELU},
		"Erf":                {Cut: CutElementwise, Kernel: profile.GELU},
		"Add":                {Cut: CutElementwise, Kernel: profile.Add, BiasAdd: true},
		"Sub":                {Cut: CutElementwise, Kernel: profile.Add},
		"Mul":                {Cut: CutElementwise, Kernel: profile.Add},
		"Div":                {Cut: CutElementwise, Kernel: profile.Add},
	}
	for _, t := range []string{"Pow", "LeakyRelu", "Elu", "Selu", "Sqrt", "Tanh", "Sigmoid", "HardSigmoid", "HardSwish",
		"Softplus", "Exp", "Log", "Neg", "Abs", "Reciprocal", "Cast", "Dropout", "Identity", "Where", "Clip", "Min", "Max", "Sum", "Mean"} {
		m[t] = Class{Cut: CutElementwise}
	}
	for _, t := range []string{"BatchNormalization", "InstanceNormalization", "MaxPool", "AveragePool", "GlobalAveragePool", "GlobalMaxPool", "LpPool"} {
		m[t] = Class{Cut: CutPerChannel}
	}
	return m
}

// ClassOf is an ONNX operator type's class; the zero Class (needs whole
// inputs, no profile row) for one not listed.
func ClassOf(opType string) Class { return classes[opType] }
