package store

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"rulebook/rules"
)

// AxiomSet is a set of axioms rules are verified against, by content hash.
type AxiomSet struct {
	Hash   string
	Dir    string
	Axioms int
	// Text has one line per axiom: name, tab, comment, tab, formula.
	Text string
}

// Proof is one verification of one rule.
type Proof struct {
	RuleID int64
	// Text is the rule as it was verified: its canonical text and the
	// shapes it was checked at. RecordProofs needs it for the claim.
	Text     rules.Text
	RunID    int64
	AxiomSet string
	Status   rules.Status // proved, unknown or refuted
	Reason   string
	Core     []string // axioms the proof used
	Elapsed  time.Duration
	Solver   string
	// Budget is the Z3 resource units the proof was allowed (0: a
	// wall-clock timeout, before schema v7); Units what it spent.
	Budget, Units uint64
	Created       time.Time
	// Claim is what the proof vouches for (see Claim), as recorded; ""
	// for proofs written before schema v8.
	Claim string
}

// Claim is the hash of what a proof vouches for: the rule's canonical text
// with the shapes it was verified at, the axiom set, the solver, the
// budget and the verdict. Each proof records it; a release counts a rule as
// proved only when its latest proof's claim equals the claim computed from
// the rule's current columns, so a rule whose text, shapes or verdict were
// edited with SQL (rules.dst, rules.inputs, rules.status, proofs.status…)
// is not released. It guards against edits, not forgery: anyone can
// compute a SHA-256.
func Claim(t rules.Text, axiomSet, solver string, budget uint64, status rules.Status) string {
	h := sha256.New()
	fmt.Fprintf(h, "rulebook proof 1\nrule %s\ninputs %s\nconstants %s\naxiom set %s\nsolver %s\nbudget %d\nstatus %s\n",
		t.String(), t.Inputs, t.Constants, axiomSet, solver, budget, status)
	return hex.EncodeToString(h.Sum(nil))
}

// claim is Claim for this proof.
func (p Proof) claim() string { return Claim(p.Text, p.AxiomSet, p.Solver, p.Budget, p.Status) }

// Prover names the solver and budget a proof was decided under, as a
// version records them: "Z3 4.8.12.0, rlimit 200000".
func (p Proof) Prover() string { return ProverName(p.Solver, p.Budget) }

// ProverName is Proof.Prover for a solver version and a budget.
func ProverName(solver string, budget uint64) string {
	if !strings.HasPrefix(solver, "Z3") {
		solver = "Z3 " + solver
	}
	if budget == 0 {
		return solver + ", wall-clock timeout"
	}
	return fmt.Sprintf("%s, rlimit %d", solver, budget)
}

// SaveAxiomSet records an axiom set; saving the same hash again is a no-op.
func (s *Store) SaveAxiomSet(ctx context.Context, a AxiomSet) error {
	_, err := s.db.ExecContext(ctx, `INSERT INTO axiom_sets(hash, dir, axioms, text, created_at)
		VALUES (?, ?, ?, ?, ?) ON CONFLICT(hash) DO NOTHING`, a.Hash, a.Dir, a.Axioms, a.Text, formatTime(time.Now()))
	if err != nil {
		return fmt.Errorf("store: save axiom set %s: %w", a.Hash, err)
	}
	return nil
}

// AxiomSetByHash loads a saved axiom set.
func (s *Store) AxiomSetByHash(ctx context.Context, hash string) (AxiomSet, error) {
	a := AxiomSet{Hash: hash}
	err := s.db.QueryRowContext(ctx, `SELECT dir, axioms, text FROM axiom_sets WHERE hash = ?`, hash).Scan(&a.Dir, &a.Axioms, &a.Text)
	if errors.Is(err, sql.ErrNoRows) {
		return a, fmt.Errorf("axiom set %s not found: %w", hash, err)
	}
	if err != nil {
		return a, fmt.Errorf("store: axiom set %s: %w", hash, err)
	}
	return a, nil
}

