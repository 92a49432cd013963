package verify

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"rulebook/axioms"
	"rulebook/internal/english"
	"rulebook/internal/pool"
	"rulebook/internal/progress"
	"rulebook/rules"
	"rulebook/verify/z3"
)

// Verdicts of the axiom checks.
const (
	Consistent   = "consistent"
	Inconsistent = "inconsistent"
	Redundant    = "redundant"
	Independent  = "independent"
	// Undetermined is a check Z3 could not decide; a verdict about axioms,
	// spelled as the rule status Unknown is.
	Undetermined = "unknown"
)

// Consistency asks whether the axioms are satisfiable together. It
// returns Consistent, Inconsistent (with the axioms that conflict) or
// Undetermined (with Z3's reason).
func Consistency(ctx context.Context, reg *rules.Registry, set *axioms.Set, timeout time.Duration) (string, []string, error) {
	p, err := newSetProver(set)
	if err != nil {
		return "", nil, err
	}
	defer p.close()
	s := p.ctx.NewSolver()
	defer s.Close()
	s.SetTimeout(timeout)
	s.SetBool("ctrl_c", false)
	for i, a := range p.axioms {
		s.AssertTracked(a, p.names[i])
	}
	res, err := s.Check(ctx)
	switch {
	case err != nil:
		return "", nil, err
	case res == z3.Sat:
		return Consistent, nil, nil
	case res == z3.Unsat:
		return Inconsistent, s.UnsatCore(), nil
	}
	return Undetermined, []string{s.ReasonUnknown()}, nil
}

// Redundancy is whether the other axioms entail one axiom.
type Redundancy struct {
	Axiom  string
	Status string   // Redundant, Independent or Undetermined
	By     []string // the axioms that entail it, when redundant
	Reason string   // why unknown
	// Elapsed is the time the check took: within its timeout, up to the
	// time Z3 takes to notice it.
	Elapsed time.Duration
}

