// Package verify proves candidate rules from the axioms with Z3: a rule
// holds when the axioms and "some output differs" are unsatisfiable over
// fresh input constants. docs/design.md ("How verification decides a
// rule") tells the long story.
package verify

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"rulebook/axioms"
	"rulebook/rules"
	"rulebook/verify/z3"
)

// Outcomes of a verification: the rule statuses it decides.
const (
	Proved  = rules.StatusProved
	Unknown = rules.StatusUnknown
	Refuted = rules.StatusRefuted
)

// Reasons for an unknown outcome.
const (
	// ReasonBudget: Z3 spent the rule's resource budget. This is the
	// everyday reason, and it is reproducible.
	ReasonBudget = "budget"
	// ReasonTimeout: the wall-clock safety net stopped Z3 first. Such a
	// verdict depends on the machine; raise the safety net or lower the
	// budget.
	ReasonTimeout     = "timeout"
	ReasonNotEntailed = "not entailed"
	// ReasonNotDerived: E-matching ran out of instances before the budget;
	// the axioms, as instantiated, do not derive the rule.
	ReasonNotDerived = "not derived"
)

// Result is the outcome for one rule.
type Result struct {
	Status rules.Status
	// Reason explains unknown and refuted outcomes.
	Reason string
	// Core names the axioms the proof used (proved only).
	Core    []string
	Elapsed time.Duration
	// Units is how many of Z3's resource units the search spent.
	Units uint64
}

// Budget bounds the proof search for one rule.
type Budget struct {
	// Units is Z3's resource limit (rlimit) for the rule, all phases
	// together: a count of Z3's basic steps, independent of the machine.
	Units uint64
	// WallClock stops a search that the budget somehow does not, so that
	// nothing hangs. A verdict it decides is marked "timeout".
	WallClock time.Duration
}

// prover is one Z3 context with the registry's declarations and the axioms
// loaded; it serves one goroutine.
type prover struct {
	ctx    *z3.Context
	tensor z3.Sort
	decls  map[string]z3.FuncDecl
	axioms []z3.AST
	names  []string
	degree z3.AST // the degree variable d, once a term needs it
	hasDeg bool
}

// newProver loads the axioms axs of set into a fresh context. It declares
// every operator of the default set, as it always has, and the parallel
// operators whose symbols are in parallel (those the axioms or the rule
// use): a declaration creates a term, and Z3's choices follow the order of
// creation, so proofs of the default set see exactly the context they
// always did.
func newProver(set *axioms.Set, axs []*axioms.Axiom, parallel map[string]bool) (*prover, error) {
	c := z3.NewContext()
	p := &prover{ctx: c, tensor: c.UninterpretedSort(axioms.TensorSort), decls: map[string]z3.FuncDecl{}}
	for _, op := range rules.All().Ops() {
		if op.Set == rules.SetParallel && !anyOf(op.Z3, parallel) {
			continue
		}
		var dom []z3.Sort
		for range op.Params {
			dom = append(dom, c.IntSort())
		}
		for i := 0; i < op.Arity; i++ {
			dom = append(dom, p.tensor)
		}
		for _, sym := range op.Z3 {
			p.decls[sym] = c.FuncDecl(sym, dom, p.tensor)
		}
	}
	p.declareConditions(axs)
	// One parse for all axioms: Z3's parser costs more per call than per
	// assertion, and a fresh context per rule parses them every time.
	sorts := map[string]z3.Sort{axioms.TensorSort: p.tensor}
	var text strings.Builder
	for _, a := range axs {
		text.WriteString("(assert " + a.SolverFormula() + ")\n")
	}
	fs, err := c.ParseSMTLIB2(text.String(), sorts, p.decls)
	if err != nil || len(fs) != len(axs) {
		c.Close()
		return nil, fmt.Errorf("axioms of %s: %v", set.Dir, err)
	}
	for i, a := range axs {
		p.axioms = append(p.axioms, fs[i])
		p.names = append(p.names, a.Name)
	}
	if err := c.Err(); err != nil {
		c.Close()
		return nil, err
	}
	return p, nil
}

// declareConditions declares the shape conditions' predicates
// (axioms.ConditionDeclarations) where an axiom of axs has one; before
// the axioms are parsed, but after the operators, and only then, so that
// proofs without conditions see the context they always did.
func (p *prover) declareConditions(axs []*axioms.Axiom) {
	if !slices.ContainsFunc(axs, (*axioms.Axiom).ShapeConditioned) {
		return
	}
	for _, k := range rules.CondKinds() {
		dom := []z3.Sort{p.tensor}
		for range k.Arity() {
			dom = append(dom, p.ctx.IntSort())
		}
		p.decls[k.Keyword()] = p.ctx.FuncDecl(k.Keyword(), dom, p.ctx.BoolSort())
	}
}

