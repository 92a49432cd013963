package enumerate

import (
	"fmt"
	"math"

	"rulebook/fingerprint"
	"rulebook/rules"
)

// DegreeCheck says how FloatCheckAtDegree tests a rule.
type DegreeCheck struct {
	// Multiple is what every input size is grown to a multiple of (see
	// rules.Rule.InputShapesAtDegree); 24 serves degrees 2, 3, 4 and 8.
	Multiple int
	Seed     uint64
	// Tolerance is relative to max(1, |a|, |b|), as in Close.
	Tolerance float64
	// Draws is how many random draws to try: uniform ones first, then,
	// for a piecewise rule (relu), one-signed ones (fingerprint.Draw).
	// Zero means two of each kind.
	Draws int
}

// FloatCheckAtDegree evaluates a rule with the degree variable d at degree
// d on random float64 inputs, its input shapes scaled for d
// (rules.Rule.InputShapesAtDegree), and says where its two sides differ:
// piece for piece, so the outputs' layouts must be equal and every piece's
// values close. A nil error means the sides agree on every draw. The rule's
// input shapes must be written as a d-rule's are (at rules.BaseDegree); a
// rule with a concrete degree other than 2 is refused by the rewriting.
func FloatCheckAtDegree(r *rules.Rule, d int, c DegreeCheck) error {
	shapes, err := r.InputShapesAtDegree(d, c.Multiple)
	if err != nil {
		return fmt.Errorf("degree %d: %w", d, err)
	}
	at := r.WithDegree(d)
	in := fingerprint.Inputs{Seed: c.Seed}
	for k, stream := range checkStreams(c.Draws, at.Src.Piecewise() || at.Dst.Piecewise()) {
		xs := make([]*rules.FloatTensor, len(shapes))
		for i, s := range shapes {
			xs[i] = in.Float(stream, i, s)
		}
		src, err := rules.Evaluate(&at.Src, rules.FloatKernelOf, xs)
		if err != nil {
			return fmt.Errorf("degree %d: source: %w", d, err)
		}
		dst, err := rules.Evaluate(&at.Dst, rules.FloatKernelOf, xs)
		if err != nil {
			return fmt.Errorf("degree %d: target: %w", d, err)
		}
		for o := range src {
			if err := samePieces(src[o], dst[o], c.Tolerance); err != nil {
				return fmt.Errorf("degree %d, draw %d, output %d: %w", d, k, o, err)
			}
		}
	}
	return nil
}

// checkStreams lists the fingerprint streams of n uniform draws, then, for
// a piecewise rule, n one-signed ones.
func checkStreams(n int, piecewise bool) []uint64 {
	if n == 0 {
		n = 2
	}
	var out []uint64
	for k := 0; k < n; k++ {
		out = append(out, fingerprint.Draw(k))
	}
	if piecewise {
		for k := 0; k < n; k++ {
			out = append(out, fingerprint.Draw(16+k))
		}
	}
	return out
}

// samePieces says how two parallel tensors differ: their layouts, or the
// first element of a piece whose values are not within tol.
func samePieces(x, y *rules.FloatTensor, tol float64) error {
	if !x.Shape.SameDims(y.Shape) {
		return fmt.Errorf("source gives %s, target %s", x.Shape, y.Shape)
	}
	for i, a := range x.Data {
		b := y.Data[i]
		if math.Abs(a-b) > tol*math.Max(1, math.Max(math.Abs(a), math.Abs(b))) || math.IsNaN(a) != math.IsNaN(b) {
			return fmt.Errorf("element %d of %s: source %g, target %g", i, x.Shape, a, b)
		}
	}
	return nil
}
