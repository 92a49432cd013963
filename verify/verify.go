package verify

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"rulebook/axioms"
	"rulebook/fingerprint"
	"rulebook/internal/pool"
	"rulebook/internal/progress"
	"rulebook/rules"
	"rulebook/verify/z3"
)

// Config selects the axioms and limits of a verification run.
type Config struct {
	Registry *rules.Registry
	Axioms   *axioms.Set
	Budget   Budget // per rule; zero fields take DefaultBudget's
	Workers  int
	// Seed draws the inputs of the concrete test that looks for a
	// counterexample when a rule is not proved.
	Seed uint64
	// Progress hears of each rule decided, as stage "verify".
	Progress progress.Func
	// Sweeps, if not nil, keeps layout sweeps' outcomes for later runs in
	// this process with the same memo (build's release, after its verify).
	Sweeps *SweepMemo

	blockAxioms axiomNames // BlockAxioms(Axioms), set by Run
	// retested names the axioms whose proofs are tested at other shapes
	// before they stand: the block axioms and the layout-conditional ones
	// (ConditionalAxioms). Set by Run.
	retested axiomNames
}

// Job is one rule to verify. Rule carries the shapes it was found with, when
// known, for the counterexample search.
type Job struct {
	ID   int64
	Rule *rules.Rule
	// Layouts claims the rule at every parallel layout, as a rule found by
	// a generation over parallel degrees is: its proof stands only if the
	// layout sweep finds it true (LayoutSweep). A rule with a parallel
	// operator or input layout is claimed so in any case.
	Layouts bool
	// core, when not nil, names the axioms a recorded proof used: the
	// proof is tried with them alone first (Release replays it), then,
	// if they do not prove it, with every relevant axiom.
	core []string
}

// swept reports whether a job's rule is held to the layout sweep.
func (j Job) swept() bool { return j.Layouts || isParallel(j.Rule) }

// DefaultBudget is the budget a zero Config.Budget takes. The largest proof
// of the ≤4-operator candidates spends about 51,000 resource units and the
// searches that fail stop by themselves below 30,000 (BENCHMARKS.md,
// "Verification"), so a million leaves twenty times the room; the wall
// clock is one that only a machine far slower than ours would reach.
func DefaultBudget() Budget {
	return Budget{Units: 1_000_000, WallClock: time.Minute}
}

// OrDefault fills the zero fields of b with DefaultBudget's.
func (b Budget) OrDefault() Budget {
	d := DefaultBudget()
	if b.Units == 0 {
		b.Units = d.Units
	}
	if b.WallClock <= 0 {
		b.WallClock = d.WallClock
	}
	return b
}

// MaxUnits is the largest budget Z3 takes: its resource limit is a 32-bit
// count, and a larger one would be cut to it without a word.
const MaxUnits = math.MaxUint32

// Check refuses a budget Z3 cannot honour, before anything is proved.
func (b Budget) Check() error {
	if b.Units > MaxUnits {
		return fmt.Errorf("--budget %d: Z3's resource limit is at most %d units", b.Units, uint64(MaxUnits))
	}
	return nil
}

// String names the budget as it is recorded with proofs and versions.
func (b Budget) String() string { return fmt.Sprintf("rlimit %d", b.Units) }

// SolverVersion is the Z3 version recorded with every result.
func SolverVersion() string { return z3.Version() }

// Run verifies jobs on cfg.Workers goroutines, each with its own Z3
// context, and hands every result to emit (called from one goroutine at a
// time). It stops at the first error or when ctx is cancelled; results
// already emitted stand.
func Run(ctx context.Context, cfg Config, jobs []Job, emit func(Job, Result) error) error {
	if cfg.Workers < 1 {
		cfg.Workers = runtime.GOMAXPROCS(0)
	}
	cfg.Budget = cfg.Budget.OrDefault()
	cfg.blockAxioms = BlockAxioms(cfg.Axioms)
	cfg.retested = BlockAxioms(cfg.Axioms)
	for name := range ConditionalAxioms(cfg.Axioms) {
		cfg.retested[name] = true
	}
	var mu sync.Mutex
	failed := false
	tick := cfg.Progress.Counter("verify", len(jobs))
	return pool.Each(ctx, cfg.Workers, len(jobs), func(_, i int) error {
		res, err := decide(ctx, cfg, jobs[i])
		if err != nil && ctx.Err() == nil {
			// A Z3 failure on one rule makes it unknown, not the run failed.
			res, err = Result{Status: Unknown, Reason: "z3 error: " + err.Error()}, nil
		}
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			failed = true
			return fmt.Errorf("verify rule %d: %w", jobs[i].ID, err)
		}
		if failed {
			return nil // no result is emitted after an error
		}
		if err := emit(jobs[i], res); err != nil {
			failed = true
			return err
		}
		tick()
		return nil
	})
}

