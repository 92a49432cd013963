package rules

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
)

// The layout sweep: a parallel rule is claimed wherever its source is laid
// out validly, so it is evaluated at every combined layout of its inputs
// (docs/parallel.md, "Soundness"). Each input takes every layout whose
// per-dimension degrees, sum degree and copy degree are each 1, g or g²,
// all together, at degree g. Z3 says why a rule is true; this says
// whether it is, with the exact (modular) kernels, and with float draws
// too where relu is involved.

// SweepConfig says how far a sweep goes.
type SweepConfig struct {
	// Whole are the degrees at which every assignment of layouts is tried,
	// as long as the search stays within MaxSteps; Sampled those at which
	// Samples random assignments are. A rule written at concrete degrees
	// is swept at those only, as a whole.
	Whole, Sampled []int
	MaxSteps       int // shape inferences a whole search may take before it samples instead
	Samples        int // assignments under which the source type-checks, per sampled degree
	// MaxElements bounds the elements of one evaluation (inputs and every
	// value, both sides) at the Whole degrees, SampledElements at the
	// Sampled ones; larger assignments are counted, not evaluated.
	MaxElements, SampledElements int
	Seed                         uint64
	// BothValid weakens the claim to an axiom's: the sides are equal where
	// both are laid out validly, so assignments under which the target is
	// not are passed over rather than counted against the rule.
	BothValid bool
	// CutsOnly leaves partial sums and copies out of the layouts: a reading
	// without them (FlexFlowReading) takes per-dimension degrees alone.
	CutsOnly bool
	// AsWritten sweeps a rule written at concrete degrees (an axiom's
	// instance) at the layouts of every degree of Whole and Sampled, not at
	// its own degree only.
	AsWritten bool
	// Int and Float draw input number i at shape s: exact values, and float
	// draws for rules with relu (stream 0 uniform, 1 one-signed). Each must
	// draw one stream per input (and float stream): its values at a shape
	// of n elements are the stream's first n, whatever the shape. A sweep
	// keeps each input's longest draw and hands out prefixes of it
	// (drawCache), read-only.
	Int   func(i int, s Shape) *IntTensor
	Float func(stream uint64, i int, s Shape) *FloatTensor
}

// DefaultSweep is the sweep a release is held to: every assignment at
// degrees 2 and 3, samples at 4 and 8.
func DefaultSweep() SweepConfig {
	return SweepConfig{Whole: []int{2, 3}, Sampled: []int{4, 8}, MaxSteps: 40_000_000, Samples: 200,
		MaxElements: 1 << 23, SampledElements: 1 << 18, Seed: 1}
}

// Mismatch is how a rule fails at a layout.
type Mismatch int

const (
	// TargetIllLaidOut: the source type-checks and the target does not.
	TargetIllLaidOut Mismatch = iota + 1
	// LayoutDiffers: both type-check, and an output is laid out differently.
	LayoutDiffers
	// ValueDiffers: an output's pieces differ.
	ValueDiffers
)

func (m Mismatch) String() string {
	switch m {
	case TargetIllLaidOut:
		return "target ill-laid-out"
	case LayoutDiffers:
		return "layout differs"
	case ValueDiffers:
		return "value differs"
	}
	return "none"
}

// LayoutCounterexample is an assignment of input layouts at which a rule
// fails.
type LayoutCounterexample struct {
	Degree int
	Inputs []Shape
	Kind   Mismatch
	Output int
	// Why says what differs: the target's shape error, the two layouts, or
	// the element and its two values.
	Why string
}

func (c *LayoutCounterexample) String() string {
	parts := make([]string, len(c.Inputs))
	for i, s := range c.Inputs {
		parts[i] = inputName(i) + ":" + s.String()
	}
	return fmt.Sprintf("at d=%d %s: %s", c.Degree, strings.Join(parts, " "), c.Why)
}

