package runtime

import (
	"fmt"
	"math"
	"slices"

	"rulebook/runtime/gemm"
)

type unaryOp int

const (
	unaryRelu unaryOp = iota
	unarySqrt
	unaryErf
	unaryAbs
	unaryNeg
	unaryExp
	unaryLog
	unarySigmoid
	unaryTanh
	unaryReciprocal
	unaryFloor
	unaryCeil
	unaryRound
	unarySign
	unarySoftplus
	unarySoftsign
	unarySin
	unaryCos
	unaryTan
	unaryAsin
	unaryAcos
	unaryAtan
	unarySinh
	unaryCosh
	unaryAsinh
	unaryAcosh
	unaryAtanh
	unaryHardSwish
	// With attributes.
	unaryLeakyRelu
	unaryElu
	unaryCelu
	unarySelu
	unaryThresholdedRelu
	unaryHardSigmoid
	// Gelu's tanh approximation (fn is geluTanh); no operator of its own.
	unaryGeluTanh
)

// unaryMath are the unary operators that are one float64 function of the
// element: exact enough in float32 and cheap to support.
var unaryMath = map[unaryOp]func(float64) float64{
	unarySqrt: math.Sqrt, unaryExp: math.Exp, unaryLog: math.Log,
	unaryTanh: math.Tanh, unaryFloor: math.Floor, unaryCeil: math.Ceil, unaryRound: math.RoundToEven,
	unarySin: math.Sin, unaryCos: math.Cos, unaryTan: math.Tan, unaryAsin: math.Asin, unaryAcos: math.Acos,
	unaryAtan: math.Atan, unarySinh: math.Sinh, unaryCosh: math.Cosh, unaryAsinh: math.Asinh,
	unaryAcosh: math.Acosh, unaryAtanh: math.Atanh,
	unarySigmoid:  func(x float64) float64 { return 1 / (1 + math.Exp(-x)) },
	unarySoftplus: func(x float64) float64 { return math.Log1p(math.Exp(x)) },
	unarySoftsign: func(x float64) float64 { return x / (1 + math.Abs(x)) },
	unarySign: func(x float64) float64 {
		if x == 0 || math.IsNaN(x) {
			return x
		}
		return math.Copysign(1, x)
	},
	unaryHardSwish: func(x float64) float64 { return x * max(0, min(1, x/6+0.5)) },
}

func unaryDef(op unaryOp) opDef {
	return opDef{1, 1, 1, 1, func(c *nodeContext) (prepared, error) {
		k := unaryKernel{op: op, fn: unaryMath[op]}
		a := &c.attrs
		switch op {
		case unaryLeakyRelu:
			k.alpha = a.float("alpha", 0.01)
		case unaryElu, unaryCelu, unaryThresholdedRelu:
			k.alpha = a.float("alpha", 1)
		case unarySelu:
			k.alpha, k.beta = a.float("alpha", 1.67326319217681884765625), a.float("gamma", 1.05070102214813232421875)
		case unaryHardSigmoid:
			k.alpha, k.beta = a.float("alpha", 0.2), a.float("beta", 0.5)
		}
		return prepared{kernel: k, outputs: [][]int{slices.Clone(c.shape(0))}}, nil
	}}
}

type unaryKernel struct {
	op          unaryOp
	fn          func(float64) float64
	alpha, beta float32
}

func (k unaryKernel) bind(in, out []*Tensor, e *env) func() {
	body := func(lo, hi int) { k.apply(out[0].Data[lo:hi], in[0].Data[lo:hi]) }
	return func() { e.workers.parallelFor(len(out[0].Data), elementGrain, body) }
}

