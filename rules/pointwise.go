package rules

import "slices"

// Pointwise is what the verifier's pointwise reasoning knows of an
// operator's elements (verify/pointwise.go). An identity among operators
// that act element by element holds for tensors exactly when it holds for
// real numbers. Every other operator is an opaque term there, of which its
// class may still say a little: a sign, or linearity in its operands.
type Pointwise uint8

// Pointwise classes. Each row names its class, PointwiseOpaque included,
// so that a new row cannot be read as opaque by omission.
const (
	// PointwiseUnset is a row that does not say; a registry test refuses it.
	PointwiseUnset Pointwise = iota
	// PointwiseOpaque operators are opaque terms and nothing more.
	PointwiseOpaque
	// PointwiseSum adds its operands element by element (ewadd).
	PointwiseSum
	// PointwiseProduct multiplies its operands element by element (ewmul).
	PointwiseProduct
	// PointwiseScale multiplies every element of its first operand by its
	// second, a scalar (smul). A scale moves out of a linear operator's
	// operand.
	PointwiseScale
	// PointwiseRelu is max(x, 0) element by element (relu).
	PointwiseRelu
	// PointwiseOnes is a constant of ones (I_ewmul).
	PointwiseOnes
	// PointwiseNonNegative is a constant of non-negative elements (C_pool).
	PointwiseNonNegative
	// PointwiseLinear operators are linear in each operand (matmul,
	// pool_avg).
	PointwiseLinear
	// PointwiseLinearActivated operators are linear in each operand, then
	// apply the activation their "activation" parameter names (conv2d).
	PointwiseLinearActivated
	// PointwiseMax takes the largest element of each window; its
	// parameters are WindowAttrs (pool_max).
	PointwiseMax
	// PointwiseRearrange moves elements without changing them, and a relu
	// moves inside it by an axiom (concat-relu, relu-transpose).
	PointwiseRearrange
	// PointwisePad places its operand's elements among zeros (enlarge).
	PointwisePad
)

// ElementWise reports whether each element depends on the same element of
// the operands only, so that real arithmetic decides identities of it.
func (c Pointwise) ElementWise() bool {
	switch c {
	case PointwiseSum, PointwiseProduct, PointwiseScale, PointwiseRelu:
		return true
	}
	return false
}

// NonNegative reports whether every element is at least 0, whatever the
// operands.
func (c Pointwise) NonNegative() bool {
	switch c {
	case PointwiseRelu, PointwiseOnes, PointwiseNonNegative:
		return true
	}
	return false
}

// KeepsSign reports whether the elements are at least 0 when every
// operand's are. A scale is left out: the verifier moves its scalar out of
// linear operators instead.
func (c Pointwise) KeepsSign() bool {
	switch c {
	case PointwiseSum, PointwiseProduct, PointwiseLinear, PointwiseLinearActivated,
		PointwiseMax, PointwiseRearrange, PointwisePad:
		return true
	}
	return false
}

// ReluInside reports whether an axiom moves a relu of the operator's
// result onto its operands.
func (c Pointwise) ReluInside() bool { return c == PointwiseRearrange }

// ReluActivated reports whether an application of a
// PointwiseLinearActivated operator applies relu after its linear part.
func (op *Op) ReluActivated(p []int) bool {
	i := op.activationParam()
	return op.Pointwise == PointwiseLinearActivated && i >= 0 && p[i] == ActRelu
}

// WithoutActivation returns a copy of p with the activation set to none:
// the linear part of a PointwiseLinearActivated application.
func (op *Op) WithoutActivation(p []int) []int {
	out := slices.Clone(p)
	if i := op.activationParam(); i >= 0 {
		out[i] = ActNone
	}
	return out
}

// activationParam is the index of the parameter named "activation", or -1.
func (op *Op) activationParam() int {
	return slices.IndexFunc(op.Params, func(s ParamSpec) bool { return s.Name == "activation" })
}

// The fan-in of the default set: how many operand elements one output
// element reads, as the factors of a product (Op.FanIn).

// matmulFanIn is the contraction: the last extent of the left operand.
func matmulFanIn(_ []int, in []Shape) []int {
	a := in[0]
	if a.Rank == 0 {
		return nil
	}
	return []int{max(a.Dims[a.Rank-1], 1)}
}

// convFanIn is the kernel's window over the input channels of a group: the
// kernel's extents but its output channels.
func convFanIn(_ []int, in []Shape) []int {
	k := in[1]
	out := []int{1}
	for i := 1; i < k.Rank; i++ {
		out = append(out, max(k.Dims[i], 1))
	}
	return out
}

// windowFanIn is a pooling window.
func windowFanIn(p []int, _ []Shape) []int {
	k := WindowOf(p).Kernel
	return []int{k, k}
}