// SweepResult is what a sweep found.
type SweepResult struct {
	Evaluated int // assignments at which both sides were evaluated and agreed
	TooLarge  int // assignments above MaxElements, not evaluated
	// OverPieces counts the assignments whose target would hold more than
	// MaxPieces pieces where the source does not: a bound of ours, not a
	// fault of the rule; not evaluated.
	OverPieces int
	// SampledAt lists the degrees sampled, by the config or because the
	// whole search ran past MaxSteps.
	SampledAt      []int
	Counterexample *LayoutCounterexample
}

// Sweep evaluates r at every combined layout of its inputs (see
// SweepConfig). The rule needs input shapes: their ranks and extents (not
// their layouts) are kept, scaled so that each layout divides them.
func (r *Rule) Sweep(ctx context.Context, cfg SweepConfig) (SweepResult, error) {
	var res SweepResult
	if len(r.InputShapes) != r.NumInputs {
		return res, fmt.Errorf("rule records no input shapes")
	}
	scratch := &sweepScratch{}
	whole, sampled := cfg.Whole, cfg.Sampled
	if own := concreteDegrees(r); len(own) > 0 && !cfg.AsWritten {
		whole, sampled = own, nil
	}
	for _, g := range whole {
		if err := r.sweepAt(ctx, cfg, g, false, scratch, &res); err != nil || res.Counterexample != nil {
			return res, err
		}
	}
	for _, g := range sampled {
		if err := r.sweepAt(ctx, cfg, g, true, scratch, &res); err != nil || res.Counterexample != nil {
			return res, err
		}
	}
	return res, nil
}

// concreteDegrees lists the degrees above 1 of a rule written at concrete
// ones (without the degree variable), in increasing order; none for a
// d-rule or one without degrees.
func concreteDegrees(r *Rule) []int {
	if r.HasDegreeVar() {
		return nil
	}
	var out []int
	r.EachDegree(func(d int) {
		if d > 1 && !slices.Contains(out, d) {
			out = append(out, d)
		}
	})
	slices.Sort(out)
	return out
}

// sweepScratch holds the values of a sweep's evaluations, at every degree.
type sweepScratch struct {
	ints  Scratch[uint32]
	reals Scratch[float64]
}

// sweep is one degree's search.
type sweep struct {
	cfg   SweepConfig
	limit int   // the elements one evaluation may hold
	rule  *Rule // at degree g
	g     int
	base  []Shape // the inputs' extents over their common divisor, no layout
	// big is the scale at which candidates are shaped: every scale tried
	// divides it, so an assignment that type-checks at some scale tried
	// type-checks at big.
	big     int
	piece   bool // relu is involved: float draws too
	draws   drawCache
	scratch *sweepScratch
	res     *SweepResult
	err     error
}

func (r *Rule) sweepAt(ctx context.Context, cfg SweepConfig, g int, sample bool, scratch *sweepScratch, res *SweepResult) error {
	s := &sweep{cfg: cfg, rule: r, g: g, res: res, scratch: scratch, piece: r.Src.Piecewise() || r.Dst.Piecewise(), limit: cfg.MaxElements}
	if sample {
		s.limit = cfg.SampledElements
	}
	if r.HasDegreeVar() {
		s.rule = r.WithDegree(g)
	}
	s.base = commonBase(r.InputShapes)
	unit := g
	s.rule.EachDegree(func(d int) { unit = lcm(unit, max(d, 1)) })
	s.big = lcm(2, unit*unit) * pow(unit, 4)
	candidates := make([][]Shape, r.NumInputs)
	for i, b := range s.base {
		candidates[i] = combinedLayouts(b, g, s.big, cfg.CutsOnly)
	}
	visit := func(in []Shape) bool {
		if err := ctx.Err(); err != nil {
			s.err = err
			return false
		}
		s.check(in)
		return s.err == nil && res.Counterexample == nil
	}
	if !sample && eachLayout(&s.rule.Src, candidates, cfg.MaxSteps, visit) {
		return s.err
	}
	if s.err != nil || res.Counterexample != nil {
		return s.err
	}
	res.SampledAt = append(res.SampledAt, g)
	s.sample(candidates, visit)
	return s.err
}