// decide proves a rule or, failing that, looks for a concrete
// counterexample at the shapes it was found with.
//
// Every rule gets a fresh Z3 context: Z3's choices follow the order in
// which terms were created, so a context shared with earlier rules would
// make a verdict depend on which rules a worker happened to take before.
//
// The float64 tests share the rule's wall clock with the proof: a test
// that runs past it leaves the rule unknown, "timeout".
func decide(ctx context.Context, cfg Config, j Job) (Result, error) {
	start := time.Now()
	r := j.Rule
	res, err := proveWith(ctx, cfg, r, j.core)
	if err == nil && j.core != nil && res.Status != Proved {
		res, err = proveWith(ctx, cfg, r, nil)
	}
	if err != nil || len(r.InputShapes) == 0 {
		return res, err
	}
	fctx, cancel := context.WithDeadline(ctx, start.Add(cfg.Budget.WallClock))
	defer cancel()
	if res.Status == Proved {
		res, err = checkProofShapes(fctx, j, res, cfg)
	} else {
		res, err = refute(fctx, j, res, cfg)
	}
	if err != nil && ctx.Err() == nil { // the rule's wall clock, not the run's
		return Result{Status: Unknown, Reason: ReasonTimeout, Elapsed: time.Since(start), Units: res.Units}, nil
	}
	return res, err
}

// proveWith proves r in a fresh context with the relevant axioms, or with
// those of core alone when core is not nil.
func proveWith(ctx context.Context, cfg Config, r *rules.Rule, core []string) (Result, error) {
	p, err := newRuleProver(cfg.Axioms, r, core)
	if err != nil {
		return Result{}, err
	}
	defer p.close()
	return p.prove(ctx, r, cfg.Budget)
}

// refute looks for a counterexample to a rule that was not proved: for a
// swept rule (Job.Layouts) at every combined layout first, then at other shapes.
// The reason says when the float test could not run at the rule's
// recorded shapes.
func refute(ctx context.Context, j Job, res Result, cfg Config) (Result, error) {
	r := j.Rule
	why, found, err := "", false, error(nil)
	if j.swept() {
		why, found, err = cfg.Sweeps.sweep(ctx, r, cfg.Seed)
	}
	if !found && err == nil {
		why, found, err = Counterexample(ctx, r, cfg.Seed)
	}
	switch {
	case err != nil:
		return res, err
	case found:
		res.Status, res.Reason = Refuted, why
	default:
		if tooLarge := FloatTestable(r); tooLarge != nil {
			res.Reason += "; not tested in float64 at the recorded shapes: " + tooLarge.Error()
		}
	}
	return res, nil
}

// checkProofShapes tests a proof at other layouts and shapes before it
// stands. Every swept rule (Job.Layouts) is evaluated at every combined layout of
// its inputs: an axiom holds wherever both of its sides are laid out
// validly, but a chain of them may pass through terms laid out differently
// from the rule's inputs, and so prove a rule whose pieces differ at some
// layout, or whose target cannot be laid out where its source can. A proof
// that used a block axiom (see BlockAxioms) or a layout-conditional one
// (ConditionalAxioms) is also tested at other sizes: a block axiom pairs
// the parts of two concats, which lines up only when the parts have equal
// sizes. Such a rule is refuted, with the counterexample.
func checkProofShapes(ctx context.Context, j Job, res Result, cfg Config) (Result, error) {
	r := j.Rule
	conditional := slices.ContainsFunc(res.Core, cfg.retested.has)
	if j.swept() {
		why, found, err := cfg.Sweeps.sweep(ctx, r, cfg.Seed)
		if err != nil {
			return res, err
		}
		if found {
			res.Status, res.Core = Refuted, nil
			res.Reason = why + "; the axioms do not model layouts, and Z3's proof does not hold at this one"
			return res, err
		}
	}
	if !conditional {
		return res, nil
	}
	why, found, err := OtherShapes(ctx, r, cfg.Seed)
	if found {
		used := slices.DeleteFunc(slices.Clone(res.Core), func(a string) bool { return !cfg.retested.has(a) })
		res.Status, res.Core = Refuted, nil
		if slices.ContainsFunc(used, cfg.blockAxioms.has) {
			res.Reason = why + "; Z3's proof paired parts of unequal size through " + strings.Join(used, ", ")
		} else {
			res.Reason = why + "; Z3's proof used " + strings.Join(used, ", ") + " where its condition fails"
		}
	}
	return res, err
}

