package optimizer

import (
	"cmp"

	"rulebook/onnx"
	"rulebook/rules"
)

// adapter is what the optimizer knows of one registry operator in ONNX
// terms: how ONNX nodes map onto it, how lowering writes it back, and
// how rewriting and pricing treat it. Facts that need no ONNX type live
// in the operator's rules.Op row; these need the optimizer's own.
type adapter struct {
	// none says why the operator has no ONNX form. An adapter with a
	// reason has nothing else.
	none string
	// from are the ONNX node types that map onto the operator.
	from []onnxMapping
	// lower writes a node of the operator as ONNX nodes.
	lower lowerFunc
	// reads is how the ONNX operator lowering writes reads its weights:
	// whole, or at the stored shape it broadcasts.
	reads use
	// batchwise operators act on each matrix of a rank-3 batch alone, with
	// any axis one further in: rules over matrices of them lift to batches.
	batchwise bool
	// flat says whether a node with these parameters holds at every rank
	// of at least 2 (see flat); nil for never.
	flat func(p []int) bool
	// lift is a node's parameters in a rule lifted one batch axis up; nil
	// keeps them.
	lift func(p []int) []int
	// biasArgs are the operands that must all be channel biases for the
	// node's result to be one (see channelBias); nil when it never is.
	biasArgs func(p []int, args []rules.Value) []rules.Value
	// takesBias says whether the operator's ONNX node takes a channel
	// bias added to its result as an input of its own, for a node with
	// these parameters; nil when it never does.
	takesBias func(p []int) bool
	// addsBias marks the operator that adds such a bias.
	addsBias bool
	// absorbs is the node of the same operator, read by node i, that
	// lowering writes as part of node i's ONNX node.
	absorbs func(l *lowering, i int) (inner int, ok bool)
}

// onnxMapping maps ONNX nodes of one type onto an operator.
type onnxMapping struct {
	// onnxType is the node type; "" for the operator's own (ONNXType).
	onnxType string
	to       mapFunc
}

// mapFunc maps node n onto the operator op, or keeps it opaque (false,
// with the reason in b.why).
type mapFunc func(b *builder, op string, n *onnx.Node, args []rules.Value) (bool, error)

// lowerFunc writes node i as ONNX nodes, its first output named out and
// its weights named as reads says.
type lowerFunc func(l *lowering, i int, out string, reads use) []*onnx.Node

// adapters holds one adapter per operator of rules.All(), keyed by name.
// It is read only. Lowering functions read no adapter (Go would see an
// initialization cycle), so node passes them the facts they need.
var adapters = map[string]*adapter{
	rules.NameEwadd: {from: []onnxMapping{{to: (*builder).elementwise}}, lower: (*lowering).ewadd, reads: broadcast,
		batchwise: true, flat: always, biasArgs: allArgs, addsBias: true},
	// Mul maps onto ewmul, or onto smul by a scalar; inference-mode
	// batch normalisation onto an ewmul and an ewadd.
	rules.NameEwmul: {from: []onnxMapping{{to: (*builder).elementwise}, {onnxType: rules.ONNXBatchNormalization, to: (*builder).batchNorm}},
		lower: (*lowering).plain, reads: broadcast, batchwise: true, flat: always, biasArgs: allArgs},
	// ewmul's mapping of Mul makes smul.
	rules.NameSmul: {lower: (*lowering).plain, reads: broadcast, batchwise: true, flat: always, biasArgs: firstArg},
	// The registry's transpose takes matrices only, so it is not batch-wise.
	rules.NameTranspose: {from: []onnxMapping{{to: (*builder).transpose}}, lower: (*lowering).transpose},
	rules.NameMatmul: {from: []onnxMapping{{to: (*builder).matmul}, {onnxType: rules.ONNXGemm, to: (*builder).gemm}},
		lower: (*lowering).matmul, reads: batch, batchwise: true},
	rules.NameConv2D:  {from: []onnxMapping{{to: (*builder).conv}}, lower: (*lowering).convNode, takesBias: withoutActivation},
	rules.NameEnlarge: {none: "it pads a weight, so lowering folds it into an initializer"},
	// Clip(0, ∞) is a relu too.
	rules.NameRelu: {from: []onnxMapping{{to: (*builder).relu}, {onnxType: rules.ONNXClip, to: (*builder).clip}},
		lower: (*lowering).plain, batchwise: true, flat: always, biasArgs: allArgs},
	rules.NamePoolAvg: {from: []onnxMapping{{to: (*builder).pool}}, lower: (*lowering).pool},
	rules.NamePoolMax: {from: []onnxMapping{{to: (*builder).pool}}, lower: (*lowering).pool},
	rules.NameConcat: {from: []onnxMapping{{to: (*builder).concat}}, lower: (*lowering).concat,
		batchwise: true, flat: outerAxis, lift: innerAxis, biasArgs: onChannels, absorbs: (*lowering).innerConcat},
	// Split does not map: a rewrite makes split nodes.
	rules.NameSplit:       {lower: (*lowering).splitNode, batchwise: true, flat: outerAxis, lift: innerAxis, biasArgs: onChannels},
	rules.NameCPool:       {none: whyConstant},
	rules.NameIConv:       {none: whyConstant},
	rules.NameIMatmul:     {none: whyConstant},
	rules.NameIEwmul:      {none: whyConstant},
	rules.NamePartition:   {none: whyParallel},
	rules.NameCombine:     {none: whyParallel},
	rules.NameReplicate:   {none: whyParallel},
	rules.NameEmbedding:   {none: whyParallel},
	rules.NameAttnSoftmax: {none: whyParallel},
	rules.NameAttnMix:     {none: whyParallel},
	rules.NameBatchNorm:   {none: whyParallel},
	rules.NameReduce:      {none: whyParallel},
	rules.NameLinear:      {none: whyParallel},
}