// sample draws cfg.Samples assignments under which the source type-checks
// (of at most 50 times as many tries).
func (s *sweep) sample(candidates [][]Shape, visit func([]Shape) bool) {
	rng := rand.New(rand.NewPCG(s.cfg.Seed, uint64(s.g)))
	in := make([]Shape, len(candidates))
	found := 0
	for try := 0; try < 50*s.cfg.Samples && found < s.cfg.Samples; try++ {
		for i, c := range candidates {
			in[i] = c[rng.IntN(len(c))]
		}
		if _, err := s.rule.Src.InferShapes(in); err != nil {
			continue
		}
		found++
		if !visit(slices.Clone(in)) {
			return
		}
	}
}

// commonBase returns the input shapes without layout, each extent divided
// by the greatest common divisor of all: the ratios a rule's shapes may
// rely on (a concat's operands, a linear's features) survive every scale.
func commonBase(in []Shape) []Shape {
	g := 0
	for _, s := range in {
		for i := 0; i < s.Rank; i++ {
			g = gcd(g, s.Dims[i])
		}
	}
	out := make([]Shape, len(in))
	for k, s := range in {
		out[k] = NewShape(s.DimList()...)
		for i := 0; i < s.Rank && g > 0; i++ {
			out[k].Dims[i] /= g
		}
	}
	return out
}

// combinedLayouts lists every layout of b at degree g, its extents scaled
// by big: each dimension's degree, the sum degree and the copy degree (not
// with cutsOnly) each 1, g or g², together. Layouts of more than MaxPieces
// pieces are left out.
func combinedLayouts(b Shape, g, big int, cutsOnly bool) []Shape {
	factors := []int{1, g, g * g}
	features := b.Rank + 2
	if cutsOnly {
		features = b.Rank
	}
	var out []Shape
	for code := 0; code < pow(len(factors), features); code++ {
		s := b
		for i := 0; i < s.Rank; i++ {
			s.Dims[i] *= big
		}
		c := code
		for f := 0; f < features; f++ {
			v := factors[c%len(factors)]
			c /= len(factors)
			switch {
			case f < b.Rank:
				s.Degrees[f] = v
			case f == b.Rank:
				s.Sum = v
			default:
				s.Copy = v
			}
		}
		s.normalizeLayout()
		if s.CheckLayout() == nil {
			out = append(out, s)
		}
	}
	return out
}

func pow(b, e int) int {
	n := 1
	for range e {
		n *= b
	}
	return n
}

// check evaluates the rule at one assignment of layouts (shaped at s.big):
// at the smallest scale at which both sides type-check. Where the target
// does not type-check even at s.big, the rule fails there, unless only
// both sides laid out validly are claimed (BothValid).
func (s *sweep) check(big []Shape) {
	if _, err := s.rule.Dst.InferShapes(big); err != nil {
		switch {
		case s.cfg.BothValid:
		case errors.Is(err, ErrTooManyPieces): // a bound of ours, not the rule's fault
			s.res.OverPieces++
		default:
			in, _ := s.smallest(big, false)
			if _, small := s.rule.Dst.InferShapes(in); small != nil {
				err = small // the same failure, at the sizes reported
			}
			s.fail(in, TargetIllLaidOut, 0, "the source type-checks and the target does not: "+err.Error())
		}
		return
	}
	in, ok := s.smallest(big, true)
	if !ok {
		return
	}
	if s.elements(in) > s.limit {
		s.res.TooLarge++
		return
	}
	src, _ := s.rule.Src.InferShapes(in)
	dst, _ := s.rule.Dst.InferShapes(in)
	for k := range src {
		if !src[k].SameDims(dst[k]) {
			s.fail(in, LayoutDiffers, k, fmt.Sprintf("output %d is %s on the source and %s on the target", k, src[k], dst[k]))
			return
		}
	}
	if s.exactDiffers(in) || s.piece && s.floatDiffers(in) {
		return
	}
	s.res.Evaluated++
}

