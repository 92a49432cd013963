package rules

// Work is what one application of an operator costs: its arithmetic in
// FLOPs, a multiply-add counting 2, and the bytes it reads and writes.
// The optimizer's cost model and the planner price from it.
type Work struct{ FLOPs, Bytes float64 }

// ElementBytes is the size of a tensor element: float32.
const ElementBytes = 4

// CostRule says how an application's FLOPs follow from its parameters
// and the shapes of its operands and outputs. It is data, not a function,
// so that Work hands the shapes to no unknown code and a caller's shapes
// stay on its stack: the optimizer prices nodes by the hundred thousand.
type CostRule int

// The cost rules.
const (
	CostUnset     CostRule = iota
	CostPerOutput          // one operation an output element: data movement, element-wise operators
	CostConv               // a multiply-add per output element and kernel cell of one group
	CostProduct            // a multiply-add per output element and entry of the input's last dimension
	CostWindow             // a kernel×kernel window per output element
)

// flops counts an application by the rule; an unset rule (an opaque node
// built outside the registry) counts one operation an output element.
func (c CostRule) flops(p []int, in, out []Shape) float64 {
	outputs := float64(outputSize(out))
	switch c {
	case CostConv:
		w := in[1].Dims
		return ProductFLOPs(outputs, float64(w[1]*w[2]*w[3]))
	case CostProduct:
		x := in[0]
		return ProductFLOPs(outputs, float64(x.Dims[x.Rank-1]))
	case CostWindow:
		k := WindowOf(p).Kernel
		return WindowFLOPs(outputs, float64(k*k))
	}
	return outputs
}

// Work counts one application. Each operand is read once and each output
// written once. An operator without a cost rule (an opaque node built
// outside the registry) does one operation an output element.
func (op *Op) Work(p []int, in, out []Shape) Work {
	read := 0
	for _, s := range in {
		read += s.Size()
	}
	return Work{FLOPs: op.Cost.flops(p, in, out), Bytes: float64(ElementBytes * (read + outputSize(out)))}
}

func outputSize(out []Shape) int {
	n := 0
	for _, s := range out {
		n += s.Size()
	}
	return n
}

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
