package verify

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"rulebook/axioms"
	"rulebook/fingerprint"
	"rulebook/rules"
	"rulebook/verify/z3"
)

// Config selects the axioms and limits of a verification run.
type Config struct {
	Registry *rules.Registry
	Axioms   *axioms.Set
	Timeout  time.Duration // per query
	Workers  int
	// Seed draws the inputs of the concrete test that looks for a
	// counterexample when a rule is not proved.
	Seed     uint64
	Progress func(done, total int)
}

// Job is one rule to verify. Rule carries the shapes it was found with, when
// known, for the counterexample search.
type Job struct {
	ID   int64
	Rule *rules.Rule
}

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
	if cfg.Timeout <= 0 {
		cfg.Timeout = 10 * time.Second
	}
	var next, done atomic.Int64
	var mu sync.Mutex
	var firstErr error
	fail := func(err error) {
		mu.Lock()
		if firstErr == nil {
			firstErr = err
		}
		mu.Unlock()
		next.Store(int64(len(jobs)))
	}
	var wg sync.WaitGroup
	for w := 0; w < min(cfg.Workers, len(jobs)); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p, err := newProver(cfg.Registry, cfg.Axioms)
			if err != nil {
				fail(err)
				return
			}
			defer func() { p.close() }()
			for {
				i := int(next.Add(1) - 1)
				if i >= len(jobs) {
					return
				}
				res, err := decide(ctx, p, cfg, jobs[i].Rule)
				if err != nil && ctx.Err() == nil {
					// A Z3 failure on one rule makes it unknown, not the run
					// failed; its context may keep the error, so start afresh.
					res, err = Result{Status: Unknown, Reason: "z3 error: " + err.Error()}, nil
					p.close()
					if p, err = newProver(cfg.Registry, cfg.Axioms); err != nil {
						fail(err)
						return
					}
				}
				if err != nil {
					fail(fmt.Errorf("verify rule %d: %w", jobs[i].ID, err))
					return
				}
				mu.Lock()
				if firstErr == nil {
					err = emit(jobs[i], res)
				}
				mu.Unlock()
				if err != nil {
					fail(err)
					return
				}
				if d := done.Add(1); cfg.Progress != nil {
					cfg.Progress(int(d), len(jobs))
				}
			}
		}()
	}
	wg.Wait()
	if firstErr != nil {
		return firstErr
	}
	return ctx.Err()
}

// decide proves a rule or, failing that, looks for a concrete
// counterexample at the shapes it was found with.
func decide(ctx context.Context, p *prover, cfg Config, r *rules.Rule) (Result, error) {
	res, err := p.prove(ctx, r, cfg.Timeout)
	if err != nil || res.Status == Proved || len(r.InputShapes) == 0 {
		return res, err
	}
	if why, found := Counterexample(r, cfg.Seed); found {
		res.Status, res.Reason = Refuted, why
	}
	return res, nil
}

// counterexampleDraws is how many float draws the concrete test tries.
const counterexampleDraws = 16

// Counterexample evaluates both sides on float64 draws at the rule's
// recorded shapes and describes the first differing output element.
func Counterexample(r *rules.Rule, seed uint64) (string, bool) {
	in := fingerprint.Inputs{Seed: seed}
	for d := 0; d < counterexampleDraws; d++ {
		xs := make([]*rules.FloatTensor, r.NumInputs)
		for i, s := range r.InputShapes {
			xs[i] = in.Float(uint64(d), i, s)
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
					return fmt.Sprintf("output %d element %d: source %.6g, target %.6g (float draw %d, seed %d)", o, k, x, y, d, seed), true
				}
			}
		}
	}
	return "", false
}