// smallest rescales an assignment to small extents at which the source
// type-checks, and the target too when both is set. First each dimension
// on its own: the least multiple of its base extent that its degree
// divides (at least 2), times 1, 2, g, 2g, g², … (a rule may cut what is
// cut already). Operands a rule requires equal are laid out alike wherever the
// source type-checks, so they get equal extents. Failing that, every
// extent by one common factor: the least that all the layouts divide, or
// a multiple of it that divides s.big. Without either it returns the
// assignment as it is.
func (s *sweep) smallest(big []Shape, both bool) ([]Shape, bool) {
	fits := func(in []Shape) bool {
		if _, err := s.rule.Src.InferShapes(in); err != nil {
			return false
		}
		_, err := s.rule.Dst.InferShapes(in)
		return err == nil || !both
	}
	own := func(k, i int) int {
		d, b := big[k].Degree(i), s.base[k].Dims[i]
		e := b * (d / gcd(d, b))
		if e < 2 {
			e *= 2
		}
		return e
	}
	for _, m := range s.multipliers() {
		if in := s.sized(big, func(k, i int) int { return own(k, i) * m }); fits(in) {
			return shrinkExtents(in, below(own), fits), true
		}
	}
	f := 1
	for k, b := range s.base {
		for i := 0; i < b.Rank; i++ {
			d := big[k].Degree(i)
			f = lcm(f, d/gcd(d, b.Dims[i]))
		}
	}
	if f == 1 {
		f = 2
	}
	for scale := f; scale <= s.big; scale += f {
		if s.big%scale != 0 {
			continue
		}
		if in := s.sized(big, func(k, i int) int { return s.base[k].Dims[i] * scale }); fits(in) {
			return shrinkExtents(in, below(own), fits), true
		}
	}
	return big, false
}

// shrinkExtents lowers dimensions of a fitting assignment to smaller
// extents where it still fits: options lists a dimension's candidates,
// least first (those not below its extent are passed over). First all
// dimensions of one extent together (a convolution's input channels must
// stay equal to its kernel's), or all but one, each taking its j-th
// candidate; then each alone. A common multiplier scales every dimension, but usually only
// some need it: a batch cut in 3 has no need of a 9x9 convolution kernel,
// which costs 81 times a 3x3 one.
func shrinkExtents(in []Shape, options func(k, i int) []int, fits func([]Shape) bool) []Shape {
	type dim struct{ k, i int }
	opts := map[dim][]int{}
	try := func(dims []dim, j int) bool {
		was := make([]int, len(dims))
		for m, d := range dims {
			was[m] = in[d.k].Dims[d.i]
			if o := opts[d]; j < len(o) {
				in[d.k].Dims[d.i] = o[j]
			}
		}
		if fits(in) {
			return true
		}
		for m, d := range dims {
			in[d.k].Dims[d.i] = was[m]
		}
		return false
	}
	// first tries each candidate index in turn, least first.
	first := func(dims []dim) bool {
		longest := 0
		for _, d := range dims {
			longest = max(longest, len(opts[d]))
		}
		for j := range longest {
			if try(dims, j) {
				return true
			}
		}
		return false
	}
	// groups lists the dimensions that can shrink, by extent, largest
	// first.
	groups := func() [][]dim {
		byExtent := map[int][]dim{}
		var extents []int
		for k := range in {
			for i := 0; i < in[k].Rank; i++ {
				d, e := dim{k, i}, in[k].Dims[i]
				if opts[d] = slices.DeleteFunc(options(k, i), func(o int) bool { return o >= e }); len(opts[d]) == 0 {
					continue
				}
				if _, ok := byExtent[e]; !ok {
					extents = append(extents, e)
				}
				byExtent[e] = append(byExtent[e], d)
			}
		}
		slices.Sort(extents)
		out := make([][]dim, len(extents))
		for j, e := range extents {
			out[len(extents)-1-j] = byExtent[e]
		}
		return out
	}
	// Shrinking a group to a common extent can leave some of it above
	// what it needs: group again until nothing shrinks.
	for shrunk := true; shrunk; {
		shrunk = false
		for _, group := range groups() {
			if first(group) {
				shrunk = true
				continue
			}
			if len(group) < 3 {
				continue
			}
			// One of the group may need its extent (a cut dimension): the
			// rest without it.
			for leave := range group {
				if first(slices.Concat(group[:leave], group[leave+1:])) {
					shrunk = true
					break
				}
			}
		}
	}
	for k := range in {
		for i := 0; i < in[k].Rank; i++ {
			d := dim{k, i}
			opts[d] = slices.DeleteFunc(opts[d], func(e int) bool { return e >= in[k].Dims[i] })
			first([]dim{d})
		}
	}
	return in
}