// hypotheses are a rule's conditions about its input constants, true in
// every model the proof considers: a conditioned rule is proved where its
// conditions hold. Without the axioms that use them (none were loaded),
// the conditions say nothing, and the rule is not proved.
func (p *prover) hypotheses(r *rules.Rule) []z3.AST {
	var out []z3.AST
	for _, c := range r.Conds {
		d, ok := p.decls[c.Kind.Keyword()]
		if !ok {
			return nil
		}
		in := p.ctx.Const(fmt.Sprintf("input%d", c.Input), p.tensor)
		out = append(out, p.ctx.Apply(d, in, p.ctx.Int(c.Dims[0]), p.ctx.Int(c.Dims[1])))
	}
	return out
}

// withHypotheses conjoins the rule's conditions to a goal.
func (p *prover) withHypotheses(r *rules.Rule, goal z3.AST) z3.AST {
	hyps := p.hypotheses(r)
	if len(hyps) == 0 {
		return goal
	}
	return p.ctx.And(append(hyps, goal)...)
}

// newSetProver loads every axiom of the set, for the checks of the set
// itself.
func newSetProver(set *axioms.Set) (*prover, error) {
	all, par := map[string]bool{}, parallelOpSymbols()
	for _, a := range set.Axioms {
		symbolsIn(a.LHS, par, all)
		symbolsIn(a.RHS, par, all)
	}
	return newProver(set, set.Axioms, all)
}

// newRuleProver loads the axioms that can take part in a proof of r
// (RelevantAxioms), only those named in core when core is not nil.
func newRuleProver(set *axioms.Set, r *rules.Rule, core []string) (*prover, error) {
	present := ruleParallelSymbols(r)
	keys := ruleDimensionKeys(r, map[string]bool{})
	for s := range present {
		keys[s] = true
	}
	axs, par := RelevantAxioms(set, keys), parallelOpSymbols()
	if !r.Conditional() {
		// Only a rule's own conditions can make a shape condition hold.
		axs = slices.DeleteFunc(axs, (*axioms.Axiom).ShapeConditioned)
	}
	if core != nil {
		axs = slices.DeleteFunc(axs, func(a *axioms.Axiom) bool { return !slices.Contains(core, a.Name) })
	}
	for _, a := range axs {
		symbolsIn(a.LHS, par, present)
		symbolsIn(a.RHS, par, present)
	}
	return newProver(set, axs, present)
}

func anyOf(syms []string, set map[string]bool) bool {
	for _, s := range syms {
		if set[s] {
			return true
		}
	}
	return false
}

// degreeVar is the Int constant d, created on first use.
func (p *prover) degreeVar() z3.AST {
	if !p.hasDeg {
		p.degree, p.hasDeg = p.ctx.Const(DegreeVarName, p.ctx.IntSort()), true
	}
	return p.degree
}

// withDegreeBound conjoins d ≥ 1 to a goal that uses the degree variable.
func (p *prover) withDegreeBound(goal z3.AST) (z3.AST, error) {
	if !p.hasDeg {
		return goal, nil
	}
	d := p.ctx.FuncDecl(DegreeVarName, nil, p.ctx.IntSort())
	fs, err := p.ctx.ParseSMTLIB2("(assert (>= "+DegreeVarName+" 1))", nil, map[string]z3.FuncDecl{DegreeVarName: d})
	if err != nil || len(fs) != 1 {
		return z3.AST{}, fmt.Errorf("degree bound: %v", err)
	}
	return p.ctx.And(fs[0], goal), nil
}

func (p *prover) close() { p.ctx.Close() }

// goal builds "some output of src differs from dst's" over fresh inputs.
func (p *prover) goal(r *rules.Rule) (z3.AST, error) {
	inputs := make([]z3.AST, r.NumInputs)
	for i := range inputs {
		inputs[i] = p.ctx.Const(fmt.Sprintf("input%d", i), p.tensor)
	}
	src, err := p.terms(&r.Src, inputs)
	if err != nil {
		return z3.AST{}, err
	}
	dst, err := p.terms(&r.Dst, inputs)
	if err != nil {
		return z3.AST{}, err
	}
	eqs := make([]z3.AST, len(src))
	for i := range src {
		eqs[i] = p.ctx.Eq(src[i], dst[i])
	}
	g, err := p.withDegreeBound(p.ctx.Not(p.ctx.And(eqs...)))
	if err != nil {
		return z3.AST{}, err
	}
	return g, p.ctx.Err()
}