// axiomNames is a set of axiom names.
type axiomNames map[string]bool

func (s axiomNames) has(name string) bool { return s[name] }

// BlockAxioms names the axioms with two or more concats on one side, such
// as matmul(concat(x, z), concat(y, w)) = matmul(x, y) + matmul(z, w): they
// hold only where the concats' parts line up, which the axioms cannot say.
func BlockAxioms(set *axioms.Set) map[string]bool {
	concat, _ := rules.Default().Lookup(rules.NameConcat)
	sym := concat.Z3[0]
	out := map[string]bool{}
	for _, a := range set.Axioms {
		if countSym(a.LHS, sym) >= 2 || countSym(a.RHS, sym) >= 2 {
			out[a.Name] = true
		}
	}
	return out
}

func countSym(t *axioms.Term, sym string) int {
	n := 0
	if !t.IsVar && t.Sym == sym {
		n++
	}
	for _, a := range t.Args {
		n += countSym(a, sym)
	}
	return n
}

// counterexampleDraws is how many float draws the concrete test tries at
// the shapes a rule was found with.
const counterexampleDraws = 16

// Bounds on one float64 evaluation of a rule, both sides: the elements of
// its inputs and of every value it computes (32 MiB of float64 in all),
// and the multiply-adds its operators do (well under a second). Shapes
// beyond them are not evaluated: rules imported from files may record any
// sizes, and a test must neither exhaust memory nor outlast --timeout by
// more than one evaluation.
const (
	maxFloatElements = 1 << 22
	maxFloatWork     = 1 << 26
)

// maxNearExtent bounds the extents shapesNear offers, so that a rule
// recorded at huge sizes has as few near shapes as one recorded at the
// generator's (whose extents are at most 5).
const maxNearExtent = 16

// Counterexample evaluates both sides on float64 draws, first at the
// rule's recorded shapes, then at other shapes of the same ranks under
// which both sides type-check (OtherShapes), and describes the first
// differing output element. The optimizer applies a rule wherever both
// sides type-check, so a rule that holds only at the sizes the generator
// happened to use (two operands of equal size, say) is false. Shapes too
// large to evaluate (FloatTestable) are passed over; the error is ctx's,
// when it ends the search.
func Counterexample(ctx context.Context, r *rules.Rule, seed uint64) (string, bool, error) {
	in := fingerprint.Inputs{Seed: seed}
	for _, at := range atDegrees(r) {
		for d := 0; d < counterexampleDraws && FloatTestable(at.rule) == nil; d++ {
			if err := ctx.Err(); err != nil {
				return "", false, err
			}
			if why, found := differs(at.rule, in, uint64(d)); found {
				return at.prefix + why, true, nil
			}
		}
	}
	return OtherShapes(ctx, r, seed)
}

// FloatTestable says why r cannot be evaluated in float64 at its current
// shapes: its tensors would hold more than maxFloatElements elements, or
// its operators do more than maxFloatWork multiply-adds. It is nil when r
// can be, or when the shapes do not type-check (evaluation then fails at
// once).
func FloatTestable(r *rules.Rule) error {
	var elements, work saturating
	for _, s := range r.InputShapes {
		elements.add(size(s))
	}
	for _, g := range []*rules.Graph{&r.Src, &r.Dst} {
		shapes := make([][]rules.Shape, len(g.Nodes))
		for j, node := range g.Nodes {
			args := make([]rules.Shape, len(node.Args))
			for k, a := range node.Args {
				if a.IsInput() {
					args[k] = r.InputShapes[a.Input()]
				} else {
					args[k] = shapes[a.Node][a.Out]
				}
			}
			if node.Op.IsConstant() && node.ConstShape != nil {
				args = []rules.Shape{*node.ConstShape}
			}
			out, err := node.Op.InferShapes(node.Params, args)
			if err != nil {
				return nil
			}
			shapes[j] = out
			for _, s := range out {
				elements.add(size(s))
				work.add(size(s).times(reads(node, args)))
			}
		}
	}
	if elements > maxFloatElements || work > maxFloatWork {
		return fmt.Errorf("%s needs more than the %d elements or %d multiply-adds a float64 test evaluates", shapeList(r.InputShapes), maxFloatElements, maxFloatWork)
	}
	return nil
}

// saturating counts up to just above the larger of the float test's
// bounds, so that no extent, however large, overflows it.
type saturating int

const saturated = saturating(max(maxFloatElements, maxFloatWork) + 1)

func (n *saturating) add(k saturating) { *n = min(*n+k, saturated) }

func (n saturating) times(k saturating) saturating {
	if k > 0 && n > saturated/k {
		return saturated
	}
	return n * k
}