// below offers a dimension's own least extent where it is smaller than
// the one it has.
func below(own func(k, i int) int) func(k, i int) []int {
	return func(k, i int) []int { return []int{own(k, i)} }
}

// multipliers are the factors smallest scales every dimension by, least
// first: 1, g, g², g³, each followed by its double where that comes before
// the next (a cut by g of a dimension of extent 2 needs only g/2 more).
func (s *sweep) multipliers() []int {
	var ms []int
	for m := 1; m <= s.g*s.g*s.g; m *= s.g {
		ms = append(ms, m)
		if 2 < s.g {
			ms = append(ms, 2*m)
		}
	}
	return ms
}

// sized is an assignment with extent(k, i) for dimension i of input k.
func (s *sweep) sized(big []Shape, extent func(k, i int) int) []Shape {
	in := make([]Shape, len(big))
	for k, b := range big {
		in[k] = b
		for i := 0; i < b.Rank; i++ {
			in[k].Dims[i] = extent(k, i)
		}
	}
	return in
}

// elements counts the elements of the inputs and of every value both
// sides compute (partial sums each whole).
func (s *sweep) elements(in []Shape) int {
	n := 0
	for _, x := range in {
		n += x.Size() * x.SumDegree()
	}
	for _, g := range []*Graph{&s.rule.Src, &s.rule.Dst} {
		shapes, err := g.NodeShapes(in)
		if err != nil {
			return math.MaxInt
		}
		for _, out := range shapes {
			for _, x := range out {
				n += x.Size() * x.SumDegree()
			}
		}
	}
	return n
}

func (s *sweep) exactDiffers(in []Shape) bool {
	xs := make([]*IntTensor, len(in))
	for i, x := range in {
		xs[i] = s.draws.int(s.cfg.Int, i, x)
	}
	defer s.scratch.ints.Recycle()
	a, errA := EvaluateWith(&s.rule.Src, IntKernelOf, xs, &s.scratch.ints)
	b, errB := EvaluateWith(&s.rule.Dst, IntKernelOf, xs, &s.scratch.ints)
	if errA != nil || errB != nil {
		s.err = fmt.Errorf("evaluate at %v: %v %v", in, errA, errB)
		return true
	}
	for o := range a {
		for k, v := range a[o].Data {
			if w := b[o].Data[k]; v != w {
				s.fail(in, ValueDiffers, o, fmt.Sprintf("output %d (%s) element %d: source %d, target %d (exact, mod 2^31-1)", o, a[o].Shape, k, v, w))
				return true
			}
		}
	}
	return false
}

