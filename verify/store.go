package verify

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"rulebook/enumerate"
	"rulebook/internal/english"
	"slices"
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

// Request is one verification of stored rules: which rules, and what the
// run records.
type Request struct {
	// Selection says which rules: by default those without a result under
	// the axiom set, solver and budget.
	Selection
	// Settings and ToolVersion are recorded with the run.
	Settings    map[string]any
	ToolVersion string
	// Waiting, if not nil, hears of the earlier verify run of the same
	// database that this one waits for.
	Waiting func(store.Run)
}

// Stored verifies stored rules, with the shapes they were found with, as
// a "verify" run of db. It refuses an axiom set that would prove false
// rules (RequireSound) before recording anything but the set. Verify runs
// of one database take turns: a run waits for the earlier ones still
// running and then picks the rules that still need a result, so that no
// rule is proved twice. Results are written in batches as they come, so
// that an interrupted run keeps what it finished and a re-run resumes;
// each records what it proved (store.Claim).
func Stored(ctx context.Context, db *store.Store, cfg Config, req Request) (*Summary, error) {
	if err := req.Check(); err != nil {
		return nil, err
	}
	if err := cfg.Budget.Check(); err != nil {
		return nil, err
	}
	if req.RuleID != 0 {
		if _, err := db.Rule(ctx, req.RuleID); err != nil {
			return nil, err
		}
	}
	if err := RequireSound(ctx, db, cfg.Registry, cfg.Axioms, cfg.Workers); err != nil {
		return nil, err
	}
	config, err := json.Marshal(req.Settings)
	if err != nil {
		return nil, fmt.Errorf("verify: %w", err)
	}
	runID, err := db.BeginRun(ctx, "verify", string(config), cfg.Seed, req.ToolVersion)
	if err != nil {
		return nil, err
	}
	cfg.Budget = cfg.Budget.OrDefault()
	w := &proofWriter{db: db, set: cfg.Axioms.Hash, budget: cfg.Budget.Units, texts: map[int64]rules.Text{},
		sum: Summary{RunID: runID, Solver: SolverVersion(), Counts: map[rules.Status]int{}}}
	err = w.verify(ctx, cfg, req)
	if flushErr := w.flush(context.WithoutCancel(ctx)); err == nil {
		err = flushErr
	}
	run := store.Run{ID: runID, Status: store.RunDone, Candidates: int64(w.sum.Rules), Stored: int64(w.sum.Written)}
	if err = db.EndRun(ctx, run, err); err != nil {
		if store.EndStatus(err) == store.RunInterrupted {
			return nil, fmt.Errorf("interrupted: run %d recorded as interrupted; %d results written, a re-run resumes: %w", runID, w.sum.Written, err)
		}
		return nil, err
	}
	return &w.sum, nil
}

// verify waits for the earlier verify runs, selects the rules req asks
// for and verifies them.
func (w *proofWriter) verify(ctx context.Context, cfg Config, req Request) error {
	if err := w.db.AwaitEarlierRuns(ctx, w.sum.RunID, "verify", req.Waiting); err != nil {
		return err
	}
	todo, err := SelectRules(ctx, w.db, w.set, w.budget, req.Selection)
	if err != nil {
		return err
	}
	jobs, err := storedJobs(ctx, w.db, cfg.Registry, todo)
	if err != nil {
		return err
	}
	for _, r := range todo {
		w.texts[r.ID] = r.Text
	}
	w.sum.Rules = len(jobs)
	return Run(ctx, cfg, jobs, w.add)
}

// selectRules is the rules req asks for, as they are now.

// consistencyTimeout bounds Z3's consistency check of an axiom set, which
// it decides for the built-in set in about 20 ms.
const consistencyTimeout = 10 * time.Second

// soundnessMaxDim is the largest extent of the concrete check verify
// makes of an axiom set: that of 'rulebook axioms check' by default
// (ConcreteBound), so that the gate is as strong as the command. Some
// axioms fail only at extent 3. The shipped set has passed it already
// (axioms.ShippedDigest); another set takes it once per database.
const soundnessMaxDim = 3

// ConcreteBound is the concrete check of an axiom set up to extent
// maxDim: every shape up to rank 4, the parallel axioms also at combined
// layouts. 'rulebook axioms check' and RequireSound share it.
func ConcreteBound(maxDim int) axioms.Bound {
	bound := axioms.DefaultBound()
	bound.Dims = bound.Dims[:0]
	for d := 1; d <= maxDim; d++ {
		bound.Dims = append(bound.Dims, d)
	}
	return bound
}

// ErrUnsoundAxioms is matched (errors.Is) by RequireSound's refusal of an
// axiom set that is contradictory or holds a false axiom.
var ErrUnsoundAxioms = errors.New("unsound axioms")

// unsoundError is RequireSound's one-line refusal; it matches
// ErrUnsoundAxioms.
type unsoundError struct{ msg string }

func (e *unsoundError) Error() string { return e.msg }
func (e *unsoundError) Unwrap() error { return ErrUnsoundAxioms }