// terms translates a graph's outputs into Z3 terms.
func (p *prover) terms(g *rules.Graph, inputs []z3.AST) ([]z3.AST, error) {
	vals := make([][]z3.AST, len(g.Nodes))
	get := func(v rules.Value) z3.AST {
		if v.IsInput() {
			return inputs[v.Input()]
		}
		return vals[v.Node][v.Out]
	}
	for j, n := range g.Nodes {
		var args []z3.AST
		for spec, v := range n.Op.ParamValues(n.Params) {
			if v == rules.DegreeVar && spec.Degree {
				args = append(args, p.degreeVar())
			} else {
				args = append(args, p.ctx.Int(v))
			}
		}
		for _, a := range n.Args {
			args = append(args, get(a))
		}
		for _, sym := range n.Op.Z3 {
			d, ok := p.decls[sym]
			if !ok {
				return nil, fmt.Errorf("operator %s has no Z3 declaration", sym)
			}
			vals[j] = append(vals[j], p.ctx.Apply(d, args...))
		}
	}
	out := make([]z3.AST, len(g.Outputs))
	for i, o := range g.Outputs {
		out[i] = get(o)
	}
	return out, nil
}

// prove decides one rule in phases that share one budget of Z3's resource
// units, so that the verdict is the same on any machine under any load (the
// wall clock is only a safety net):
//
//  1. E-matching on the axioms alone, which proves most rules in a few
//     thousand units and gives up quickly on the rest;
//  2. pointwise lemmas about the rule's sub-terms (pointwise.go), then
//     E-matching again with them;
//  3. the rule with its concat chains re-associated (concatnorm.go).
//
// Model-based instantiation is not used: on the ≤4-operator candidates it
// proved nothing E-matching did not, and it spends the whole budget on
// every rule it cannot prove (BENCHMARKS.md, "Verification").
func (p *prover) prove(ctx context.Context, r *rules.Rule, b Budget) (Result, error) {
	ph := phases{p: p, ctx: ctx, budget: b, start: time.Now()}
	goal, err := p.goal(r)
	if err != nil {
		return Result{}, err
	}
	goal = p.withHypotheses(r, goal)
	res := ph.run(goal, nil)
	if !ph.open(res) {
		return ph.result(res), ph.err
	}
	terms := pointwiseTerms(r)
	lemmas := p.pointwiseLemmas(&ph, r.NumInputs, terms)
	if len(lemmas) > 0 {
		res = ph.run(goal, lemmas)
	}
	for _, sides := range chainAssociations(terms) {
		if !ph.open(res) {
			break
		}
		g, err := p.parsedGoal(r.NumInputs, sides[0], sides[1])
		if err != nil {
			ph.err = err
			break
		}
		res = ph.run(p.withHypotheses(r, g), lemmas)
	}
	return ph.result(res), ph.err
}

// result completes res with the time and units spent, and names why an
// undecided rule stopped.
func (ph *phases) result(res Result) Result {
	res.Elapsed, res.Units = time.Since(ph.start), ph.spent
	switch {
	case ph.err != nil || res.Status != Unknown || res.Reason == ReasonNotEntailed:
	case res.Elapsed >= ph.budget.WallClock:
		res.Reason = ReasonTimeout
	case ph.spent >= ph.budget.Units:
		res.Reason = ReasonBudget
	}
	return res
}

// phases runs the checks of one rule against its budget.
type phases struct {
	p      *prover
	ctx    context.Context
	budget Budget
	start  time.Time
	spent  uint64 // Z3 counts the context's resource units cumulatively
	err    error
}

// open reports whether res leaves the rule undecided with budget to spare.
func (ph *phases) open(res Result) bool {
	return ph.err == nil && res.Status != Proved && ph.spent < ph.budget.Units && time.Since(ph.start) < ph.budget.WallClock
}

func (ph *phases) limits() phaseLimits {
	return phaseLimits{units: ph.budget.Units - ph.spent, wall: ph.budget.WallClock - time.Since(ph.start)}
}

// run checks the goal with the axioms and lemmas.
func (ph *phases) run(goal z3.AST, lemmas []z3.AST) Result {
	res, spent, err := ph.p.check(ph.ctx, goal, lemmas, ph.limits())
	ph.spent = max(ph.spent, spent)
	if err != nil {
		ph.err = err
	}
	return res
}

// pointwiseLemmas proves, by real arithmetic on one element, equalities
// between a source and a target sub-term, and returns them as Tensor
// equations.
func (p *prover) pointwiseLemmas(ph *phases, inputs int, terms pwTerms) []z3.AST {
	var lemmas []z3.AST
	for _, pair := range lemmaCandidates(terms) {
		if !ph.open(Result{}) {
			break
		}
		if !p.holdsPointwise(ph, pair[0], pair[1]) {
			continue
		}
		eq, err := p.tensorFormula(inputs, "(= "+pair[0].key+" "+pair[1].key+")")
		if err != nil {
			ph.err = err
			return nil
		}
		lemmas = append(lemmas, eq)
	}
	return lemmas
}

