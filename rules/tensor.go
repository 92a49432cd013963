package rules

import "math/bits"

// Prime is the modulus of the exact integer semantics (DESIGN.md,
// Fingerprints): every linear identity holds exactly modulo a prime.
const Prime = 1<<31 - 1

// Ring is the arithmetic an operator kernel is written against. Each kernel
// is written once, generically, and instantiated for the exact modular
// semantics (Mod) and the float64 semantics (Real).
type Ring[T any] interface {
	Zero() T
	One() T
	Add(a, b T) T
	Mul(a, b T) T
	// Relu keeps the non-negative values and zeroes the rest.
	Relu(a T) T
	// Max is the larger value in the signed reading.
	Max(a, b T) T
	// Recip is 1/n for a small positive integer n.
	Recip(n int) T
	// Dot is acc + Σ x[i]·w[i]; kernels call it once per contiguous run so
	// the arithmetic inlines in each instantiation.
	Dot(acc T, x, w []T) T
}

// Mod is arithmetic modulo Prime. Values v ≤ (Prime−1)/2 read as
// non-negative, the rest as v−Prime.
type Mod struct{}

func (Mod) Zero() uint32 { return 0 }
func (Mod) One() uint32  { return 1 }

func (Mod) Add(a, b uint32) uint32 {
	s := a + b // both < 2^31, so no overflow
	if s >= Prime {
		s -= Prime
	}
	return s
}

// Mul reduces with the Mersenne identity 2^31 ≡ 1 (mod 2^31−1).
func (Mod) Mul(a, b uint32) uint32 {
	p := uint64(a) * uint64(b)
	s := uint32(p&Prime) + uint32(p>>31)
	if s >= Prime {
		s -= Prime
	}
	return s
}

func (Mod) Relu(a uint32) uint32 {
	if a <= (Prime-1)/2 {
		return a
	}
	return 0
}

func (Mod) Max(a, b uint32) uint32 {
	if signedMod(a) >= signedMod(b) {
		return a
	}
	return b
}

func (Mod) Recip(n int) uint32 { return modInverse(uint64(n)) }

func (Mod) Dot(acc uint32, x, w []uint32) uint32 {
	// Each term p&Prime + p>>31 is ≡ p and < 2^32, so a sum of fewer than
	// 2^32 terms fits in 64 bits. Four sums run independently for speed.
	s0, s1, s2, s3 := uint64(acc), uint64(0), uint64(0), uint64(0)
	w = w[:len(x)]
	i := 0
	for ; i+4 <= len(x); i += 4 {
		p0, p1 := uint64(x[i])*uint64(w[i]), uint64(x[i+1])*uint64(w[i+1])
		p2, p3 := uint64(x[i+2])*uint64(w[i+2]), uint64(x[i+3])*uint64(w[i+3])
		s0 += p0&Prime + p0>>31
		s1 += p1&Prime + p1>>31
		s2 += p2&Prime + p2>>31
		s3 += p3&Prime + p3>>31
	}
	for ; i < len(x); i++ {
		p := uint64(x[i]) * uint64(w[i])
		s0 += p&Prime + p>>31
	}
	return uint32((s0%Prime + s1%Prime + s2%Prime + s3%Prime) % Prime)
}

func signedMod(v uint32) int64 {
	if v <= (Prime-1)/2 {
		return int64(v)
	}
	return int64(v) - Prime
}

// modInverse is n^(P−2) mod P (Fermat).
func modInverse(n uint64) uint32 {
	result, base, e := uint64(1), n%Prime, uint64(Prime-2)
	for e > 0 {
		if e&1 == 1 {
			result = result * base % Prime
		}
		base = base * base % Prime
		e >>= 1
	}
	return uint32(result)
}

// ModFromInt maps a signed integer into the ring.
func ModFromInt(v int64) uint32 {
	v %= Prime
	if v < 0 {
		v += Prime
	}
	return uint32(v)
}

// Real is ordinary float64 arithmetic.
type Real struct{}

func (Real) Zero() float64            { return 0 }
func (Real) One() float64             { return 1 }
func (Real) Add(a, b float64) float64 { return a + b }
func (Real) Mul(a, b float64) float64 { return a * b }

// Relu and Max use the builtin max, which treats NaN and signed zeros as
// math.Max does and inlines where math.Max is a call.
func (Real) Relu(a float64) float64   { return max(a, 0) }
func (Real) Max(a, b float64) float64 { return max(a, b) }
func (Real) Recip(n int) float64      { return 1 / float64(n) }

func (Real) Dot(acc float64, x, w []float64) float64 {
	w = w[:len(x)]
	for i, a := range x {
		acc += a * w[i]
	}
	return acc
}

// Tensor is a dense row-major tensor with its shape and split history.
// A parallel tensor holds one logical tensor per partial sum (layout.go).
type Tensor[T any] struct {
	Shape Shape
	Data  []T
}

// NewTensor allocates a zero tensor of the given shape: one logical tensor
// per partial sum of its layout.
func NewTensor[T any](s Shape) *Tensor[T] {
	return &Tensor[T]{Shape: s, Data: make([]T, s.Size()*s.SumDegree())}
}

// Scratch recycles the values of evaluations. A sweep evaluates a rule at
// thousands of assignments of a few shapes each; allocating every value
// afresh made the allocator and the collector most of its cost. Buffers
// are kept by capacity, in powers of two, so that a value of another shape
// reuses one too. The zero Scratch is ready; a nil one allocates.
type Scratch[T any] struct {
	free [64][][]T // recycled buffers, by the log2 of their capacity
	used [][]T     // handed out since the last Recycle
	kept int       // elements on the free lists
}

// scratchElements bounds the elements a Scratch keeps for reuse.
const scratchElements = 1 << 22

// tensor hands out a zero tensor of shape s.
func (sc *Scratch[T]) tensor(s Shape) *Tensor[T] {
	n := s.Size() * s.SumDegree()
	if sc == nil || n == 0 {
		return NewTensor[T](s)
	}
	class := bits.Len(uint(n - 1))
	var d []T
	if l := sc.free[class]; len(l) > 0 {
		d, sc.free[class] = l[len(l)-1][:n], l[:len(l)-1]
		sc.kept -= cap(d)
		clear(d)
	} else {
		d = make([]T, n, 1<<class)
	}
	sc.used = append(sc.used, d)
	return &Tensor[T]{Shape: s, Data: d}
}

// Recycle takes back every tensor handed out since the last Recycle: the
// caller holds none of them any more.
func (sc *Scratch[T]) Recycle() {
	for _, d := range sc.used {
		if sc.kept+cap(d) <= scratchElements {
			class := bits.Len(uint(cap(d) - 1))
			sc.free[class] = append(sc.free[class], d)
			sc.kept += cap(d)
		}
	}
	clear(sc.used)
	sc.used = sc.used[:0]
}

// IntTensor and FloatTensor are the two instantiations the project uses.
type (
	IntTensor   = Tensor[uint32]
	FloatTensor = Tensor[float64]
)