// RequireSound refuses an axiom set that would prove false rules: one Z3
// finds inconsistent (or cannot show consistent), or one with an axiom
// that fails the concrete check of 'rulebook axioms check'
// (ConcreteBound(3)). (Axioms are
// equations, which a one-tensor model always satisfies, so a false axiom
// such as "ewadd returns its first operand" passes Z3's check; the
// concrete check catches it.) It saves the set in db with the verdict,
// so that the check runs once per set; workers evaluate the axioms.
func RequireSound(ctx context.Context, db *store.Store, reg *rules.Registry, set *axioms.Set, workers int) error {
	if err := db.SaveAxiomSet(ctx, axiomSetRecord(set)); err != nil {
		return err
	}
	verdict, detail, err := db.AxiomCheck(ctx, set.Hash)
	if err != nil {
		return err
	}
	if verdict == "" {
		if verdict, detail, err = checkSoundness(ctx, reg, set, workers); err != nil {
			return err
		}
		if err := db.RecordAxiomCheck(ctx, set.Hash, verdict, detail); err != nil {
			return err
		}
	}
	switch verdict {
	case store.AxiomsSound:
		return nil
	case store.AxiomsInconsistent:
		return &unsoundError{fmt.Sprintf("the axioms in %s contradict each other (%s), so they would prove every rule; nothing was verified", set.Dir, detail)}
	}
	return &unsoundError{fmt.Sprintf("%s: the axioms in %s would prove false rules, so nothing was verified ('rulebook axioms check' says more)", detail, set.Dir)}
}

// checkSoundness runs Z3's consistency check, then the concrete check.
// A consistency Z3 cannot decide is an error, not a verdict: it is not
// cached, and nothing is verified.
func checkSoundness(ctx context.Context, reg *rules.Registry, set *axioms.Set, workers int) (verdict, detail string, err error) {
	status, core, err := Consistency(ctx, reg, set, consistencyTimeout)
	switch {
	case err != nil:
		return "", "", fmt.Errorf("consistency of the axioms in %s: %w", set.Dir, err)
	case status == Inconsistent:
		return store.AxiomsInconsistent, strings.Join(core, ", "), nil
	case status != Consistent:
		return "", "", fmt.Errorf("could not decide within %s whether the axioms in %s are consistent (Z3: %s); an inconsistent set would prove every rule, so nothing was verified",
			consistencyTimeout, set.Dir, strings.Join(core, " "))
	}
	if set.Digest() == axioms.ShippedDigest {
		return store.AxiomsSound, "", nil // checked under the same bound by TestShippedAxiomsHoldConcretely
	}
	reports, err := axioms.Validate(ctx, set, rules.All(), ConcreteBound(soundnessMaxDim), workers)
	if err != nil {
		return "", "", fmt.Errorf("concrete check of the axioms in %s: %w", set.Dir, err)
	}
	for _, r := range reports {
		if !r.OK() {
			return store.AxiomsFalse, fmt.Sprintf("axiom %s (%s:%d) is false: %s", r.Axiom.Name, r.Axiom.File, r.Axiom.Line, r.Counterexample), nil
		}
	}
	return store.AxiomsSound, "", nil
}

// storedJobs parses the stored rules with the shapes they were found with.
// A rule first found by a generation over parallel degrees is claimed at
// every layout (Job.Layouts).
func storedJobs(ctx context.Context, db *store.Store, reg *rules.Registry, rs []store.Rule) ([]Job, error) {
	runs, err := db.Runs(ctx)
	if err != nil {
		return nil, err
	}
	parallel := map[int64]bool{}
	for _, run := range runs {
		parallel[run.ID] = enumerate.OverDegrees(run)
	}
	jobs := make([]Job, len(rs))
	for i, r := range rs {
		t, err := r.Checked(reg)
		if err != nil {
			return nil, fmt.Errorf("rule %d: %w", r.ID, err)
		}
		jobs[i] = Job{ID: r.ID, Rule: t.Rule(), Layouts: parallel[r.RunID]}
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
	texts   map[int64]rules.Text // the rules as verified, by id
	pending []store.Proof
	sum     Summary
}

func (w *proofWriter) add(j Job, r Result) error {
	w.pending = append(w.pending, store.Proof{RuleID: j.ID, Text: w.texts[j.ID], RunID: w.sum.RunID, AxiomSet: w.set, Status: r.Status,
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

// ShownUnproved is how many rules not proved WriteText lists of each
// status; the rest it counts and says how to list.
const ShownUnproved = 10

// WriteText prints the summary as 'rulebook verify' does: the axiom set
// and solver, the counts, then the rules not proved with their reasons,
// by status, the first ShownUnproved of each in id order and a count of
// the rest: a run that leaves thousands unknown stays readable.
func (s *Summary) WriteText(out io.Writer, set *axioms.Set, elapsed time.Duration) {
	fmt.Fprintf(out, "axiom set %s: %s from %s; %s\n", set.Hash, english.Nouns(len(set.Axioms), "axiom"), set.Dir, s.Solver)
	fmt.Fprintf(out, "%s verified in %s: %d proved, %d unknown, %d refuted\n", english.Nouns(s.Rules, "rule"), elapsed.Round(time.Millisecond),
		s.Counts[Proved], s.Counts[Unknown], s.Counts[Refuted])
	if len(s.Unproved) == 0 {
		return
	}
	unproved := slices.Clone(s.Unproved)
	sort.Slice(unproved, func(i, j int) bool {
		a, b := unproved[i], unproved[j]
		return a.Status < b.Status || a.Status == b.Status && a.ID < b.ID
	})
	fmt.Fprintln(out, "not proved:")
	shown := map[rules.Status]int{}
	for _, u := range unproved {
		if shown[u.Status]++; shown[u.Status] <= ShownUnproved {
			fmt.Fprintf(out, "%6d  %-8s %-13s %s\n", u.ID, u.Status, u.Reason, u.Rule)
		}
	}
	for _, st := range slices.Sorted(maps.Keys(shown)) {
		if more := shown[st] - ShownUnproved; more > 0 {
			fmt.Fprintf(out, "  … and %d more %s: rulebook list --status %s\n", more, st, st)
		}
	}
}
