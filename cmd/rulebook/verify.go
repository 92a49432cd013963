package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"runtime"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"rulebook/axioms"
	"rulebook/rules"
	"rulebook/store"
	"rulebook/verify"
)

type verifyOptions struct {
	timeout    time.Duration
	ruleID     int64
	recheck    bool
	workers    int
	seed       uint64
	noProgress bool
}

func newVerifyCmd() *cobra.Command {
	var o verifyOptions
	cmd := &cobra.Command{
		Use:   "verify [DIR]",
		Short: "Prove candidate rules from the axioms in DIR (default axioms/) with Z3",
		Long: `verify proves each rule from the axiom files (*.smt2) in DIR: a rule holds when
the axioms together with "some output differs" are unsatisfiable over fresh
inputs. Each query first runs Z3's E-matching alone, then model-based
instantiation, within --timeout; nothing waits longer.

Each result is stored with the time taken, the Z3 version, the axiom set's hash
and the axioms the proof used (see 'rulebook why ID'):
  proved   the axioms entail the rule;
  unknown  not proved: "timeout" or "not entailed";
  refuted  not proved, and a float64 test at the shapes the rule was found
           with gives different outputs.

Rules that already have a result under the same axiom set are skipped, so an
interrupted run resumes where it stopped; --recheck verifies every rule again.`,
		Example: `  rulebook verify
  rulebook verify axioms/ --timeout 5s --rule 42`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir := "axioms"
			if len(args) == 1 {
				dir = args[0]
			}
			return runVerify(cmd.Context(), cmd, dir, o)
		},
	}
	f := cmd.Flags()
	f.DurationVar(&o.timeout, "timeout", 2*time.Second, "time limit per rule")
	f.Int64Var(&o.ruleID, "rule", 0, "verify only this rule (again, if it has a result)")
	f.BoolVar(&o.recheck, "recheck", false, "verify every rule again, even those with a result under this axiom set")
	f.IntVar(&o.workers, "workers", runtime.GOMAXPROCS(0), "parallel Z3 solvers")
	f.Uint64Var(&o.seed, "seed", 1, "seed of the counterexample search")
	f.BoolVar(&o.noProgress, "no-progress", false, "do not draw a progress bar")
	return cmd
}

// resultBatch is how many results are written per transaction.
const resultBatch = 64

func runVerify(ctx context.Context, cmd *cobra.Command, dir string, o verifyOptions) error {
	if o.timeout <= 0 {
		return fmt.Errorf("--timeout must be positive, got %s", o.timeout)
	}
	if o.workers < 1 {
		return fmt.Errorf("--workers must be at least 1, got %d", o.workers)
	}
	reg := rules.Default()
	set, err := axioms.Load(dir, reg) // before the database: a bad file changes nothing
	if err != nil {
		return err
	}
	db, err := store.Open(ctx, dbPath(cmd))
	if err != nil {
		return err
	}
	defer db.Close()
	todo, err := selectRules(ctx, db, set.Hash, o)
	if err != nil {
		return err
	}
	jobs, err := verifyJobs(reg, todo)
	if err != nil {
		return err
	}
	if err := db.SaveAxiomSet(ctx, axiomSetRecord(set)); err != nil {
		return err
	}
	config, _ := json.Marshal(map[string]any{"axioms": dir, "axiom_set": set.Hash, "timeout": o.timeout.String(), "rule": o.ruleID, "recheck": o.recheck})
	runID, err := db.BeginRun(ctx, "verify", string(config), o.seed, version)
	if err != nil {
		return err
	}
	w := &proofWriter{db: db, run: runID, set: set.Hash, solver: verify.SolverVersion(), counts: map[rules.Status]int{}}
	bar := newProgress(cmd.ErrOrStderr(), o.noProgress)
	start := time.Now()
	err = verify.Run(ctx, verify.Config{Registry: reg, Axioms: set, Timeout: o.timeout, Workers: o.workers, Seed: o.seed,
		Progress: func(done, total int) {
			bar.update(enumProgress("verify", done, total))
		}}, jobs, w.add)
	bar.finish()
	flushErr := w.flush(context.WithoutCancel(ctx))
	run := store.Run{ID: runID, Status: "done", Candidates: int64(len(jobs)), Stored: int64(w.written)}
	if err == nil {
		err = flushErr
	}
	if err = db.EndRun(ctx, run, err); err != nil {
		if store.EndStatus(err) == store.RunInterrupted {
			return fmt.Errorf("interrupted: run %d recorded as interrupted; %d results written, a re-run resumes: %w", runID, w.written, err)
		}
		return err
	}
	printVerifySummary(cmd.OutOrStdout(), set, w, len(jobs), time.Since(start))
	return nil
}

