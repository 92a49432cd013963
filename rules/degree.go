package rules

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Degrees at which rules and pools are written.
//
// A rule with the degree variable d (a "d-rule") holds at every degree, but
// its recorded input shapes (Text.Inputs) are concrete: they are written at
// BaseDegree. Every layout factor of such a shape (a dimension's pieces,
// the partial sums, the copies) is a power of BaseDegree, 2^k, and stands
// for d^k; the dimensions are sizes at which that layout is valid. Whoever
// evaluates a d-rule at degree d scales them with ShapeAtDegree (and grows
// the sizes until d^k divides them, see Rule.InputShapesAtDegree).
// ParallelPool is written the same way.

// BaseDegree is the degree d-rules' input shapes and ParallelPool are
// written at.
const BaseDegree = 2

// ParseDegrees reads a --degrees value: comma-separated integers from 2 to
// MaxDegree, without repeats (degree 1 is the identity and needs no rule).
// It returns them in increasing order.
func ParseDegrees(spec string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(spec, ",") {
		f = strings.TrimSpace(f)
		d, err := strconv.Atoi(f)
		if err != nil || d < 2 || d > MaxDegree {
			return nil, fmt.Errorf("degree %q: expected an integer from 2 to %d (degree 1 is the identity)", f, MaxDegree)
		}
		if slices.Contains(out, d) {
			return nil, fmt.Errorf("degree %d is listed twice", d)
		}
		out = append(out, d)
	}
	slices.Sort(out)
	return out, nil
}

// HasDegreeParams reports whether any operator of the set takes a parallel
// degree (ParamSpec.Degree): only then does a generation enumerate degrees.
func (r *Registry) HasDegreeParams() bool {
	for _, op := range r.Ops() {
		for _, p := range op.Params {
			if p.Degree {
				return true
			}
		}
	}
	return false
}

// ShapeAtDegree rewrites a layout written at degree from for degree to:
// every layout factor from^k becomes to^k. The dimensions are unchanged. A
// factor that is not a power of from has no meaning at another degree and
// is refused.
func ShapeAtDegree(s Shape, from, to int) (Shape, error) {
	if from == to {
		return s, nil
	}
	scale := func(f int) (int, error) {
		if f <= 1 {
			return f, nil
		}
		out := 1
		for f > 1 {
			if f%from != 0 {
				return 0, fmt.Errorf("shape %s: layout factor is not a power of degree %d", s, from)
			}
			f /= from
			out *= to
		}
		return out, nil
	}
	var err error
	for i := range s.Degrees {
		if s.Degrees[i], err = scale(s.Degrees[i]); err != nil {
			return Shape{}, err
		}
	}
	if s.Sum, err = scale(s.Sum); err != nil {
		return Shape{}, err
	}
	if s.Copy, err = scale(s.Copy); err != nil {
		return Shape{}, err
	}
	s.normalizeLayout()
	return s, nil
}

// InputShapesAtDegree returns the input shapes of a d-rule for evaluation
// at degree d: layouts rewritten from BaseDegree to d (ShapeAtDegree), and
// every dimension multiplied by one common factor, the smallest that makes
// each a multiple of multiple. One factor keeps the sizes' equalities and
// ratios, which the rule's shapes may rely on (a concat's operands, a
// linear's features); multiple must be one that the layouts at d divide
// (24 serves degrees 2, 3, 4 and 8).
func (r *Rule) InputShapesAtDegree(d, multiple int) ([]Shape, error) {
	if len(r.InputShapes) != r.NumInputs {
		return nil, fmt.Errorf("rule records no input shapes")
	}
	factor := 1
	for _, s := range r.InputShapes {
		for i := 0; i < s.Rank; i++ {
			factor = lcm(factor, multiple/gcd(s.Dims[i], multiple))
		}
	}
	out := make([]Shape, len(r.InputShapes))
	for k, s := range r.InputShapes {
		t, err := ShapeAtDegree(s, BaseDegree, d)
		if err != nil {
			return nil, fmt.Errorf("input %s: %w", inputName(k), err)
		}
		plain := NewShape(t.DimList()...)
		for i := 0; i < t.Rank; i++ {
			plain.Dims[i] *= factor
		}
		plain.Degrees, plain.Sum, plain.Copy = t.Degrees, t.Sum, t.Copy
		if err := plain.CheckLayout(); err != nil {
			return nil, fmt.Errorf("input %s at degree %d: %w", inputName(k), d, err)
		}
		out[k] = plain
	}
	return out, nil
}

func gcd(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

func lcm(a, b int) int { return a / gcd(a, b) * b }

// WithDegreeVar returns a copy of the graph with the degree variable in
// place of every degree parameter equal to d: the inverse of WithDegree
// for a graph whose degree parameters all equal d.
func (g *Graph) WithDegreeVar(d int) *Graph {
	out := *g
	out.Nodes = make([]Node, len(g.Nodes))
	for k, n := range g.Nodes {
		n.Params = append([]int(nil), n.Params...)
		for i, spec := range n.Op.Params {
			if spec.Degree && n.Params[i] == d {
				n.Params[i] = DegreeVar
			}
		}
		out.Nodes[k] = n
	}
	return &out
}

// ParallelPool is the parallel set's input pool for a generation at the
// given degrees, written at BaseDegree (Pool.AtDegree gives it at each
// degree). FlexFlow's parallel rules are about rank-3 activations and
// linear weights (in, out), so the pool has:
//   - three activations x (u, u, u): concat and ewadd meet over two, and a
//     third lets an operator distribute over a pair;
//   - two weights w (u, u);
//   - two activations holding partial sums (+sum d) and one holding copies
//     (+copy d), so that rules about reducing what a sharded linear left
//     (reduce(x) + reduce(y) = reduce(x + y)) are found from inputs.
//
// u is the least common multiple of the degrees (and 2, the base degree),
// doubled until it is at least 4: every enumerated degree divides every
// size, and tensors stay small.
func ParallelPool(degrees []int) Pool {
	u := BaseDegree
	for _, d := range degrees {
		u = lcm(u, d)
	}
	for u < 4 {
		u *= 2
	}
	act := NewShape(u, u, u)
	sums, copies := act, act
	sums.Sum, copies.Copy = BaseDegree, BaseDegree
	return Pool{Classes: []InputClass{
		{"x", act, 3, RoleData},
		{"w", NewShape(u, u), 2, RoleWeight},
		{"xs", sums, 2, RoleData},
		{"xc", copies, 1, RoleData},
	}}
}

// AtDegree returns the pool with its layouts, written at BaseDegree,
// rewritten for degree d.
func (p Pool) AtDegree(d int) (Pool, error) {
	out := Pool{Constants: p.Constants}
	for _, c := range p.Classes {
		s, err := ShapeAtDegree(c.Shape, BaseDegree, d)
		if err != nil {
			return Pool{}, fmt.Errorf("input class %s: %w", c.Name, err)
		}
		c.Shape = s
		out.Classes = append(out.Classes, c)
	}
	return out, nil
}