// floatDiffers compares the sides on a uniform and a one-signed float
// draw: relu identities can hold in one arithmetic and not the other.
func (s *sweep) floatDiffers(in []Shape) bool {
	defer s.scratch.reals.Recycle()
	for stream := uint64(0); stream < 2; stream++ {
		xs := make([]*FloatTensor, len(in))
		for i, x := range in {
			xs[i] = s.draws.float(s.cfg.Float, stream, i, x)
		}
		a, errA := EvaluateWith(&s.rule.Src, FloatKernelOf, xs, &s.scratch.reals)
		b, errB := EvaluateWith(&s.rule.Dst, FloatKernelOf, xs, &s.scratch.reals)
		if errA != nil || errB != nil {
			s.err = fmt.Errorf("evaluate at %v: %v %v", in, errA, errB)
			return true
		}
		if s.floatsDiffer(in, stream, a, b) {
			return true
		}
	}
	return false
}

// floatsDiffer compares the sides' outputs on one float draw, and fails
// the sweep at the first element that differs.
func (s *sweep) floatsDiffer(in []Shape, stream uint64, a, b []*FloatTensor) bool {
	for o := range a {
		for k, v := range a[o].Data {
			w := b[o].Data[k]
			// The builtin max inlines; math.Max, the same on every
			// value, is a call per element.
			if v != w && math.Abs(v-w) > 1e-9*max(1, math.Abs(v), math.Abs(w)) {
				s.fail(in, ValueDiffers, o, fmt.Sprintf("output %d (%s) element %d: source %.6g, target %.6g (float draw %d)", o, a[o].Shape, k, v, w, stream))
				return true
			}
		}
	}
	return false
}

func (s *sweep) fail(in []Shape, kind Mismatch, output int, why string) {
	s.res.Counterexample = &LayoutCounterexample{Degree: s.g, Inputs: in, Kind: kind, Output: output, Why: why}
}

// drawCache keeps, per input and float stream, the longest draw a sweep
// has made. A draw at any shape is a prefix of its input's stream
// (SweepConfig.Int), so each shape the sweep asks for is a slice of it:
// the same values as a fresh draw, without drawing, which cost the sweep
// about what evaluating does. Evaluation only reads its inputs, so the
// slices are handed out as they are. A draw of more than
// drawCacheElements elements is not kept.
type drawCache struct {
	ints   prefixes[int, uint32]
	floats prefixes[drawStream, float64]
}

// drawStream names a float draw's stream: the float stream and the input.
type drawStream struct {
	stream uint64
	input  int
}

// drawCacheElements bounds the elements kept per input and stream: 8 MiB
// of exact values, 16 MiB of floats.
const drawCacheElements = 1 << 21

// prefixes keeps the longest draw of each stream.
type prefixes[K comparable, T any] map[K][]T

// get returns the first n values of stream k, drawing (with draw, which
// takes a length) only when the kept draw is shorter: then at least twice
// as long, so that a sweep of growing shapes draws each stream a few
// times only. A draw of more than drawCacheElements is not kept.
func (p *prefixes[K, T]) get(k K, n int, draw func(n int) []T) []T {
	if n > drawCacheElements {
		return draw(n)
	}
	buf := (*p)[k]
	if len(buf) < n {
		buf = draw(min(max(n, 2*len(buf)), drawCacheElements))
		if *p == nil {
			*p = prefixes[K, T]{}
		}
		(*p)[k] = buf
	}
	return buf[:n:n]
}

func (c *drawCache) int(draw func(int, Shape) *IntTensor, i int, s Shape) *IntTensor {
	data := c.ints.get(i, s.Size()*s.SumDegree(), func(n int) []uint32 { return draw(i, NewShape(n)).Data })
	return &IntTensor{Shape: s, Data: data}
}

func (c *drawCache) float(draw func(uint64, int, Shape) *FloatTensor, stream uint64, i int, s Shape) *FloatTensor {
	data := c.floats.get(drawStream{stream, i}, s.Size()*s.SumDegree(), func(n int) []float64 { return draw(stream, i, NewShape(n)).Data })
	return &FloatTensor{Shape: s, Data: data}
}
