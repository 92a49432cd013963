package rules

// Work is what one application of an operator costs: its arithmetic in
// FLOPs, a multiply-add counting 2, and the bytes it reads and writes.
// The optimizer's cost model and the planner price from it.
type Work struct{ FLOPs, Bytes float64 }

// ElementBytes is the size of a tensor element: float32.
const ElementBytes = 4

// CostRule counts an application's FLOPs from its parameters and the
// shapes of its operands and outputs.
type CostRule func(p []int, in, out []Shape) float64

// Work counts one application. Each operand is read once and each output
// written once. An operator without a cost rule (an opaque node built
// outside the registry) does one operation an output element.
func (op *Op) Work(p []int, in, out []Shape) Work {
	read := 0
	for _, s := range in {
		read += s.Size()
	}
	flops := float64(outputSize(out))
	if op.Cost != nil {
		flops = op.Cost(p, in, out)
	}
	return Work{FLOPs: flops, Bytes: float64(ElementBytes * (read + outputSize(out)))}
}

func outputSize(out []Shape) int {
	n := 0
	for _, s := range out {
		n += s.Size()
	}
	return n
}

// perOutput is the cost of data movement and element-wise operators: one
// operation an output element.
func perOutput(_ []int, _, out []Shape) float64 { return float64(outputSize(out)) }

// The counts below are the one place each formula is written: the
// registry's rows and training's NodeWork for ONNX nodes both call them.

// ProductFLOPs counts a multiply-add per output element and entry of the
// contracted dimension.
func ProductFLOPs(outputs, contraction float64) float64 { return 2 * outputs * contraction }

// WindowFLOPs counts one operation per output element and window cell.
func WindowFLOPs(outputs, window float64) float64 { return outputs * window }

// NormalisingFLOPs counts a mean or sum, then scaling: about five
// operations per input element (softmax, the normalisations).
func NormalisingFLOPs(inputs float64) float64 { return 5 * inputs }

// convCost multiplies and adds once per output element and kernel cell
// of one group: O·H·W outputs times I/groups·kh·kw.
func convCost(_ []int, in, out []Shape) float64 {
	w := in[1].Dims
	return ProductFLOPs(float64(outputSize(out)), float64(w[1]*w[2]*w[3]))
}

// productCost multiplies and adds once per output element and entry of
// the contracted dimension, the input's last (matmul, linear).
func productCost(_ []int, in, out []Shape) float64 {
	x := in[0]
	return ProductFLOPs(float64(outputSize(out)), float64(x.Dims[x.Rank-1]))
}

// windowCost reads a kernel×kernel window for each output element.
func windowCost(p []int, _, out []Shape) float64 {
	k := WindowOf(p).Kernel
	return WindowFLOPs(float64(outputSize(out)), float64(k*k))
}

// Label names an application in a report of cost by operator: the
// operator's name, with "+relu" where its activation parameter applies one.
func (op *Op) Label(p []int) string {
	for k, spec := range op.Params {
		if spec.Name == "activation" && p[k] != ActNone {
			return op.Name + "+" + spec.Symbols[p[k]]
		}
	}
	return op.Name
}