// size is the number of elements of s.
func size(s rules.Shape) saturating {
	n := saturating(1)
	for i := range s.Rank {
		n = n.times(saturating(max(s.Dims[i], 1)))
	}
	return n
}

// reads is how many operand elements one output element of a node reads:
// its row's fan-in (a matrix product's contraction, a convolution's kernel
// window over its input channels, a pooling window), else one of each
// operand.
func reads(n rules.Node, args []rules.Shape) saturating {
	if n.Op.FanIn != nil {
		if factors := n.Op.FanIn(n.Params, args); factors != nil {
			r := saturating(1)
			for _, f := range factors {
				r = r.times(saturating(f))
			}
			return r
		}
	}
	return saturating(max(len(args), 1))
}

// Limits of the search over other shapes: random restarts, assignments
// evaluated in each, and nodes shaped in each while looking for shapes
// under which both sides type-check.
const (
	otherShapeTrials = 32
	otherShapeVisits = 8
	otherShapeSteps  = 4_000
)

// OtherShapes looks for a counterexample at input shapes other than the
// recorded ones, at the recorded ranks. Trials take turns in what they
// offer each input: its recorded shape and those that differ from it in one
// extent, or in up to two (shapesNear), which breaks a few coincidences of
// sizes at a time (two kernels with as many output channels, say), or any
// shape of its rank with extents 1 to 5. Each list is shuffled (seeded,
// so the search is the same on every run), and each trial evaluates the
// first assignments under which both sides type-check. The rule's recorded
// shapes are restored afterwards.
//
// A rule with the degree variable is searched at degrees 2, 3 and 4
// (atDegrees). A parallel rule (one with a parallel operator or input
// layout) keeps its inputs' layouts at the other extents; LayoutSweep
// tries its other layouts.
func OtherShapes(ctx context.Context, r *rules.Rule, seed uint64) (string, bool, error) {
	if len(r.InputShapes) != r.NumInputs {
		return "", false, nil
	}
	for _, at := range atDegrees(r) {
		if why, found, err := otherShapes(ctx, at.rule, seed); found || err != nil {
			return at.prefix + why, found, err
		}
	}
	return "", false, nil
}

// otherShapes is OtherShapes for a rule without the degree variable.
func otherShapes(ctx context.Context, r *rules.Rule, seed uint64) (string, bool, error) {
	parallel := isParallel(r)
	saved := saveShapes(r)
	defer saved.restore(r)
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	in := fingerprint.Inputs{Seed: seed}
	consts := constantShapes(r)
	for trial := range otherShapeTrials {
		candidates := make([][]rules.Shape, r.NumInputs)
		for i, s := range saved.inputs {
			if k := trial % 3; k < 2 {
				candidates[i] = shapesNear(s, k+1, rng)
			} else {
				candidates[i] = shapesOfRank(s.Rank, rng)
			}
			if parallel {
				candidates[i] = withLayout(candidates[i], s)
			}
			// A conditioned rule is claimed only where its conditions hold.
			candidates[i] = slices.DeleteFunc(candidates[i], func(s rules.Shape) bool { return !r.InputHolds(i, s) })
		}
		why, found, err := firstDifference(ctx, r, in, candidates, consts, otherShapeVisits)
		if found || err != nil {
			return why, found, err
		}
	}
	return "", false, nil
}

// firstDifference evaluates the rule at up to visits assignments drawn from
// candidates and describes the first that tells the sides apart.
// Assignments too large to evaluate do not count as visits.
func firstDifference(ctx context.Context, r *rules.Rule, in fingerprint.Inputs, candidates [][]rules.Shape, consts map[string][]rules.Shape, visits int) (string, bool, error) {
	var why string
	seen := 0
	r.EachShapes(candidates, consts, otherShapeSteps, func() bool {
		if ctx.Err() != nil {
			return false
		}
		if FloatTestable(r) != nil {
			return true
		}
		for _, stream := range []uint64{0, 1} { // uniform, one-signed
			if w, found := differs(r, in, stream); found {
				why = fmt.Sprintf("at %s: %s", shapeList(r.InputShapes), w)
				return false
			}
		}
		seen++
		return seen < visits
	})
	if why == "" && ctx.Err() != nil {
		return "", false, ctx.Err()
	}
	return why, why != "", nil
}

