package compare

import (
	"fmt"
	"math"
	"strings"

	"rulebook/enumerate"
	"rulebook/exchange"
	"rulebook/fingerprint"
	"rulebook/rules"
)

// FlexFlow applies each of its rules at the machine's degree, though its
// generator wrote them at degree 2. A parallel foreign rule is therefore
// judged at several degrees: its degree parameters, all equal, become the
// degree variable d, and the rule is float-tested at d = 2, 3 and 4, piece
// for piece, at every layout of its inputs (up to judgedLayouts) under which
// both sides type-check at its own degree. False at its own degree: refuted;
// true there but false at another: true at degree 2 only.

// JudgedDegrees are the degrees a parallel foreign rule is tested at, its
// own first.
var JudgedDegrees = []int{2, 3, 4}

const (
	// judgedLayouts bounds the input layouts a rule is tested at, at its
	// own degree; otherDegreeLayouts the first of them tested at other
	// degrees, where tensors are larger.
	judgedLayouts      = 8
	otherDegreeLayouts = 2
	// judgeSearchSteps bounds the search for those layouts.
	judgeSearchSteps = 20000
	// judgeTolerance is the float check's relative tolerance.
	judgeTolerance = 1e-9
)

// Judgement is what the degree test says of a parallel foreign rule:
// Relation is Falsified, DegreeTwoOnly, or "" for a rule true at every degree
// tested; Counterexample says where it fails. Vacuous marks a rule whose
// source type-checks under none of the layouts tried: it never applies, so
// it is neither refuted nor true in any use (Relation is "", and
// Counterexample says so).
type Judgement struct {
	Relation       Relation
	Counterexample string
	Vacuous        bool
}

// JudgeDegrees tests a parallel foreign rule at JudgedDegrees. A rule whose
// degree parameters differ is tested at its own degrees only.
func JudgeDegrees(r *rules.Rule) Judgement {
	own := ruleDegree(r)
	layouts, why, vacuous := wellShapedLayouts(r, own)
	if vacuous {
		return Judgement{Counterexample: why, Vacuous: true}
	}
	if len(layouts) == 0 {
		return Judgement{Relation: Falsified, Counterexample: why}
	}
	general, ok := generalize(r, own)
	degrees := JudgedDegrees
	if !ok {
		// Degrees other than 2, differing degrees, or none (linear alone):
		// the rule as written, its layouts as found. FloatCheckAtDegree at
		// BaseDegree leaves both as they are.
		degrees = []int{rules.BaseDegree}
	}
	for k, d := range degrees {
		for l, in := range layouts {
			if k > 0 && l >= otherDegreeLayouts {
				break
			}
			g := *general
			g.InputShapes = in
			err := enumerate.FloatCheckAtDegree(&g, d, enumerate.DegreeCheck{Multiple: judgeMultiple(d), Seed: 1, Tolerance: judgeTolerance})
			if err == nil {
				continue
			}
			at, _ := g.InputShapesAtDegree(d, judgeMultiple(d))
			cx := fmt.Sprintf("%s; inputs %s", err, inputList(at))
			if !ok && own != rules.BaseDegree {
				cx = fmt.Sprintf("at the rule's own degrees: %s", strings.TrimPrefix(cx, fmt.Sprintf("degree %d, ", rules.BaseDegree)))
			}
			if k == 0 {
				return Judgement{Relation: Falsified, Counterexample: cx}
			}
			_, text := general.Oriented()
			return Judgement{Relation: DegreeTwoOnly, Counterexample: fmt.Sprintf("%s (the rule with d: %s)", cx, text)}
		}
	}
	return Judgement{}
}

// judgeMultiple is what input sizes grow to a multiple of at degree d
// (rules.Rule.InputShapesAtDegree, which grows them further by powers of d
// until both sides are well laid out, as a rule may cut a dimension
// twice).
func judgeMultiple(d int) int { return d }

// ruleDegree is the degree a rule's parallel operators are written at (the
// largest), or 0.
func ruleDegree(r *rules.Rule) int {
	d := 0
	r.EachDegree(func(v int) { d = max(d, v) })
	return d
}

// IsParallel reports whether a rule uses an operator of the parallel set
// that the default set lacks: such a rule is judged by JudgeDegrees.
func IsParallel(r *rules.Rule) bool { return r.UsesParallelOps() }

// generalize writes the degree variable d for every degree parameter, and
// reports false when they are not all equal (their ratio would be lost).
func generalize(r *rules.Rule, own int) (*rules.Rule, bool) {
	same := true
	r.EachDegree(func(v int) { same = same && v == own })
	if !same || own == 0 || own != rules.BaseDegree {
		return r, false
	}
	out := *r
	out.Src, out.Dst = *r.Src.WithDegreeVar(own), *r.Dst.WithDegreeVar(own)
	return &out, true
}

// wellShapedLayouts lists up to judgedLayouts assignments of input layouts
// (exchange.ParallelInputShapes) under which both sides of r type-check
// and agree on their outputs' layouts; where there are none, why says what
// goes wrong, as a counterexample, and vacuous whether the source
// type-checks nowhere (see illShaped).
func wellShapedLayouts(r *rules.Rule, degree int) (out [][]rules.Shape, why string, vacuous bool) {
	pool := exchange.ParallelInputShapes(max(degree, 2))
	candidates := make([][]rules.Shape, r.NumInputs)
	for i := range candidates {
		candidates[i] = pool
	}
	c := *r
	c.EachShapes(candidates, nil, judgeSearchSteps, func() bool {
		out = append(out, append([]rules.Shape(nil), c.InputShapes...))
		return len(out) < judgedLayouts
	})
	if len(out) > 0 {
		return out, "", false
	}
	why, vacuous = illShaped(r, candidates)
	return nil, why, vacuous
}