// Redundancies checks every axiom against the others, each within
// timeout. report hears of each axiom done, as stage "redundancy".
func Redundancies(ctx context.Context, reg *rules.Registry, set *axioms.Set, timeout time.Duration, workers int, report progress.Func) ([]Redundancy, error) {
	out := make([]Redundancy, len(set.Axioms))
	provers := make([]*prover, max(workers, 1)) // one per worker, made on its first axiom
	defer func() {
		for _, p := range provers {
			if p != nil {
				p.close()
			}
		}
	}()
	tick := report.Counter("redundancy", len(set.Axioms))
	err := pool.Each(ctx, len(provers), len(set.Axioms), func(w, i int) error {
		if provers[w] == nil {
			p, err := newSetProver(set)
			if err != nil {
				return err
			}
			provers[w] = p
		}
		r, err := provers[w].redundancy(ctx, set.Axioms[i], i, timeout)
		if err != nil {
			return fmt.Errorf("axiom %s: %w", set.Axioms[i].Name, err)
		}
		out[i] = r
		tick()
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// redundancy asks whether the axioms other than number i entail it.
func (p *prover) redundancy(ctx context.Context, a *axioms.Axiom, i int, timeout time.Duration) (Redundancy, error) {
	start := time.Now()
	neg, err := p.ctx.ParseSMTLIB2("(assert (not "+a.SolverFormula()+"))", map[string]z3.Sort{axioms.TensorSort: p.tensor}, p.decls)
	if err != nil || len(neg) != 1 {
		return Redundancy{}, fmt.Errorf("negate: %v", err)
	}
	r := Redundancy{Axiom: a.Name, Status: Undetermined}
	for _, mbqi := range []bool{false, true} {
		s := p.ctx.NewSolver()
		s.SetTimeout(max(timeout-time.Since(start), time.Millisecond))
		s.SetBool("smt.mbqi", mbqi)
		s.SetBool("ctrl_c", false) // Ctrl-C is Go's: it cancels the context, which interrupts Z3
		for j, ax := range p.axioms {
			if j != i {
				s.AssertTracked(ax, p.names[j])
			}
		}
		s.Assert(neg[0])
		res, err := s.Check(ctx)
		switch {
		case err != nil:
			s.Close()
			return r, err
		case res == z3.Unsat:
			r.Status, r.By, r.Reason = Redundant, s.UnsatCore(), ""
		case res == z3.Sat:
			r.Status, r.Reason = Independent, ""
		default:
			r.Reason = s.ReasonUnknown()
		}
		s.Close()
		if r.Status != Undetermined || time.Since(start) >= timeout {
			break
		}
	}
	r.Elapsed = time.Since(start)
	return r, nil
}

// AxiomCheck configures CheckAxioms.
type AxiomCheck struct {
	Timeout time.Duration // per Z3 query; ten times that for consistency
	Workers int
	MaxDim  int // largest extent of the concrete check
	// Progress hears each step's axioms checked so far, by step:
	// "redundancy" and "concrete" (minutes on two cores).
	Progress progress.Func
}

// CheckAxioms validates an axiom set in three steps and reports each on out
// as it finishes: consistency, redundancy (reported only) and the concrete
// check of every axiom on small tensors. It fails if the set is
// inconsistent or an axiom is false.
func CheckAxioms(ctx context.Context, out io.Writer, reg *rules.Registry, set *axioms.Set, c AxiomCheck) error {
	fmt.Fprintf(out, "%s in %s (set %s)\n", english.Nouns(len(set.Axioms), "axiom"), set.Dir, set.Hash)
	var failures []string
	status, core, err := Consistency(ctx, reg, set, 10*c.Timeout)
	if err != nil {
		return err
	}
	switch status {
	case Consistent:
		fmt.Fprintln(out, "consistency: consistent (Z3 found a model)")
	case Inconsistent:
		fmt.Fprintf(out, "consistency: INCONSISTENT: %s contradict each other\n", strings.Join(core, ", "))
		failures = append(failures, "the axioms are inconsistent")
	default:
		fmt.Fprintf(out, "consistency: unknown (%s)\n", strings.Join(core, " "))
	}
	if err := reportRedundancy(ctx, out, reg, set, c); err != nil {
		return err
	}
	falseAxioms, err := reportConcrete(ctx, out, reg, set, c)
	if err != nil {
		return err
	}
	if failures = append(failures, falseAxioms...); len(failures) > 0 {
		return fmt.Errorf("%s", strings.Join(failures, "; "))
	}
	return nil
}

func reportRedundancy(ctx context.Context, out io.Writer, reg *rules.Registry, set *axioms.Set, c AxiomCheck) error {
	reds, err := Redundancies(ctx, reg, set, c.Timeout, c.Workers, c.Progress)
	if err != nil {
		return err
	}
	n := map[string]int{}
	for _, r := range reds {
		n[r.Status]++
		if r.Status == Redundant {
			fmt.Fprintf(out, "redundancy: %s is entailed by %s\n", r.Axiom, strings.Join(r.By, ", "))
		}
	}
	fmt.Fprintf(out, "redundancy: %d redundant, %d independent, %d not shown redundant within %s (reported, not an error)\n",
		n[Redundant], n[Independent], n[Undetermined], c.Timeout)
	return nil
}

// reportConcrete evaluates every axiom on small tensors and returns the
// failures.
func reportConcrete(ctx context.Context, out io.Writer, reg *rules.Registry, set *axioms.Set, c AxiomCheck) ([]string, error) {
	bound := ConcreteBound(c.MaxDim)
	bound.Progress = c.Progress
	reports, err := axioms.Validate(ctx, set, rules.All(), bound, c.Workers)
	if err != nil {
		return nil, err
	}
	var failures []string
	total := 0
	for _, r := range reports {
		total += r.Instances
		if !r.OK() {
			fmt.Fprintf(out, "concrete: %s (%s:%d) is FALSE: %s\n", r.Axiom.Name, r.Axiom.File, r.Axiom.Line, r.Counterexample)
			failures = append(failures, "axiom "+r.Axiom.Name+" is false")
		}
	}
	fmt.Fprintf(out, "concrete: %d of %s hold at all %s (shapes up to rank 4, extents 1..%d; parallel axioms also at every combined layout of ranks 2 and 3, 4 for conv2d, the pools, attention and batch normalisation, 1 and 2 for lookups, at degrees 2 and 3)\n",
		len(reports)-len(failures), english.Nouns(len(reports), "axiom"), english.Nouns(total, "instance"), c.MaxDim)
	return failures, nil
}
