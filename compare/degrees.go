package compare

import (
	"context"
	"fmt"
	"math"
	"strings"

	"rulebook/exchange"
	"rulebook/fingerprint"
	"rulebook/rules"
)

// FlexFlow applies each of its rules at the machine's degree, though its
// generator wrote them at degree 2. A parallel foreign rule is therefore
// judged as our own are before release: swept at every combined layout of
// its inputs (rules.Rule.Sweep) by the exact evaluator. A rule written at
// degree 2 has its degree parameters, all equal, read as the degree
// variable d; a rule written with d claims every degree. Each is swept at
// degree 2, then at 3 and 4. False at degree 2: refuted; true there but
// false at another degree: true at degree 2 only, unless the rule was
// written with d, which claims them all. A rule written at other degrees,
// or at differing ones, is swept as written.

// JudgedDegrees are the degrees a parallel foreign rule is swept at, 2
// first.
var JudgedDegrees = []int{2, 3, 4}

// judgeSearchSteps bounds the search for input shapes under which a
// rule's source type-checks.
const judgeSearchSteps = 200_000

// Judgement is what the sweep says of a parallel foreign rule: Relation is
// Falsified, DegreeTwoOnly, or "" for a rule true at every degree swept;
// Kind and Counterexample say where it fails. Vacuous marks a rule whose
// source type-checks under none of the layouts tried: it never applies, so
// it is neither refuted nor true in any use (Relation is "", and
// Counterexample says so).
type Judgement struct {
	Relation       Relation
	Kind           rules.Mismatch
	Counterexample string
	Vacuous        bool
}

// JudgeDegrees sweeps a parallel foreign rule at JudgedDegrees.
func JudgeDegrees(ctx context.Context, r *rules.Rule) (Judgement, error) {
	return judge(ctx, r, false)
}

// judge is JudgeDegrees; cutsOnly sweeps per-dimension degrees alone, for a
// reading without partial sums and copies (rules.FlexFlowReading).
func judge(ctx context.Context, r *rules.Rule, cutsOnly bool) (Judgement, error) {
	general, written := generalize(r)
	base, ok := judgedShapes(general)
	if !ok {
		return Judgement{Vacuous: true, Counterexample: fmt.Sprintf("the source type-checks under none of the input layouts tried at degree %d", max(ruleDegree(r), 2))}, nil
	}
	g := *general
	g.InputShapes = base
	for k, degrees := range [][]int{JudgedDegrees[:1], JudgedDegrees[1:]} {
		cfg := judgeSweep(degrees)
		cfg.CutsOnly = cutsOnly
		if k > 0 && !g.HasDegreeVar() {
			break // written at concrete degrees: swept at those alone
		}
		res, err := g.Sweep(ctx, cfg)
		if err != nil || res.Counterexample == nil {
			if err != nil {
				return Judgement{}, err
			}
			continue
		}
		j := Judgement{Relation: Falsified, Kind: res.Counterexample.Kind, Counterexample: res.Counterexample.String()}
		if k > 0 && !written {
			_, text := g.Oriented()
			j.Relation = DegreeTwoOnly
			j.Counterexample += fmt.Sprintf(" (the rule with d: %s)", text)
		}
		return j, nil
	}
	return Judgement{}, nil
}

// judgeSweep is the sweep at degrees: the first whole, the others
// sampled.
func judgeSweep(degrees []int) rules.SweepConfig {
	in := fingerprint.Inputs{Seed: 1}
	cfg := rules.DefaultSweep()
	cfg.Whole, cfg.Sampled = degrees[:1], degrees[1:]
	cfg.Int, cfg.Float = in.Int, in.Float
	return cfg
}

// judgedShapes are the input shapes whose ranks and extents a rule is
// swept at: those it records, or the first of FlexFlow's activations and
// weights (exchange.ParallelInputShapes) under which its source
// type-checks at its own degree.
func judgedShapes(r *rules.Rule) ([]rules.Shape, bool) {
	if len(r.InputShapes) == r.NumInputs {
		return r.InputShapes, true
	}
	at := r
	if r.HasDegreeVar() {
		at = r.WithDegree(rules.BaseDegree)
	}
	return at.SourceShapes(exchange.ParallelInputShapes(max(ruleDegree(at), 2)), judgeSearchSteps)
}

const (
	// judgedLayouts bounds the layouts wellShapedLayouts lists.
	judgedLayouts = 8
	// judgeTolerance is the float comparison's relative tolerance.
	judgeTolerance = 1e-9
)

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

// generalize writes the degree variable d for every degree parameter of a
// rule written at degree 2, all equal; written reports whether the rule
// already had d. Any other rule is returned as it is.
func generalize(r *rules.Rule) (general *rules.Rule, written bool) {
	if r.HasDegreeVar() {
		return r, true
	}
	same := true
	r.EachDegree(func(v int) { same = same && v == rules.BaseDegree })
	if !same || ruleDegree(r) != rules.BaseDegree {
		return r, false
	}
	out := *r
	out.Src, out.Dst = *r.Src.WithDegreeVar(rules.BaseDegree), *r.Dst.WithDegreeVar(rules.BaseDegree)
	return &out, false
}

// wellShapedLayouts lists up to judgedLayouts assignments of input layouts
// (exchange.ParallelInputShapes) under which both sides of r type-check
// and agree on their outputs' layouts; where there are none, why says what
// goes wrong.
func wellShapedLayouts(r *rules.Rule, degree int) (out [][]rules.Shape, why string) {
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
		return out, ""
	}
	return nil, illShaped(r, candidates)
}

// illShaped says why no layouts fit a rule: the source type-checks
// nowhere, or where it does the target does not type-check or lays out its
// outputs differently. A difference in layouts is the better
// counterexample (the target is a valid graph with other pieces), so the
// search goes on past shape errors to find one.
func illShaped(r *rules.Rule, candidates [][]rules.Shape) (why string) {
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
		return fmt.Sprintf("the source type-checks under none of the input layouts tried at degree %d", max(ruleDegree(r), 2))
	}
	return why
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
// 2, or another rule's recorded shapes.
func soundnessShapes(r *rules.Rule) ([]rules.Shape, string) {
	if !IsParallel(r) {
		if len(r.InputShapes) != r.NumInputs {
			return nil, "no input shapes make both sides type-check"
		}
		return r.InputShapes, ""
	}
	layouts, why := wellShapedLayouts(r, ruleDegree(r))
	if len(layouts) == 0 {
		return nil, fmt.Sprintf("no input layouts make both sides type-check (%s)", why)
	}
	g := *r
	g.InputShapes = layouts[0]
	shapes, err := g.InputShapesAtDegree(rules.BaseDegree, rules.BaseDegree)
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