// RecordProofs stores verification results, each with its claim, and sets
// each rule's status, in one transaction: either all of them are written or
// none.
func (s *Store) RecordProofs(ctx context.Context, proofs []Proof) error {
	for _, p := range proofs {
		if p.Text.Src == "" || p.Text.Dst == "" {
			return fmt.Errorf("store: record proof of rule %d: the verified text is missing", p.RuleID)
		}
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("store: record proofs: %w", err)
	}
	defer tx.Rollback()
	ins, err := tx.PrepareContext(ctx, `INSERT INTO proofs(rule_id, run_id, axiom_set, status, reason, core, elapsed_ms, solver, budget, units, claim, created_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`)
	if err != nil {
		return fmt.Errorf("store: record proofs: %w", err)
	}
	upd, err := tx.PrepareContext(ctx, `UPDATE rules SET status = ? WHERE id = ?`)
	if err != nil {
		return fmt.Errorf("store: record proofs: %w", err)
	}
	now := formatTime(time.Now())
	for _, p := range proofs {
		core := p.Core
		if core == nil {
			core = []string{}
		}
		cj, _ := json.Marshal(core)
		ms := float64(p.Elapsed.Microseconds()) / 1000
		if _, err := ins.ExecContext(ctx, p.RuleID, p.RunID, p.AxiomSet, p.Status, p.Reason, string(cj), ms, p.Solver, int64(p.Budget), int64(p.Units), p.claim(), now); err != nil {
			return fmt.Errorf("store: record proof of rule %d: %w", p.RuleID, err)
		}
		if _, err := upd.ExecContext(ctx, p.Status, p.RuleID); err != nil {
			return fmt.Errorf("store: record proof of rule %d: %w", p.RuleID, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("store: record proofs: %w", err)
	}
	return nil
}

// RulesToVerify lists the rules without a result under the given axiom set,
// solver and budget (all rules when recheck), ordered by id. A result under
// another budget or solver does not count: the verdict is a function of
// all three, and a version must be rebuildable from them. Nor does a
// result whose claim does not match the rule's current text (the rule was
// edited since, or the proof predates claims).
func (s *Store) RulesToVerify(ctx context.Context, axiomSet, solver string, budget uint64, recheck bool) ([]Rule, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+ruleColumns+`, coalesce(p.status, ''), coalesce(p.claim, '') FROM rules r
		LEFT JOIN proofs p ON p.id = (SELECT max(q.id) FROM proofs q WHERE q.rule_id = r.id AND q.axiom_set = ? AND q.solver = ? AND q.budget = ?)
		ORDER BY r.id`, axiomSet, solver, int64(budget))
	if err != nil {
		return nil, fmt.Errorf("store: rules to verify: %w", err)
	}
	defer rows.Close()
	var out []Rule
	for rows.Next() {
		var status rules.Status
		var claim string
		r, err := scanRule(rows, &status, &claim)
		if err != nil {
			return nil, fmt.Errorf("store: rules to verify: %w", err)
		}
		if recheck || claim != Claim(r.Text, axiomSet, solver, budget, status) {
			out = append(out, r)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: rules to verify: %w", err)
	}
	return out, nil
}

// LatestProof returns the most recent verification of a rule; ok is false
// when it was never verified.
func (s *Store) LatestProof(ctx context.Context, ruleID int64) (p Proof, ok bool, err error) {
	var core, created string
	var ms float64
	var budget, units int64
	err = s.db.QueryRowContext(ctx, `SELECT rule_id, run_id, axiom_set, status, reason, core, elapsed_ms, solver, budget, units, claim, created_at
		FROM latest_proofs WHERE rule_id = ?`, ruleID).Scan(&p.RuleID, &p.RunID, &p.AxiomSet, &p.Status, &p.Reason, &core, &ms, &p.Solver, &budget, &units, &p.Claim, &created)
	p.Budget, p.Units = uint64(budget), uint64(units)
	if errors.Is(err, sql.ErrNoRows) {
		return p, false, nil
	}
	if err != nil {
		return p, false, fmt.Errorf("store: proof of rule %d: %w", ruleID, err)
	}
	if err := json.Unmarshal([]byte(core), &p.Core); err != nil {
		return p, false, fmt.Errorf("store: proof of rule %d: core: %w", ruleID, err)
	}
	p.Elapsed = time.Duration(ms * float64(time.Millisecond))
	p.Created, _ = time.Parse(timeFormat, created)
	return p, true, nil
}

// Verdicts of the check verify makes of an axiom set before using it.
const (
	// AxiomsSound: Z3 finds the axioms consistent, and each holds on
	// concrete tensors of small extents.
	AxiomsSound = "sound"
	// AxiomsInconsistent: Z3 finds the axioms contradictory.
	AxiomsInconsistent = "inconsistent"
	// AxiomsFalse: an axiom fails on concrete tensors.
	AxiomsFalse = "false"
)

// AxiomCheck returns the cached verdict of an axiom set's check ("" when
// it was never checked) and its detail: the axioms that contradict each
// other, or the false axiom with its counterexample.
func (s *Store) AxiomCheck(ctx context.Context, axiomSet string) (verdict, detail string, err error) {
	err = s.db.QueryRowContext(ctx, `SELECT checked, check_detail FROM axiom_sets WHERE hash = ?`, axiomSet).Scan(&verdict, &detail)
	if errors.Is(err, sql.ErrNoRows) {
		return "", "", nil
	}
	if err != nil {
		return "", "", fmt.Errorf("store: check of axiom set %s: %w", axiomSet, err)
	}
	return verdict, detail, nil
}

// RecordAxiomCheck caches the verdict of a saved axiom set's check (one of
// AxiomsSound, AxiomsInconsistent, AxiomsFalse) with its detail. A verdict
// is a fact about the axioms, whichever solver found it: a contradiction
// comes with an unsat core, a false axiom with a counterexample.
func (s *Store) RecordAxiomCheck(ctx context.Context, axiomSet, verdict, detail string) error {
	res, err := s.db.ExecContext(ctx, `UPDATE axiom_sets SET checked = ?, check_detail = ? WHERE hash = ?`, verdict, detail, axiomSet)
	if err != nil {
		return fmt.Errorf("store: record the check of axiom set %s: %w", axiomSet, err)
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		return fmt.Errorf("store: record the check of axiom set %s: the set is not saved", axiomSet)
	}
	return nil
}