// illShaped says why no layouts fit a rule: the source type-checks
// nowhere (vacuous: the rule never applies), or where it does the target
// does not type-check or lays out its outputs differently. A difference in
// layouts is the better counterexample (the target is a valid graph with
// other pieces), so the search goes on past shape errors to find one.
func illShaped(r *rules.Rule, candidates [][]rules.Shape) (why string, vacuous bool) {
	src := *r
	src.Dst = r.Src
	applies, differs := false, false
	src.EachShapes(candidates, nil, judgeSearchSteps, func() bool {
		applies = true
		in := append([]rules.Shape(nil), src.InputShapes...)
		msg, layouts := targetMismatch(r, in)
		if msg != "" && (why == "" || layouts) {
			why, differs = fmt.Sprintf("%s; inputs %s", msg, inputList(in)), layouts
		}
		return !differs
	})
	if !applies {
		return fmt.Sprintf("the source type-checks under none of the input layouts tried at degree %d", max(ruleDegree(r), 2)), true
	}
	return why, false
}

// targetMismatch says how the target differs in shape from the source at
// given input shapes: a shape error, or outputs laid out differently
// (layouts reports which).
func targetMismatch(r *rules.Rule, in []rules.Shape) (msg string, layouts bool) {
	src, err := r.Src.InferShapes(in)
	if err != nil {
		return "source: " + err.Error(), false
	}
	dst, err := r.Dst.InferShapes(in)
	if err != nil {
		return "the target does not type-check where the source does: " + err.Error(), false
	}
	for k := range src {
		if !src[k].SameDims(dst[k]) {
			return fmt.Sprintf("output %d: source gives %s, target %s", k, src[k], dst[k]), true
		}
	}
	return "", false
}

func inputList(in []rules.Shape) string {
	parts := make([]string, len(in))
	for i, s := range in {
		parts[i] = rules.InputName(i) + ":" + s.String()
	}
	return strings.Join(parts, " ")
}

// FreeInputs lists the inputs a rule's target reads and its source never
// binds.
func FreeInputs(r *rules.Rule) []int {
	src, dst := r.Src.UsedInputs(), r.Dst.UsedInputs()
	var free []int
	for i := range dst {
		if dst[i] && (i >= len(src) || !src[i]) {
			free = append(free, i)
		}
	}
	return free
}

// soundnessShapes are the input shapes free inputs are judged at: a
// parallel rule's first well-shaped layouts, sizes grown to a multiple of
// judgeMultiple(2), or another rule's recorded shapes.
func soundnessShapes(r *rules.Rule) ([]rules.Shape, string) {
	if !IsParallel(r) {
		if len(r.InputShapes) != r.NumInputs {
			return nil, "no input shapes make both sides type-check"
		}
		return r.InputShapes, ""
	}
	layouts, why, _ := wellShapedLayouts(r, ruleDegree(r))
	if len(layouts) == 0 {
		return nil, fmt.Sprintf("no input layouts make both sides type-check (%s)", why)
	}
	g := *r
	g.InputShapes = layouts[0]
	shapes, err := g.InputShapesAtDegree(rules.BaseDegree, judgeMultiple(rules.BaseDegree))
	if err != nil {
		return nil, err.Error()
	}
	return shapes, ""
}

// FreeInputSoundness says whether a target that reads free inputs is sound:
// its value must not depend on them, since the source binds nothing to
// give them. It is decided by evaluation: at the rule's first well-shaped
// layouts (soundnessShapes), the target is computed twice,
// the free inputs drawn anew the second time, and must give the same
// pieces. A rule with no well-shaped layouts is not sound.
func FreeInputSoundness(r *rules.Rule, free []int) (bool, string) {
	names := make([]string, len(free))
	for i, k := range free {
		names[i] = rules.InputName(k)
	}
	reads := strings.Join(names, ", ")
	shapes, why := soundnessShapes(r)
	if shapes == nil {
		return false, fmt.Sprintf("not sound: reads %s, and %s", reads, why)
	}
	draw := fingerprint.Inputs{Seed: 1}
	inputs := func(freeStream uint64) []*rules.FloatTensor {
		xs := make([]*rules.FloatTensor, len(shapes))
		for i, s := range shapes {
			xs[i] = draw.Float(0, i, s)
		}
		for _, k := range free {
			xs[k] = draw.Float(freeStream, k, shapes[k])
		}
		return xs
	}
	a, err := rules.Evaluate(&r.Dst, rules.FloatKernelOf, inputs(0))
	if err != nil {
		return false, fmt.Sprintf("not sound: reads %s, and the target fails: %v", reads, err)
	}
	b, err := rules.Evaluate(&r.Dst, rules.FloatKernelOf, inputs(2))
	if err != nil {
		return false, fmt.Sprintf("not sound: reads %s, and the target fails: %v", reads, err)
	}
	for o := range a {
		if i := firstDifference(a[o], b[o]); i >= 0 {
			return false, fmt.Sprintf("not sound: output %d depends on %s (element %d of %s changes from %g to %g when %s is drawn anew; inputs %s)",
				o, reads, i, a[o].Shape, a[o].Data[i], b[o].Data[i], reads, inputList(shapes))
		}
	}
	return true, fmt.Sprintf("sound: reads %s, yet gives the same pieces when %s is drawn anew (inputs %s)", reads, reads, inputList(shapes))
}

// firstDifference is the first element where two tensors differ beyond
// judgeTolerance, or -1.
func firstDifference(x, y *rules.FloatTensor) int {
	for i, a := range x.Data {
		b := y.Data[i]
		if math.Abs(a-b) > judgeTolerance*math.Max(1, math.Max(math.Abs(a), math.Abs(b))) {
			return i
		}
	}
	return -1
}
