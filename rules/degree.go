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

// BaseDegree is the degree d-rules' input shapes are written at.
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
// every dimension multiplied by one common factor. One factor keeps the
// sizes' equalities and ratios, which the rule's shapes may rely on (a
// concat's operands, a linear's features). The factor is the smallest that
// makes every size a multiple of multiple (24 serves degrees 2, 3, 4 and
// 8) and under which both sides of the rule at degree d are well laid out:
// a dimension cut twice, 4 = 2^2 at degree 2, needs d^2 at degree d.
// Images and kernels are then shrunk (shrinkAtDegree).
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
	at := r.WithDegree(d)
	var err error
	for grow := 1; grow <= d*d*d*d; grow *= d {
		var shapes []Shape
		if shapes, err = r.scaledInputs(d, factor*grow); err != nil {
			continue
		}
		if _, err = at.Src.InferShapes(shapes); err != nil {
			continue
		}
		if _, err = at.Dst.InferShapes(shapes); err == nil {
			return r.shrinkAtDegree(at, shapes, factor*grow), nil
		}
	}
	return nil, fmt.Errorf("at degree %d: %w", d, err)
}

// shrinkAtDegree takes the dimensions of rank-4 inputs (images and
// kernels), which are the recorded extents times scale, back to smaller
// multiples of the recorded extents where both sides still type-check
// (shrinkExtents): an image's 5×5 need not grow to 120×120, nor its
// convolution to 120⁴ cells, because its batch is cut. Other inputs keep
// the common factor and so the multiple of the caller.
func (r *Rule) shrinkAtDegree(at *Rule, shapes []Shape, scale int) []Shape {
	var factors []int
	for f := 1; f < scale; f++ {
		if scale%f == 0 {
			factors = append(factors, f)
		}
	}
	options := func(k, i int) []int {
		if shapes[k].Rank != 4 {
			return nil
		}
		out := make([]int, len(factors))
		for j, f := range factors {
			out[j] = r.InputShapes[k].Dims[i] * f
		}
		return out
	}
	return shrinkExtents(shapes, options, func(in []Shape) bool {
		if _, err := at.Src.InferShapes(in); err != nil {
			return false
		}
		_, err := at.Dst.InferShapes(in)
		return err == nil
	})
}

// scaledInputs rewrites the input shapes' layouts for degree d and
// multiplies every dimension by factor.
func (r *Rule) scaledInputs(d, factor int) ([]Shape, error) {
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
			return nil, fmt.Errorf("input %s: %w", inputName(k), err)
		}
		out[k] = plain
	}
	return out, nil
}

// InferShapes infers the graph's output shapes from its input shapes, or
// says which node is ill-shaped.
func (g *Graph) InferShapes(inputs []Shape) ([]Shape, error) {
	results, err := g.NodeShapes(inputs)
	if err != nil {
		return nil, err
	}
	outs := make([]Shape, len(g.Outputs))
	for i, o := range g.Outputs {
		if o.IsInput() {
			outs[i] = inputs[o.Input()]
		} else {
			outs[i] = results[o.Node][o.Out]
		}
	}
	return outs, nil
}

// NodeShapes infers the output shapes of every node, in order, or says
// which node is ill-shaped.
func (g *Graph) NodeShapes(inputs []Shape) ([][]Shape, error) {
	if len(inputs) != g.NumInputs {
		return nil, fmt.Errorf("graph has %d inputs, got %d shapes", g.NumInputs, len(inputs))
	}
	results := make([][]Shape, len(g.Nodes))
	for i, n := range g.Nodes {
		var in []Shape
		for _, a := range n.Args {
			if a.IsInput() {
				in = append(in, inputs[a.Input()])
			} else {
				in = append(in, results[a.Node][a.Out])
			}
		}
		if n.Op.IsConstant() {
			if n.ConstShape == nil {
				return nil, fmt.Errorf("node %d (%s): constant shape unknown", i, n.Op.Name)
			}
			in = []Shape{*n.ConstShape}
		}
		out, err := n.Op.InferShapes(n.Params, in)
		if err != nil {
			return nil, &nodeShapeError{node: i, err: err}
		}
		results[i] = out
	}
	return results, nil
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
func (g *Graph) WithDegreeVar(d int) *Graph { return g.replaceDegree(d, DegreeVar) }

// ParallelPool is the parallel set's input pool at degree d, every layout
// factor d. FlexFlow's parallel rules are about rank-3 activations and
// linear weights (in, out). So the pool has:
//   - four activations x (u, u, u), as concat and ewadd commute over four;
//   - two weights w (u, u), so a linear distributes over a pair;
//   - activations already laid out: partial sums (xs), copies (xc), and cut
//     along each dimension (x0, x1, x2);
//   - weights cut along each dimension (w0, w1) and copied (wc);
//   - two NCHW images i (u, u, 5, 5) and two 3×3 kernels k (u, u, 3, 3),
//     for conv2d, the pools and batchnorm, and as (B, H, S, E) tensors
//     for attention. Their spatial sizes are TASO's 5×5 and
//     3×3, not u: a 3×3 window straddles any spatial cut, so only the
//     batch and channels are worth cutting, and u⁴ cells would be slow;
//   - one index vector n (u), for embedding: the weights serve as its
//     tables.
//
// The laid-out inputs find rules about what a parallel operator left
// behind, such as reduce(x) + reduce(y) = reduce(x + y), with inputs in
// any layout. Every size is u: the least common multiple of d and 2
// (BaseDegree), doubled until it is at least 4. So d divides it, shapes
// written at degree 2 stay valid (ShapeAtDegree), and tensors stay small.
// Concat and split take axes 0 to 2. docs/parallel.md tells the story.
func ParallelPool(d int) Pool {
	u := lcm(BaseDegree, d)
	for u < 4 {
		u *= 2
	}
	laid := func(s Shape, class string, copies int, role Role, layout func(*Shape)) InputClass {
		layout(&s)
		return InputClass{Name: class, Shape: s, Copies: copies, Role: role}
	}
	plain := func(*Shape) {}
	act, weight := NewShape(u, u, u), NewShape(u, u)
	cut := func(dim int) func(*Shape) { return func(s *Shape) { s.Degrees[dim] = d } }
	classes := []InputClass{
		laid(act, "x", 4, RoleData, plain),
		laid(weight, "w", 2, RoleWeight, plain),
		laid(act, "xs", 2, RoleData, func(s *Shape) { s.Sum = d }),
		laid(act, "xc", 1, RoleData, func(s *Shape) { s.Copy = d }),
	}
	for dim := 0; dim < act.Rank; dim++ {
		classes = append(classes, laid(act, fmt.Sprintf("x%d", dim), 2, RoleData, cut(dim)))
	}
	for dim := 0; dim < weight.Rank; dim++ {
		classes = append(classes, laid(weight, fmt.Sprintf("w%d", dim), 1, RoleWeight, cut(dim)))
	}
	classes = append(classes, laid(weight, "wc", 1, RoleWeight, func(s *Shape) { s.Copy = d }))
	classes = append(classes,
		laid(NewShape(u, u, 5, 5), "i", 2, RoleData, plain),
		laid(NewShape(u, u, 3, 3), "k", 2, RoleWeight, plain),
		laid(NewShape(u), "n", 1, RoleData, plain))
	axes := []int{0, 1, 2}
	return Pool{Classes: classes, Params: map[string][]int{"concat.axis": axes, "split.axis": axes}}
}
