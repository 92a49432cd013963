package cuda

import (
	"errors"
	"fmt"
	"math"
)

// Activation is what an epilogue applies after the bias.
type Activation int

const (
	// ActNone applies nothing.
	ActNone Activation = iota
	// ActRelu is max(x, 0).
	ActRelu
	// ActGeluTanh is GELU's tanh approximation,
	// x/2·(1 + tanh(√(2/π)·(x + 0.044715·x³))): cuBLASLt's GELU, and
	// ONNX's Gelu with approximate="tanh" (not the exact, erf, Gelu).
	ActGeluTanh
)

func (a Activation) String() string {
	switch a {
	case ActNone:
		return "none"
	case ActRelu:
		return "relu"
	case ActGeluTanh:
		return "gelu(tanh)"
	}
	return fmt.Sprintf("Activation(%d)", int(a))
}

// EpilogueGemm is a single product (Batch 1) with cuBLASLt's
// epilogue: D = Act(Alpha·op(A)·op(B) + Bias), Bias (when HasBias)
// holding M floats, one per row of the column-major D, broadcast over
// its columns. In the runtime's row-major view that is one per output
// feature. Beta must be 0 and C is D.
type EpilogueGemm struct {
	Gemm
	HasBias bool
	Bias    Ptr // M floats when HasBias
	Act     Activation
}

// EpilogueGemmer is a Backend that fuses a bias and an activation into a
// product (cuBLASLt on the GPU, the Gemm loop in the emulator). The
// runtime type-asserts it; EpilogueError says whether it can be used.
type EpilogueGemmer interface {
	// EpilogueError is nil when EpilogueGemm works, else why not (no
	// cuBLASLt).
	EpilogueError() error
	// PrepareEpilogue chooses the algorithm for g's shape, epilogue and
	// precision, once per such shape; it reads no address of g (they may
	// be 0). An error wrapping ErrNoEpilogue says the shape is to run
	// unfused. It must come before a capture that replays g.
	PrepareEpilogue(g *EpilogueGemm) error
	// EpilogueGemm queues g; its shape must have been prepared.
	EpilogueGemm(g *EpilogueGemm) error
}

// ErrNoEpilogue says a product's epilogue cannot be fused for its shape
// (the library does not support it, or no algorithm's workspace fits);
// the product is then to run unfused.
var ErrNoEpilogue = errors.New("no fused epilogue for this shape")

// epilogueKey is what decides an epilogue plan: the sizes, the
// transpositions, whether there is a bias, the activation and the
// precision. Addresses are set per call.
type epilogueKey [11]int

func (g *EpilogueGemm) key() epilogueKey {
	b := func(x bool) int {
		if x {
			return 1
		}
		return 0
	}
	return epilogueKey{g.M, g.N, g.K, g.LDA, g.LDB, g.LDC, b(g.TransA), b(g.TransB), b(g.HasBias), int(g.Act), int(g.Precision)}
}

func (g *EpilogueGemm) String() string {
	t := func(x bool) string {
		if x {
			return "ᵀ"
		}
		return ""
	}
	bias := ""
	if g.HasBias {
		bias = " + bias"
	}
	return fmt.Sprintf("%s(A%s·B%s%s) m=%d n=%d k=%d lda=%d ldb=%d ldc=%d %s", g.Act, t(g.TransA), t(g.TransB), bias,
		g.M, g.N, g.K, g.LDA, g.LDB, g.LDC, g.Precision)
}

// checkShape validates what an epilogue product allows beyond a Gemm.
func (g *EpilogueGemm) checkShape() error {
	switch {
	case g.Batch != 1:
		return fmt.Errorf("cuda: %s: an epilogue product takes one matrix, not a batch of %d", g, g.Batch)
	case g.Beta != 0:
		return fmt.Errorf("cuda: %s: an epilogue product takes beta 0, not %v", g, g.Beta)
	case g.M < 1 || g.N < 1 || g.K < 1:
		return fmt.Errorf("cuda: %s: empty product", g)
	case g.Act < ActNone || g.Act > ActGeluTanh:
		return fmt.Errorf("cuda: %s: unknown activation", g)
	}
	return nil
}

// check validates the shape and the operands' allocations.
func (g *EpilogueGemm) check(allocs *allocTable) error {
	if err := g.checkShape(); err != nil {
		return err
	}
	if err := g.Gemm.check(allocs); err != nil {
		return fmt.Errorf("%w (%s)", err, g)
	}
	if g.HasBias && !allocs.contains(g.Bias, 4*g.M) {
		return fmt.Errorf("cuda: %s: Bias (%#x, %d floats) is not inside one allocation", g, uint64(g.Bias), g.M)
	}
	return nil
}

// applyEpilogue adds the bias to each row of the column-major m×n d
// (leading dimension ld) and applies act, by cuBLASLt's definition.
func applyEpilogue(d []float32, m, n, ld int, bias []float32, act Activation) {
	for j := range n {
		col := d[j*ld : j*ld+m]
		for i, v := range col {
			if bias != nil {
				v += bias[i]
			}
			switch act {
			case ActRelu:
				v = max(v, 0)
			case ActGeluTanh:
				x := float64(v)
				v = float32(x / 2 * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(x+0.044715*x*x*x))))
			}
			col[i] = v
		}
	}
}

// EpilogueError is nil: the emulator always fuses.
func (e *Emulator) EpilogueError() error { return nil }

// PrepareEpilogue only checks g's sizes: the emulator has one algorithm.
func (e *Emulator) PrepareEpilogue(g *EpilogueGemm) error {
	if err := e.lock(); err != nil {
		return err
	}
	defer e.mu.Unlock()
	return g.checkShape()
}

// EpilogueGemm runs the Gemm loop, then the bias and the activation.
func (e *Emulator) EpilogueGemm(g *EpilogueGemm) error {
	if err := e.lock(); err != nil {
		return err
	}
	defer e.mu.Unlock()
	if err := g.check(&e.allocs); err != nil {
		return err
	}
	copied := *g
	return e.queue(func() error {
		if err := e.gemm(&copied.Gemm); err != nil {
			return err
		}
		d, err := e.floatsAt(copied.C, (copied.N-1)*copied.LDC+copied.M)
		if err != nil {
			return err
		}
		var bias []float32
		if copied.HasBias {
			if bias, err = e.floatsAt(copied.Bias, copied.M); err != nil {
				return err
			}
		}
		applyEpilogue(d, copied.M, copied.N, copied.LDC, bias, copied.Act)
		return nil
	})
}

var _ EpilogueGemmer = (*Emulator)(nil)