func (k unaryKernel) apply(dst, src []float32) {
	src = src[:len(dst)]
	if k.fn != nil {
		for i, x := range src {
			dst[i] = float32(k.fn(float64(x)))
		}
		return
	}
	a, b := k.alpha, k.beta
	switch k.op {
	case unaryErf:
		gemm.Erf(dst, src)
	case unaryRelu:
		gemm.AddMax(dst, src, 0, 0)
	case unaryAbs:
		for i, x := range src {
			dst[i] = float32(math.Abs(float64(x)))
		}
	case unaryNeg:
		for i, x := range src {
			dst[i] = -x
		}
	case unaryReciprocal:
		for i, x := range src {
			dst[i] = 1 / x
		}
	case unaryLeakyRelu:
		for i, x := range src {
			dst[i] = x
			if x < 0 {
				dst[i] = a * x
			}
		}
	case unaryElu, unarySelu, unaryCelu:
		k.exponentialLinear(dst, src)
	case unaryThresholdedRelu:
		for i, x := range src {
			dst[i] = 0
			if x > a {
				dst[i] = x
			}
		}
	case unaryHardSigmoid:
		for i, x := range src {
			dst[i] = max(0, min(1, a*x+b))
		}
	}
}

// exponentialLinear computes Elu, Selu and Celu, which differ in scales.
func (k unaryKernel) exponentialLinear(dst, src []float32) {
	for i, x := range src {
		v := float64(x)
		switch {
		case k.op == unaryCelu:
			v = max(0, v) + min(0, float64(k.alpha)*math.Expm1(v/float64(k.alpha)))
		case v < 0:
			v = float64(k.alpha) * math.Expm1(v)
		}
		if k.op == unarySelu {
			v *= float64(k.beta)
		}
		dst[i] = float32(v)
	}
}

// prepareClip bounds elements to [min, max]: attributes before opset 11,
// optional scalar inputs from 11, which may change per Run.
func prepareClip(c *nodeContext) (prepared, error) {
	k := &clipKernel{lo: float32(math.Inf(-1)), hi: float32(math.Inf(1)), loInput: -1, hiInput: -1}
	if c.opset < 11 {
		k.lo, k.hi = c.attrs.float("min", k.lo), c.attrs.float("max", k.hi)
	} else {
		for i, bound := range []*float32{&k.lo, &k.hi} {
			if !c.has(i + 1) {
				continue
			}
			v := c.inputs[i+1]
			if numElements(v.shape) != 1 {
				return prepared{}, fmt.Errorf("bound %s must hold one element", formatShape(v.shape))
			}
			switch {
			case v.isConst():
				*bound = v.konst.Data[0]
			case i == 0:
				k.loInput = 1
			default:
				k.hiInput = 2
			}
		}
	}
	return prepared{kernel: k, outputs: [][]int{slices.Clone(c.shape(0))}}, nil
}

type clipKernel struct {
	lo, hi           float32
	loInput, hiInput int // inputs holding bounds known only at run time; -1 if none
}

func (k *clipKernel) bind(in, out []*Tensor, e *env) func() {
	body := func(lo, hi int) {
		low, high := k.lo, k.hi
		if k.loInput >= 0 {
			low = in[k.loInput].Data[0]
		}
		if k.hiInput >= 0 {
			high = in[k.hiInput].Data[0]
		}
		src := in[0].Data[lo:hi]
		for i, x := range src {
			out[0].Data[lo+i] = min(max(x, low), high)
		}
	}
	return func() { e.workers.parallelFor(len(out[0].Data), elementGrain, body) }
}

// prepareGelu is ONNX's Gelu (opset 20): x·Φ(x), with Φ the normal CDF
// computed exactly through erf, or approximated with tanh when the
// approximate attribute says "tanh".
func prepareGelu(c *nodeContext) (prepared, error) {
	out := [][]int{slices.Clone(c.shape(0))}
	switch mode := c.attrs.str("approximate", "none"); mode {
	case "none":
		return prepared{kernel: &geluKernel{div: math.Sqrt2, add: 1, scale: 0.5}, outputs: out}, nil
	case "tanh":
		// The op names the function: the zero op is Relu, which fusion
		// and the GPU plans would read.
		return prepared{kernel: unaryKernel{op: unaryGeluTanh, fn: geluTanh}, outputs: out}, nil
	default:
		return prepared{}, fmt.Errorf("approximate %q: ONNX's Gelu takes none or tanh", mode)
	}
}

// geluTanh is Gelu's tanh approximation: x/2·(1 + tanh(√(2/π)·(x + 0.044715·x³))).
func geluTanh(x float64) float64 {
	return x / 2 * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(x+0.044715*x*x*x)))
}
