// Package verify proves candidate rules from the axioms with Z3: a rule
// holds when the axioms and "some output differs" are unsatisfiable over
// fresh input constants (DESIGN.md, Verification).
package verify

import (
	"context"
	"errors"
	"fmt"
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
	reg    *rules.Registry
	ctx    *z3.Context
	tensor z3.Sort
	decls  map[string]z3.FuncDecl
	axioms []z3.AST
	names  []string
}

func newProver(reg *rules.Registry, set *axioms.Set) (*prover, error) {
	c := z3.NewContext()
	p := &prover{reg: reg, ctx: c, tensor: c.UninterpretedSort(axioms.TensorSort), decls: map[string]z3.FuncDecl{}}
	for _, op := range reg.Ops() {
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
	sorts := map[string]z3.Sort{axioms.TensorSort: p.tensor}
	for _, a := range set.Axioms {
		fs, err := c.ParseSMTLIB2("(assert "+a.Formula()+")", sorts, p.decls)
		if err != nil || len(fs) != 1 {
			c.Close()
			return nil, fmt.Errorf("axiom %s (%s:%d): %v", a.Name, a.File, a.Line, err)
		}
		p.axioms = append(p.axioms, fs[0])
		p.names = append(p.names, a.Name)
	}
	if err := c.Err(); err != nil {
		c.Close()
		return nil, err
	}
	return p, nil
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
	g := p.ctx.Not(p.ctx.And(eqs...))
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
		for _, v := range n.Params {
			args = append(args, p.ctx.Int(v))
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

// prove decides one rule. It first tries E-matching alone, which proves
// most rules in a few thousand resource units and gives up quickly on the
// rest, then model-based instantiation with what is left of the budget,
// which finds the deeper derivations (through transpose, say) at a higher
// price. The budget is Z3's resource count, so the verdict is the same on
// any machine under any load; the wall clock is only a safety net.
func (p *prover) prove(ctx context.Context, r *rules.Rule, b Budget) (Result, error) {
	start := time.Now()
	goal, err := p.goal(r)
	if err != nil {
		return Result{}, err
	}
	var res Result
	spent := uint64(0) // Z3 counts the context's resource units cumulatively
	for _, mbqi := range []bool{false, true} {
		lim := phaseLimits{units: b.Units - spent, wall: b.WallClock - time.Since(start)}
		res, spent, err = p.check(ctx, goal, lim, mbqi)
		if err != nil || res.Status == Proved || spent >= b.Units || time.Since(start) >= b.WallClock {
			break
		}
	}
	res.Elapsed, res.Units = time.Since(start), spent
	switch {
	case res.Status != Unknown || res.Reason == ReasonNotEntailed:
	case res.Elapsed >= b.WallClock:
		res.Reason = ReasonTimeout
	case spent >= b.Units:
		res.Reason = ReasonBudget
	}
	return res, err
}

// phaseLimits bounds one Check.
type phaseLimits struct {
	units uint64
	wall  time.Duration
}

// check runs one Check within lim and reports the resource units the
// context has spent so far, this Check included.
func (p *prover) check(ctx context.Context, goal z3.AST, lim phaseLimits, mbqi bool) (Result, uint64, error) {
	s := p.ctx.NewSolver()
	defer s.Close()
	s.SetResourceLimit(max(lim.units, 1))
	s.SetTimeout(max(lim.wall, time.Millisecond))
	s.SetBool("smt.mbqi", mbqi)
	s.SetBool("ctrl_c", false) // Ctrl-C is Go's: it cancels the context, which interrupts Z3
	for i, a := range p.axioms {
		s.AssertTracked(a, p.names[i])
	}
	s.Assert(goal)
	res, err := s.Check(ctx)
	used, _ := s.Statistic("rlimit count")
	if err != nil {
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			return Result{}, 0, err
		}
		return Result{}, 0, fmt.Errorf("z3: %w", err)
	}
	switch res {
	case z3.Unsat:
		return Result{Status: Proved, Core: s.UnsatCore()}, uint64(used), nil
	case z3.Sat:
		return Result{Status: Unknown, Reason: ReasonNotEntailed}, uint64(used), nil
	}
	return Result{Status: Unknown, Reason: s.ReasonUnknown()}, uint64(used), nil
}
