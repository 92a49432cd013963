package verify

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"rulebook/axioms"
	"rulebook/rules"
	"rulebook/store"
)

// resultBatch is how many results are written per transaction.
const resultBatch = 64

// Summary is what a verification of stored rules found.
type Summary struct {
	RunID   int64
	Solver  string
	Rules   int                  // rules verified
	Written int                  // results stored
	Counts  map[rules.Status]int // rules by status
	// Unproved are the rules not proved, in no particular order.
	Unproved []Unproved
}

// Unproved is a rule that was not proved, and why.
type Unproved struct {
	ID     int64
	Status rules.Status
	Reason string
	Rule   string // canonical text
}

// Stored verifies stored rules, with the shapes they were found with, as
// a "verify" run of db that records settings and toolVersion. Results are
// written in batches as they come, so that an interrupted run keeps what
// it finished and a re-run resumes; the axiom set is stored with them.
func Stored(ctx context.Context, db *store.Store, cfg Config, todo []store.Rule, settings map[string]any, toolVersion string) (*Summary, error) {
	jobs, err := storedJobs(cfg.Registry, todo)
	if err != nil {
		return nil, err
	}
	if err := db.SaveAxiomSet(ctx, axiomSetRecord(cfg.Axioms)); err != nil {
		return nil, err
	}
	config, err := json.Marshal(settings)
	if err != nil {
		return nil, fmt.Errorf("verify: %w", err)
	}
	runID, err := db.BeginRun(ctx, "verify", string(config), cfg.Seed, toolVersion)
	if err != nil {
		return nil, err
	}
	cfg.Budget = cfg.Budget.OrDefault()
	w := &proofWriter{db: db, set: cfg.Axioms.Hash, budget: cfg.Budget.Units, sum: Summary{RunID: runID, Solver: SolverVersion(), Rules: len(jobs), Counts: map[rules.Status]int{}}}
	err = Run(ctx, cfg, jobs, w.add)
	if flushErr := w.flush(context.WithoutCancel(ctx)); err == nil {
		err = flushErr
	}
	run := store.Run{ID: runID, Status: store.RunDone, Candidates: int64(len(jobs)), Stored: int64(w.sum.Written)}
	if err = db.EndRun(ctx, run, err); err != nil {
		if store.EndStatus(err) == store.RunInterrupted {
			return nil, fmt.Errorf("interrupted: run %d recorded as interrupted; %d results written, a re-run resumes: %w", runID, w.sum.Written, err)
		}
		return nil, err
	}
	return &w.sum, nil
}

// storedJobs parses the stored rules with the shapes they were found with.
func storedJobs(reg *rules.Registry, rs []store.Rule) ([]Job, error) {
	jobs := make([]Job, len(rs))
	for i, r := range rs {
		t, err := r.Checked(reg)
		if err != nil {
			return nil, fmt.Errorf("rule %d: %w", r.ID, err)
		}
		jobs[i] = Job{ID: r.ID, Rule: t.Rule()}
	}
	return jobs, nil
}

// axiomSetRecord is the axiom set as the store keeps it: one axiom a line,
// its name, comment and formula.
func axiomSetRecord(set *axioms.Set) store.AxiomSet {
	var b strings.Builder
	for _, a := range set.Axioms {
		fmt.Fprintf(&b, "%s\t%s\t%s\n", a.Name, a.Comment, a.Formula())
	}
	return store.AxiomSet{Hash: set.Hash, Dir: set.Dir, Axioms: len(set.Axioms), Text: b.String()}
}

// proofWriter batches results into transactions and sums them up.
type proofWriter struct {
	db      *store.Store
	set     string
	budget  uint64
	pending []store.Proof
	sum     Summary
}

func (w *proofWriter) add(j Job, r Result) error {
	w.pending = append(w.pending, store.Proof{RuleID: j.ID, RunID: w.sum.RunID, AxiomSet: w.set, Status: r.Status,
		Reason: r.Reason, Core: r.Core, Elapsed: r.Elapsed, Solver: w.sum.Solver, Budget: w.budget, Units: r.Units})
	w.sum.Counts[r.Status]++
	if r.Status != Proved {
		w.sum.Unproved = append(w.sum.Unproved, Unproved{ID: j.ID, Status: r.Status, Reason: r.Reason, Rule: j.Rule.Format().String()})
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
	w.sum.Written += len(w.pending)
	w.pending = w.pending[:0]
	return nil
}

// WriteText prints the summary as 'rulebook verify' does: the axiom set
// and solver, the counts, then every rule not proved with its reason.
func (s *Summary) WriteText(out io.Writer, set *axioms.Set, elapsed time.Duration) {
	fmt.Fprintf(out, "axiom set %s: %d axioms from %s; %s\n", set.Hash, len(set.Axioms), set.Dir, s.Solver)
	fmt.Fprintf(out, "%d rules verified in %s: %d proved, %d unknown, %d refuted\n", s.Rules, elapsed.Round(time.Millisecond),
		s.Counts[Proved], s.Counts[Unknown], s.Counts[Refuted])
	if len(s.Unproved) == 0 {
		return
	}
	lines := make([]string, len(s.Unproved))
	for i, u := range s.Unproved {
		lines[i] = fmt.Sprintf("%6d  %-8s %-13s %s", u.ID, u.Status, u.Reason, u.Rule)
	}
	sort.Strings(lines)
	fmt.Fprintln(out, "not proved:")
	for _, l := range lines {
		fmt.Fprintln(out, l)
	}
}
