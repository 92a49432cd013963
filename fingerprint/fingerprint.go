// Package fingerprint hashes the outputs of a graph evaluated on
// deterministic inputs. A tensor's hash covers its shape, split history and
// values, and a graph's combines its outputs' in any order. The generator
// pairs graphs of equal fingerprint into candidate rules. docs/design.md
// ("Data flow", step 2) tells the long story.
package fingerprint

import (
	"encoding/binary"
	"math"
	"math/bits"
	"math/rand/v2"
	"slices"
	"unsafe"

	"github.com/zeebo/xxh3"

	"rulebook/rules"
)

// Tensor hashes one output tensor: its shape, split history and values.
func Tensor(t *rules.IntTensor) uint64 {
	var buf [64]byte
	meta := t.Shape.AppendEncoding(buf[:0])
	h := xxh3.New()
	_, _ = h.Write(meta)
	if len(t.Data) > 0 {
		_, _ = h.Write(unsafe.Slice((*byte)(unsafe.Pointer(&t.Data[0])), len(t.Data)*4))
	}
	return h.Sum64()
}

// Combine is the symmetric combination of output hashes: sorted, then
// hashed, so that the fingerprint does not depend on output order.
func Combine(hashes []uint64) uint64 {
	var small [8]uint64
	sorted := append(small[:0], hashes...)
	slices.Sort(sorted)
	buf := make([]byte, 8*len(sorted))
	for i, h := range sorted {
		binary.LittleEndian.PutUint64(buf[8*i:], h)
	}
	return xxh3.Hash(buf)
}

// Inputs makes deterministic input tensors from a seed. Stream separates
// independent draws (integers for fingerprints, floats for the check).
type Inputs struct {
	Seed uint64
}

func (in Inputs) rng(stream, index uint64) *rand.PCG {
	return rand.NewPCG(in.Seed, stream<<32|index)
}

// The draws below are rand.Rand's, taken from the PCG itself: through
// Rand's interface, drawing cost the layout sweep a seventh of its time.
// TestDrawsAreRandsOwn holds them to Rand's.

// primeThreshold is 2⁶⁴ mod Prime: a 128-bit product whose low half is
// below it is redrawn, so that each residue is equally likely (Lemire's
// method, as rand.Rand.Uint64N draws).
const primeThreshold = (math.MaxUint64 - rules.Prime + 1) % rules.Prime

// belowPrime draws uniformly from [0, Prime).
func belowPrime(src *rand.PCG) uint32 {
	hi, lo := bits.Mul64(src.Uint64(), rules.Prime)
	for lo < primeThreshold {
		hi, lo = bits.Mul64(src.Uint64(), rules.Prime)
	}
	return uint32(hi)
}

// unit draws uniformly from [0, 1), as rand.Rand.Float64 does.
func unit(src *rand.PCG) float64 {
	return float64(src.Uint64()<<11>>11) / (1 << 53)
}

// Int returns input number index with values uniform modulo the prime.
func (in Inputs) Int(index int, s rules.Shape) *rules.IntTensor {
	src := in.rng(1, uint64(index))
	t := rules.NewTensor[uint32](s)
	for i := range t.Data {
		t.Data[i] = belowPrime(src)
	}
	return t
}

// Float draws a check uses. Polynomial identities need only UniformDraws
// (a false one agrees on a random point with probability zero). Piecewise
// ones (relu, max) take PiecewiseDraws: uniform draws first, which catch
// identities that depend on the signs of computed values (relu of a·aᵀ
// holds only when its off-diagonal entries are positive, which one-signed
// inputs always make them), then one-signed draws, which catch identities
// that fail only when whole inputs are negative (a max-pooling window
// rarely is). Each catches its kind with probability about 1/2 per draw.
const (
	UniformDraws   = 2
	PiecewiseDraws = 16 + 32
)

// Draw returns the stream of check draw k: uniform for k < 16, one-signed
// after.
func Draw(k int) uint64 {
	if k < 16 {
		return uint64(2 * k)
	}
	return uint64(2*(k-16) + 1)
}

// Float returns input number index for float draw number stream (use
// distinct streams for independent tests). Even streams are uniform in
// [−1, 1]. Odd streams are one-signed: the whole tensor is positive or
// negative, values in [0.1, 1] in magnitude. Uniform draws alone let
// identities about relu or max pooling through, since a 3×3 window is
// almost never all negative.
func (in Inputs) Float(stream uint64, index int, s rules.Shape) *rules.FloatTensor {
	src := in.rng(2+stream, uint64(index))
	t := rules.NewTensor[float64](s)
	if stream%2 == 0 {
		for i := range t.Data {
			t.Data[i] = 2*unit(src) - 1
		}
		return t
	}
	sign := 1.0
	if rand.New(src).IntN(2) == 0 {
		sign = -1
	}
	for i := range t.Data {
		t.Data[i] = sign * (0.1 + 0.9*unit(src))
	}
	return t
}
