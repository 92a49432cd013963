package cuda

import (
	"fmt"
	"math"
)

// Precision is how matrix products and convolutions treat their float32
// operands. Everything else (elementwise kernels, reductions) is float32
// whatever the precision.
type Precision int

const (
	// FP32 multiplies float32 operands in float32: cuBLAS's default
	// math, cuDNN's FMA-only kernels (no TF32 tensor cores).
	FP32 Precision = iota
	// TF32 lets tensor cores round the operands to TF32 (float32's
	// exponent, a 10-bit mantissa) and accumulate in float32:
	// cublasSetMathMode(CUBLAS_TF32_TENSOR_OP_MATH), cuDNN's
	// CUDNN_TENSOR_OP_MATH. PyTorch's convolutions run so by default.
	TF32
	// BF16 rounds the operands to bfloat16 (a 7-bit mantissa) and
	// accumulates in float32, as PyTorch's autocast does: cuBLAS's
	// CUBLAS_COMPUTE_32F_FAST_16BF on float32 matrices. cuDNN's legacy
	// API has no such mode for float32 tensors; convolutions get
	// CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION, which lets cuDNN convert the
	// operands for its tensor cores: to TF32 or half precision, with a
	// longer mantissa than bfloat16 but, for half, a range that ends at
	// 65504.
	BF16
)

func (p Precision) String() string {
	switch p {
	case FP32:
		return "fp32"
	case TF32:
		return "tf32"
	case BF16:
		return "bf16"
	}
	return fmt.Sprintf("Precision(%d)", int(p))
}

// ParsePrecision reads fp32, tf32 or bf16.
func ParsePrecision(s string) (Precision, error) {
	for _, p := range []Precision{FP32, TF32, BF16} {
		if s == p.String() {
			return p, nil
		}
	}
	return FP32, fmt.Errorf("precision must be fp32, tf32 or bf16, got %q", s)
}

// MantissaBits is the operands' explicit mantissa bits: 23, 10 or 7.
func (p Precision) MantissaBits() int {
	switch p {
	case TF32:
		return 10
	case BF16:
		return 7
	}
	return 23
}

// Round rounds x to p's mantissa, to nearest with ties to even, as the
// emulator models the tensor cores' conversion of an operand.
func (p Precision) Round(x float32) float32 {
	drop := 23 - p.MantissaBits()
	if drop == 0 || math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
		return x
	}
	bits := math.Float32bits(x)
	half := uint32(1)<<(drop-1) - 1 + (bits>>drop)&1
	return math.Float32frombits((bits + half) &^ (uint32(1)<<drop - 1))
}

// rounded returns xs rounded to p, a copy (xs itself for FP32).
func (p Precision) rounded(xs []float32) []float32 {
	if p == FP32 {
		return xs
	}
	out := make([]float32, len(xs))
	for i, x := range xs {
		out[i] = p.Round(x)
	}
	return out
}

// setMath switches the cuBLAS handle to p's math mode (FP32 or TF32)
// if it is not in it; the mode is host state, read when a call is made.
func (c *Context) setMath(p Precision) error {
	mode := int32(cublasDefaultMath)
	if p == TF32 {
		mode = cublasTF32Math
	}
	if mode == c.math {
		return nil
	}
	if c.blas.cublasSetMathMode == nil {
		return fmt.Errorf("cuda: %s products need cublasSetMathMode, which %s lacks", p, c.blas.file)
	}
	if rc := c.blas.cublasSetMathMode(c.handle, mode); rc != 0 {
		return fmt.Errorf("cuda: cublasSetMathMode(%d): %s", mode, c.blas.describe(rc))
	}
	c.math = mode
	return nil
}

// gemmBF16 queues a product of float32 matrices whose operands cuBLAS
// rounds to bfloat16, accumulating in float32
// (CUBLAS_COMPUTE_32F_FAST_16BF).
func (c *Context) gemmBF16(g *Gemm, ta, tb int32) error {
	if c.blas.cublasGemmEx == nil || c.blas.cublasGemmStridedBatchedEx == nil {
		return fmt.Errorf("cuda: bf16 products need cublasGemmEx and cublasGemmStridedBatchedEx, which %s lacks", c.blas.file)
	}
	alpha, beta := g.Alpha, g.Beta
	var rc int32
	call := "cublasGemmEx"
	if g.Batch == 1 {
		rc = c.blas.cublasGemmEx(c.handle, ta, tb, int32(g.M), int32(g.N), int32(g.K),
			&alpha, uintptr(g.A), cudaR32F, int32(g.LDA), uintptr(g.B), cudaR32F, int32(g.LDB),
			&beta, uintptr(g.C), cudaR32F, int32(g.LDC), cublasCompute32FFast16BF, cublasGemmDefault)
	} else {
		call = "cublasGemmStridedBatchedEx"
		rc = c.blas.cublasGemmStridedBatchedEx(c.handle, ta, tb, int32(g.M), int32(g.N), int32(g.K),
			&alpha, uintptr(g.A), cudaR32F, int32(g.LDA), int64(g.StrideA), uintptr(g.B), cudaR32F, int32(g.LDB), int64(g.StrideB),
			&beta, uintptr(g.C), cudaR32F, int32(g.LDC), int64(g.StrideC), int32(g.Batch), cublasCompute32FFast16BF, cublasGemmDefault)
	}
	if rc != 0 {
		return fmt.Errorf("cuda: %s(m=%d n=%d k=%d batch=%d, bf16 operands): %s", call, g.M, g.N, g.K, g.Batch, c.blas.describe(rc))
	}
	return nil
}