// holdsPointwise decides s = d element by element within the budget.
func (p *prover) holdsPointwise(ph *phases, s, d *pwTerm) bool {
	fs, err := p.ctx.ParseSMTLIB2(pointwiseQuery(s, d), nil, nil)
	if err != nil {
		ph.err = fmt.Errorf("pointwise query: %w", err)
		return false
	}
	sv := p.ctx.NewSolver()
	defer sv.Close()
	lim := ph.limits()
	sv.SetResourceLimit(max(lim.units, 1))
	sv.SetTimeout(max(lim.wall, time.Millisecond))
	sv.SetBool("ctrl_c", false)
	for _, f := range fs {
		sv.Assert(f)
	}
	res, err := sv.Check(ph.ctx)
	used, _ := sv.Statistic("rlimit count")
	ph.spent = max(ph.spent, uint64(used))
	if err != nil {
		ph.err = err
		return false
	}
	return res == z3.Unsat
}

// tensorFormula parses one formula over the rule's inputs.
func (p *prover) tensorFormula(inputs int, text string) (z3.AST, error) {
	decls := maps.Clone(p.decls)
	for i := range inputs {
		name := fmt.Sprintf("input%d", i)
		decls[name] = p.ctx.FuncDecl(name, nil, p.tensor)
	}
	if p.hasDeg {
		decls[DegreeVarName] = p.ctx.FuncDecl(DegreeVarName, nil, p.ctx.IntSort())
	}
	fs, err := p.ctx.ParseSMTLIB2("(assert "+text+")", map[string]z3.Sort{axioms.TensorSort: p.tensor}, decls)
	if err != nil || len(fs) != 1 {
		return z3.AST{}, fmt.Errorf("formula %s: %v", text, err)
	}
	return fs[0], nil
}

// parsedGoal is "some output differs" for outputs given as terms.
func (p *prover) parsedGoal(inputs int, src, dst []*pwTerm) (z3.AST, error) {
	eqs := ""
	for i := range src {
		eqs += " (= " + src[i].key + " " + dst[i].key + ")"
	}
	goal := "(not (and" + eqs + "))"
	if p.hasDeg {
		goal = "(and (>= " + DegreeVarName + " 1) " + goal + ")"
	}
	return p.tensorFormula(inputs, goal)
}

// phaseLimits bounds one Check.
type phaseLimits struct {
	units uint64
	wall  time.Duration
}

// check runs one Check within lim and reports the resource units the
// context has spent so far, this Check included.
func (p *prover) check(ctx context.Context, goal z3.AST, lemmas []z3.AST, lim phaseLimits) (Result, uint64, error) {
	s := p.ctx.NewSimpleSolver()
	defer s.Close()
	s.SetResourceLimit(max(lim.units, 1))
	s.SetTimeout(max(lim.wall, time.Millisecond))
	s.SetBool("smt.mbqi", false)
	s.SetBool("ctrl_c", false) // Ctrl-C is Go's: it cancels the context, which interrupts Z3
	for i, a := range p.axioms {
		s.AssertTracked(a, p.names[i])
	}
	for i, l := range lemmas {
		s.AssertTracked(l, fmt.Sprintf("%s.%d", PointwiseAxiom, i))
	}
	s.Assert(goal)
	res, err := s.Check(ctx)
	used, _ := s.Statistic("rlimit count")
	if err != nil {
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			return Result{}, uint64(used), err
		}
		return Result{}, uint64(used), fmt.Errorf("z3: %w", err)
	}
	switch res {
	case z3.Unsat:
		return Result{Status: Proved, Core: coreNames(s.UnsatCore())}, uint64(used), nil
	case z3.Sat:
		return Result{Status: Unknown, Reason: ReasonNotEntailed}, uint64(used), nil
	}
	reason := s.ReasonUnknown()
	if reason == "(incomplete quantifiers)" || reason == "incomplete quantifiers" {
		reason = ReasonNotDerived
	}
	return Result{Status: Unknown, Reason: reason}, uint64(used), nil
}

// coreNames names the axioms of an unsat core, each pointwise lemma
// (tracked as pointwise.N) as PointwiseAxiom once.
func coreNames(core []string) []string {
	var out []string
	for _, name := range core {
		if strings.HasPrefix(name, PointwiseAxiom+".") {
			name = PointwiseAxiom
		}
		if !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}