func selectRules(ctx context.Context, db *store.Store, set string, o verifyOptions) ([]store.Rule, error) {
	if o.ruleID != 0 {
		r, err := db.Rule(ctx, o.ruleID)
		if err != nil {
			return nil, fmt.Errorf("--rule: %w", err)
		}
		return []store.Rule{r}, nil
	}
	return db.RulesToVerify(ctx, set, o.recheck)
}

// verifyJobs parses the stored rules with the shapes they were found with.
func verifyJobs(reg *rules.Registry, rs []store.Rule) ([]verify.Job, error) {
	jobs := make([]verify.Job, len(rs))
	for i, r := range rs {
		t, err := r.Checked(reg)
		if err != nil {
			return nil, fmt.Errorf("rule %d: %w", r.ID, err)
		}
		jobs[i] = verify.Job{ID: r.ID, Rule: t.Rule()}
	}
	return jobs, nil
}

func axiomSetRecord(set *axioms.Set) store.AxiomSet {
	var b strings.Builder
	for _, a := range set.Axioms {
		fmt.Fprintf(&b, "%s\t%s\t%s\n", a.Name, a.Comment, a.Formula())
	}
	return store.AxiomSet{Hash: set.Hash, Dir: set.Dir, Axioms: len(set.Axioms), Text: b.String()}
}

// proofWriter batches results into transactions.
type proofWriter struct {
	db          *store.Store
	run         int64
	set, solver string
	pending     []store.Proof
	written     int
	counts      map[rules.Status]int
	unproved    []string
}

func (w *proofWriter) add(j verify.Job, r verify.Result) error {
	w.pending = append(w.pending, store.Proof{RuleID: j.ID, RunID: w.run, AxiomSet: w.set, Status: r.Status,
		Reason: r.Reason, Core: r.Core, Elapsed: r.Elapsed, Solver: w.solver})
	w.counts[r.Status]++
	if r.Status != verify.Proved {
		w.unproved = append(w.unproved, fmt.Sprintf("%6d  %-8s %-13s %s", j.ID, r.Status, r.Reason, j.Rule.Format()))
	}
	if len(w.pending) >= resultBatch {
		return w.flush(context.Background())
	}
	return nil
}

func (w *proofWriter) flush(ctx context.Context) error {
	if len(w.pending) == 0 {
		return nil
	}
	if err := w.db.RecordProofs(ctx, w.pending); err != nil {
		return err
	}
	w.written += len(w.pending)
	w.pending = w.pending[:0]
	return nil
}

func printVerifySummary(out io.Writer, set *axioms.Set, w *proofWriter, total int, elapsed time.Duration) {
	fmt.Fprintf(out, "axiom set %s: %d axioms from %s; %s\n", set.Hash, len(set.Axioms), set.Dir, w.solver)
	fmt.Fprintf(out, "%d rules verified in %s: %d proved, %d unknown, %d refuted\n", total, elapsed.Round(time.Millisecond),
		w.counts[verify.Proved], w.counts[verify.Unknown], w.counts[verify.Refuted])
	if len(w.unproved) > 0 {
		sort.Strings(w.unproved)
		fmt.Fprintln(out, "not proved:")
		for _, u := range w.unproved {
			fmt.Fprintln(out, u)
		}
	}
}

func newWhyCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "why ID",
		Short: "Show a rule, its status and the axioms its proof used",
		Args:  cobra.ExactArgs(1),
		RunE: withRule(func(cmd *cobra.Command, db *store.Store, r store.Rule) error {
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "rule %d: %s => %s\nstatus: %s\n", r.ID, r.Src, r.Dst, r.Status)
			p, ok, err := db.LatestProof(cmd.Context(), r.ID)
			if err != nil {
				return err
			}
			if !ok {
				fmt.Fprintln(out, "not verified yet: run 'rulebook verify'")
				return nil
			}
			fmt.Fprintf(out, "verified by run %d against axiom set %s with %s in %s\n", p.RunID, p.AxiomSet, p.Solver, p.Elapsed.Round(time.Microsecond))
			if p.Reason != "" {
				fmt.Fprintf(out, "reason: %s\n", p.Reason)
			}
			if len(p.Core) == 0 {
				return nil
			}
			set, err := db.AxiomSetByHash(cmd.Context(), p.AxiomSet)
			if err != nil {
				return err
			}
			comments := map[string]string{}
			for _, line := range strings.Split(set.Text, "\n") {
				if f := strings.SplitN(line, "\t", 3); len(f) == 3 {
					comments[f[0]] = f[1]
				}
			}
			fmt.Fprintf(out, "the proof uses %d axioms:\n", len(p.Core))
			for _, name := range p.Core {
				fmt.Fprintf(out, "  %-28s %s\n", name, comments[name])
			}
			return nil
		}),
	}
}