// Why operators have no ONNX form.
const (
	whyConstant = "a constant, which lowering folds into an initializer"
	whyParallel = "a parallel operator, which plans place and no ONNX model has"
)

// adapterOf is the adapter of a node's operator; nil for an opaque node.
func adapterOf(op *rules.Op) *adapter { return adapters[op.Name] }

// mapping is an adapter's mapping with the operator it maps onto.
type mapping struct {
	op string
	to mapFunc
}

// mappings are the adapters' mappings of reg's operators, by ONNX type.
func mappings(reg *rules.Registry) map[string]mapping {
	out := map[string]mapping{}
	for _, op := range reg.Ops() {
		a := adapterOf(op)
		if a == nil {
			continue
		}
		for _, m := range a.from {
			out[cmp.Or(m.onnxType, op.ONNXType())] = mapping{op: op.Name, to: m.to}
		}
	}
	return out
}

// takesBias reports whether a node of op may take a channel bias into its
// ONNX node, whatever its parameters.
func takesBias(op *rules.Op) bool {
	a := adapterOf(op)
	return a != nil && a.takesBias != nil
}

// takingBias reports whether node n, with its parameters, takes a channel
// bias into its ONNX node.
func takingBias(n *rules.Node) bool {
	a := adapterOf(n.Op)
	return a != nil && a.takesBias != nil && a.takesBias(n.Params)
}

// addsBias reports whether a node of op may be the addition of such a
// bias.
func addsBias(op *rules.Op) bool {
	a := adapterOf(op)
	return a != nil && a.addsBias
}

func always([]int) bool { return true }

// outerAxis holds for concat and split on axes 0 and 1, which view each
// tensor as the matrix of its first axis by all the others.
func outerAxis(p []int) bool { return rules.AxisOf(p).Axis <= 1 }

// innerAxis moves concat and split one axis in, past a new batch axis.
func innerAxis(p []int) []int { return rules.AxisAttrs{Axis: rules.AxisOf(p).Axis + 1}.Params() }

func allArgs(_ []int, args []rules.Value) []rules.Value { return args }

// firstArg leaves out smul's scalar.
func firstArg(_ []int, args []rules.Value) []rules.Value { return args[:1] }

// onChannels passes biases through concat and split on the channel axis.
func onChannels(p []int, args []rules.Value) []rules.Value {
	if rules.AxisOf(p).Axis != 1 {
		return nil
	}
	return args
}

// withoutActivation says a Conv takes the bias when no relu follows it.
func withoutActivation(p []int) bool { return rules.ConvOf(p).Activation == rules.ActNone }
