package optimizer

import (
	"math"
	"math/bits"
)

// exactSum adds and subtracts float64s exactly and rounds the total once,
// to nearest with ties to even: the total is the correctly rounded sum
// whatever the order, so that a neighbour's cost, found by taking g's
// total and replacing the prices a rewrite changed, is bit for bit the
// cost of the neighbour built and priced whole.
//
// Every finite float64 is m·2^(p-1074) for an integer m < 2^53 and a
// position p in [0, 2045]; the sum is kept as digits of 32 bits, digit k
// weighing 2^(32k-1074), each in an int64 so that additions need not
// carry: a float touches three digits and changes each by less than 2^32,
// so 2^30 additions fit before the digits must be normalized.
type exactSum struct {
	digits [sumDigits]int64
	// lo and hi bound the digits in use, [lo, hi); pending counts the
	// additions since the last normalization.
	lo, hi, pending int
	// The infinities and NaNs added, less those subtracted: they decide
	// the total, as in a float sum, and subtracting one undoes adding it.
	posInf, negInf, nan int
}

const (
	// sumDigits holds position 2045 plus 53 bits of mantissa, 31 bits of
	// offset within a digit and 31 bits of carries.
	sumDigits = 68
	digitBits = 32
	// normalizeEvery additions, the digits are carried: each addition
	// moves a digit by less than 2^32, and an int64 holds 2^62.
	normalizeEvery = 1 << 30
)

// add adds x to the sum.
func (s *exactSum) add(x float64) { s.addSigned(x, false) }

// sub subtracts x from the sum, undoing an add(x).
func (s *exactSum) sub(x float64) { s.addSigned(x, true) }

func (s *exactSum) addSigned(x float64, minus bool) {
	switch {
	case x == 0:
		return
	case math.IsNaN(x):
		s.nan += sign(minus)
		return
	case math.IsInf(x, 1):
		s.posInf += sign(minus)
		return
	case math.IsInf(x, -1):
		s.negInf += sign(minus)
		return
	}
	b := math.Float64bits(x)
	neg := b>>63 != 0 != minus
	exp := int(b >> 52 & 0x7ff)
	m := b & (1<<52 - 1)
	if exp == 0 {
		exp = 1 // subnormal: no implicit bit, the smallest exponent
	} else {
		m |= 1 << 52
	}
	p := exp - 1
	k, off := p/digitBits, uint(p%digitBits)
	lo, hi := m<<off, m>>(64-off) // m·2^off, 85 bits at most
	d := [3]int64{int64(lo & (1<<digitBits - 1)), int64(lo >> digitBits), int64(hi)}
	if neg {
		d[0], d[1], d[2] = -d[0], -d[1], -d[2]
	}
	if s.hi == 0 { // empty: lo and hi are not yet set
		s.lo, s.hi = k, k+3
	}
	s.lo, s.hi = min(s.lo, k), max(s.hi, k+3)
	s.digits[k] += d[0]
	s.digits[k+1] += d[1]
	s.digits[k+2] += d[2]
	if s.pending++; s.pending == normalizeEvery {
		s.normalize()
	}
}

// sign is +1 for an addition, -1 for a subtraction.
func sign(minus bool) int {
	if minus {
		return -1
	}
	return 1
}

// normalize carries each digit into the next, leaving every digit but
// the top one in [0, 2^32) and the top one in (-2^32, 2^32): the total
// is negative exactly when the top digit is.
func (s *exactSum) normalize() {
	s.pending = 0
	if s.hi == 0 {
		return
	}
	for k := s.lo; k < s.hi-1; k++ {
		c := s.digits[k] >> digitBits // floor, so that the digit left is not negative
		s.digits[k] -= c << digitBits
		s.digits[k+1] += c
	}
	for top := s.digits[s.hi-1]; top >= 1<<digitBits || top <= -1<<digitBits; top = s.digits[s.hi-1] {
		c := top >> digitBits
		s.digits[s.hi-1] -= c << digitBits
		s.digits[s.hi] += c
		s.hi++
	}
}

// round is the total rounded once to the nearest float64, ties to even;
// 0 for an empty or cancelled sum.
func (s exactSum) round() float64 {
	switch {
	case s.nan > 0 || s.posInf > 0 && s.negInf > 0:
		return math.NaN()
	case s.posInf > 0:
		return math.Inf(1)
	case s.negInf > 0:
		return math.Inf(-1)
	}
	s.normalize()
	neg := s.hi > 0 && s.digits[s.hi-1] < 0
	if neg {
		for k := s.lo; k < s.hi; k++ {
			s.digits[k] = -s.digits[k]
		}
		s.normalize()
	}
	for s.hi > s.lo && s.digits[s.hi-1] == 0 {
		s.hi--
	}
	if s.hi == s.lo {
		return 0
	}
	r := s.magnitude()
	if neg {
		return -r
	}
	return r
}

// magnitude rounds a normalized, positive sum whose top digit is not 0.
func (s *exactSum) magnitude() float64 {
	h := s.hi - 1
	digit := func(k int) uint64 {
		if k < s.lo {
			return 0
		}
		return uint64(s.digits[k])
	}
	// The top 96 bits, w, as hi:lo, and whether any bit below them is set.
	hi, lo := digit(h), digit(h-1)<<digitBits|digit(h-2)
	sticky := false
	for k := s.lo; k < h-2; k++ {
		sticky = sticky || s.digits[k] != 0
	}
	// q is w's top 63 bits: converting it rounds to 53 bits, and with a
	// discarded bit folded into its lowest bit (ten bits below the 53
	// kept), the rounding is that of the exact sum. A sum below 2^-1022,
	// where the result is subnormal, has at most 52 bits, which q holds
	// and Ldexp scales without rounding.
	shift := uint(bits.Len64(hi) + 64 - 63) // in [2, 33]
	q := hi<<(64-shift) | lo>>shift
	if lo&(1<<shift-1) != 0 || sticky {
		q |= 1
	}
	return math.Ldexp(float64(int64(q)), digitBits*(h-2)+int(shift)-1074)
}