// shapesNear lists s and every shape that differs from s in at most k
// extents, shuffled. An extent ranges over 1 to 5, or to twice its recorded
// value when that is more (up to maxNearExtent): a depth-wise kernel's
// channel multiplier, for one, needs room above the channel count to
// differ between two kernels.
func shapesNear(s rules.Shape, k int, rng *rand.Rand) []rules.Shape {
	near := []rules.Shape{rules.NewShape(s.DimList()...)}
	for range k {
		var next []rules.Shape
		for _, t := range near {
			for axis := range t.Rank {
				for d := 1; d <= min(max(5, 2*s.Dims[axis]), maxNearExtent); d++ {
					if d != t.Dims[axis] && t.Dims[axis] == s.Dims[axis] {
						u := rules.NewShape(t.DimList()...)
						u.Dims[axis] = d
						next = append(next, u)
					}
				}
			}
		}
		near = append(near, next...)
	}
	near = uniqueShapes(near)
	rng.Shuffle(len(near), func(i, j int) { near[i], near[j] = near[j], near[i] })
	return near
}

// uniqueShapes drops repeated shapes, keeping the first of each.
func uniqueShapes(ss []rules.Shape) []rules.Shape {
	seen := map[string]bool{}
	out := ss[:0]
	for _, s := range ss {
		if k := s.String(); !seen[k] {
			seen[k] = true
			out = append(out, s)
		}
	}
	return out
}

// differs evaluates both sides on one float draw at r's current shapes.
func differs(r *rules.Rule, in fingerprint.Inputs, stream uint64) (string, bool) {
	xs := make([]*rules.FloatTensor, r.NumInputs)
	for i, s := range r.InputShapes {
		xs[i] = in.Float(stream, i, s)
	}
	a, errA := rules.Evaluate(&r.Src, rules.FloatKernelOf, xs)
	b, errB := rules.Evaluate(&r.Dst, rules.FloatKernelOf, xs)
	if errA != nil || errB != nil {
		return "", false
	}
	for o := range a {
		if !a[o].Shape.SameDims(b[o].Shape) {
			return fmt.Sprintf("output %d has shape %s on the source but %s on the target", o, a[o].Shape, b[o].Shape), true
		}
		for k, x := range a[o].Data {
			y := b[o].Data[k]
			if math.Abs(x-y) > 1e-6*math.Max(1, math.Max(math.Abs(x), math.Abs(y))) {
				return fmt.Sprintf("output %d element %d: source %.6g, target %.6g (float stream %d)", o, k, x, y, stream), true
			}
		}
	}
	return "", false
}

// shapesOfRank lists every shape of a rank with extents 1 to 5, shuffled.
func shapesOfRank(rank int, rng *rand.Rand) []rules.Shape {
	out := []rules.Shape{rules.NewShape()}
	for range rank {
		var next []rules.Shape
		for _, s := range out {
			for d := 1; d <= 5; d++ {
				next = append(next, rules.NewShape(append(s.DimList(), d)...))
			}
		}
		out = next
	}
	rng.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

// constantShapes offers each constant the shapes of rank 4 (kernels) or 2
// (the identity matrix) with extents 1 to 5 that its own shape rule takes.
func constantShapes(r *rules.Rule) map[string][]rules.Shape {
	out := map[string][]rules.Shape{}
	for _, g := range []*rules.Graph{&r.Src, &r.Dst} {
		for _, n := range g.Nodes {
			if !n.Op.IsConstant() || n.ConstShape == nil || out[n.Op.Name] != nil {
				continue
			}
			for _, s := range shapesOfRank(n.ConstShape.Rank, rand.New(rand.NewPCG(1, 1))) {
				if _, err := n.Op.InferShapes(n.Params, []rules.Shape{s}); err == nil {
					out[n.Op.Name] = append(out[n.Op.Name], s)
				}
			}
		}
	}
	return out
}

func shapeList(shapes []rules.Shape) string {
	parts := make([]string, len(shapes))
	for i, s := range shapes {
		parts[i] = fmt.Sprintf("?%c:%s", 'a'+i, s)
	}
	return strings.Join(parts, " ")
}

// savedShapes holds a rule's shapes while a search changes them.
type savedShapes struct {
	inputs []rules.Shape
	consts []*rules.Shape
}

func saveShapes(r *rules.Rule) savedShapes {
	s := savedShapes{inputs: slices.Clone(r.InputShapes)}
	for _, g := range []*rules.Graph{&r.Src, &r.Dst} {
		for _, n := range g.Nodes {
			s.consts = append(s.consts, n.ConstShape)
		}
	}
	return s
}

func (s savedShapes) restore(r *rules.Rule) {
	r.InputShapes = s.inputs
	k := 0
	for _, g := range []*rules.Graph{&r.Src, &r.Dst} {
		for j := range g.Nodes {
			g.Nodes[j].ConstShape = s.consts[k]
			k++
		}
	}
}
