package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"rulebook/rules"
)

// Rule is one rewrite rule as stored: its text (canonical, with the
// shapes it was found with) and what the store records about it. The text
// is read back as plain fields; Checked parses it.
type Rule struct {
	ID   int64
	Hash string // 16 lower-case hex chars, unique: the text's Hash
	rules.Text
	SrcOps, DstOps        int
	NumInputs, NumOutputs int
	Operators             []string // distinct operator names used on either side, sorted
	Fingerprint           uint64   // stored as INTEGER (int64 bit pattern)
	Status                rules.Status
	RunID                 int64 // run that first found it
	// Origin names the rule in the file it was imported from ("rule 17",
	// "taso_rule_304"); empty for generated rules.
	Origin string
	// PrunedBy is the rule this one was pruned in favour of (0: kept), and
	// PruneReason says why.
	PrunedBy    int64
	PruneReason string
}

// NewRule is the record to store for a rule's checked text (one that
// Rule.Canonical or Rule.Oriented made, or Checked): its hash, sizes and
// operators come from the parsed rule. It is a candidate of no run yet.
func NewRule(t rules.Text) Rule {
	r := t.Rule()
	ops := append(r.Src.OpNames(), r.Dst.OpNames()...)
	slices.Sort(ops)
	return Rule{Hash: t.Hash(), Text: t,
		SrcOps: len(r.Src.Nodes), DstOps: len(r.Dst.Nodes), NumInputs: r.NumInputs, NumOutputs: len(r.Src.Outputs),
		Operators: slices.Compact(ops), Status: rules.StatusCandidate}
}

// InsertRules inserts rules in one transaction: all or nothing, and nothing
// if ctx is cancelled midway. Rules whose hash is already stored (or repeated
// earlier in batch) are skipped; the result is the number of new rows. For
// each new rule its operators go to rule_operators. An empty Status means
// "candidate". The input slice is not modified.
func (s *Store) InsertRules(ctx context.Context, batch []Rule) (int64, error) {
	// fail reports err, or the context's error if the context ended: then
	// database/sql has already rolled back and closed the statements, and
	// err is only a consequence.
	fail := func(what string, err error) (int64, error) {
		if cerr := ctx.Err(); cerr != nil {
			err = cerr
		}
		return 0, fmt.Errorf("store: insert rules: %s%w", what, err)
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fail("", err)
	}
	defer tx.Rollback() // no-op after Commit

	insRule, err := tx.PrepareContext(ctx, `INSERT INTO rules(hash, src, dst, cond, inputs, constants,
		src_ops, dst_ops, num_inputs, num_outputs, fingerprint, status, run_id, created_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT(hash) DO NOTHING`)
	if err != nil {
		return fail("", err)
	}
	defer insRule.Close()
	insOp, err := tx.PrepareContext(ctx, `INSERT OR IGNORE INTO rule_operators(rule_id, operator) VALUES (?, ?)`)
	if err != nil {
		return fail("", err)
	}
	defer insOp.Close()

	insOrigin, err := tx.PrepareContext(ctx, `INSERT OR IGNORE INTO rule_origins(rule_id, run_id, name)
		SELECT id, ?, ? FROM rules WHERE hash = ?`)
	if err != nil {
		return fail("", err)
	}
	defer insOrigin.Close()

	now := formatTime(time.Now())
	var added int64
	for i := range batch {
		r := &batch[i]
		if err := ctx.Err(); err != nil {
			return fail("", err)
		}
		status := r.Status
		if status == "" {
			status = rules.StatusCandidate
		}
		res, err := insRule.ExecContext(ctx, r.Hash, r.Src, r.Dst, r.Cond, r.Inputs, r.Constants,
			r.SrcOps, r.DstOps, r.NumInputs, r.NumOutputs, int64(r.Fingerprint), status, r.RunID, now)
		if err != nil {
			return fail(fmt.Sprintf("rule %s: ", r.Hash), err)
		}
		if r.Origin != "" {
			if _, err := insOrigin.ExecContext(ctx, r.RunID, r.Origin, r.Hash); err != nil {
				return fail(fmt.Sprintf("rule %s origin: ", r.Hash), err)
			}
		}
		n, err := res.RowsAffected()
		if err != nil {
			return fail("", err)
		}
		if n == 0 {
			continue
		}
		added++
		id, err := res.LastInsertId()
		if err != nil {
			return fail("", err)
		}
		for _, op := range r.Operators {
			if _, err := insOp.ExecContext(ctx, id, op); err != nil {
				return fail(fmt.Sprintf("rule %s operator %q: ", r.Hash, op), err)
			}
		}
	}
	if err := tx.Commit(); err != nil {
		return fail("", err)
	}
	return added, nil
}

// Filter selects rules for ListRules. Zero values mean "no restriction".
type Filter struct {
	MinOps, MaxOps int          // bounds on max(SrcOps, DstOps); 0 = no bound
	Operator       string       // only rules that use this operator
	Status         rules.Status // only rules with this status
	Limit          int          // at most this many rules; 0 = no limit
	Unpruned       bool         // only rules not pruned
}

const ruleColumns = `r.id, r.hash, r.src, r.dst, r.cond, r.inputs, r.constants, r.src_ops, r.dst_ops,
	r.num_inputs, r.num_outputs, r.fingerprint, r.status, r.run_id,
	(SELECT json_group_array(o.operator) FROM rule_operators o WHERE o.rule_id = r.id),
	coalesce(r.pruned_by, 0), coalesce(r.prune_reason, '')`

// ListRules returns the rules that pass f, ordered by id.
func (s *Store) ListRules(ctx context.Context, f Filter) ([]Rule, error) {
	var (
		where []string
		args  []any
	)
	if f.MinOps > 0 {
		where = append(where, "max(r.src_ops, r.dst_ops) >= ?")
		args = append(args, f.MinOps)
	}
	if f.MaxOps > 0 {
		where = append(where, "max(r.src_ops, r.dst_ops) <= ?")
		args = append(args, f.MaxOps)
	}
	if f.Operator != "" {
		where = append(where, "EXISTS (SELECT 1 FROM rule_operators o WHERE o.rule_id = r.id AND o.operator = ?)")
		args = append(args, f.Operator)
	}
	if f.Status != "" {
		where = append(where, "r.status = ?")
		args = append(args, f.Status)
	}
	if f.Unpruned {
		where = append(where, "r.pruned_by IS NULL")
	}
	q := "SELECT " + ruleColumns + " FROM rules r"
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	q += " ORDER BY r.id"
	if f.Limit > 0 {
		q += " LIMIT ?"
		args = append(args, f.Limit)
	}
	rows, err := s.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("store: list rules: %w", err)
	}
	defer rows.Close()
	var out []Rule
	for rows.Next() {
		r, err := scanRule(rows)
		if err != nil {
			return nil, fmt.Errorf("store: list rules: %w", err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: list rules: %w", err)
	}
	return out, nil
}

// Rule returns the rule with the given id. A missing rule gives the error
// "rule <id> not found", which matches sql.ErrNoRows.
func (s *Store) Rule(ctx context.Context, id int64) (Rule, error) {
	row := s.db.QueryRowContext(ctx, "SELECT "+ruleColumns+" FROM rules r WHERE r.id = ?", id)
	r, err := scanRule(row)
	if err == sql.ErrNoRows {
		return Rule{}, &notFoundError{"rule", id}
	}
	if err != nil {
		return Rule{}, fmt.Errorf("store: rule %d: %w", id, err)
	}
	return r, nil
}

// scanRule reads the ruleColumns, then any extra columns into extra.
func scanRule(sc interface{ Scan(...any) error }, extra ...any) (Rule, error) {
	var (
		r   Rule
		fp  int64
		ops string
	)
	dest := append([]any{&r.ID, &r.Hash, &r.Src, &r.Dst, &r.Cond, &r.Inputs, &r.Constants, &r.SrcOps, &r.DstOps,
		&r.NumInputs, &r.NumOutputs, &fp, &r.Status, &r.RunID, &ops, &r.PrunedBy, &r.PruneReason}, extra...)
	if err := sc.Scan(dest...); err != nil {
		return Rule{}, err
	}
	r.Fingerprint = uint64(fp)
	if err := json.Unmarshal([]byte(ops), &r.Operators); err != nil {
		return Rule{}, fmt.Errorf("rule %d operators: %w", r.ID, err)
	}
	if len(r.Operators) == 0 {
		r.Operators = nil
	}
	slices.Sort(r.Operators)
	return r, nil
}

// Stats summarises the store.
type Stats struct {
	Rules      int64
	ByStatus   map[string]int64
	BySize     map[int]int64 // key = max(SrcOps, DstOps)
	ByOperator map[string]int64
	Runs       int64
	// RunsByStatus counts runs by status: done, interrupted, failed,
	// abandoned (killed: see markAbandoned) and those still running.
	RunsByStatus map[string]int64
}

// Stats counts rules by status, size and operator, and runs, all from one
// snapshot.
func (s *Store) Stats(ctx context.Context) (Stats, error) {
	st := Stats{ByStatus: map[string]int64{}, BySize: map[int]int64{}, ByOperator: map[string]int64{}, RunsByStatus: map[string]int64{}}
	// ReadOnly makes the driver issue a plain (deferred) BEGIN instead of
	// BEGIN IMMEDIATE, so Stats does not take the write lock.
	tx, err := s.db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return st, fmt.Errorf("store: stats: %w", err)
	}
	defer tx.Rollback()
	if err := tx.QueryRowContext(ctx, "SELECT count(*) FROM rules").Scan(&st.Rules); err != nil {
		return st, fmt.Errorf("store: stats: %w", err)
	}
	if err := tx.QueryRowContext(ctx, "SELECT count(*) FROM runs").Scan(&st.Runs); err != nil {
		return st, fmt.Errorf("store: stats: %w", err)
	}
	if err := countBy(ctx, tx, "SELECT status, n FROM status_counts", st.ByStatus); err != nil {
		return st, fmt.Errorf("store: stats: %w", err)
	}
	if err := countBy(ctx, tx, "SELECT max(src_ops, dst_ops), count(*) FROM rules GROUP BY 1", st.BySize); err != nil {
		return st, fmt.Errorf("store: stats: %w", err)
	}
	if err := countBy(ctx, tx, "SELECT operator, n FROM operator_counts", st.ByOperator); err != nil {
		return st, fmt.Errorf("store: stats: %w", err)
	}
	if err := countBy(ctx, tx, "SELECT status, count(*) FROM runs GROUP BY status", st.RunsByStatus); err != nil {
		return st, fmt.Errorf("store: stats: %w", err)
	}
	return st, nil
}

// countBy fills m from a query returning (key, count) rows.
func countBy[K comparable](ctx context.Context, tx *sql.Tx, q string, m map[K]int64) error {
	rows, err := tx.QueryContext(ctx, q)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var (
			k K
			n int64
		)
		if err := rows.Scan(&k, &n); err != nil {
			return err
		}
		m[k] = n
	}
	return rows.Err()
}

// Pruning is one rule's pruning decision: Rule is pruned in favour of By.
type Pruning struct {
	Rule, By int64
	Reason   string
}

// SetPruning replaces every rule's pruning decision with ps in one
// transaction: rules not in ps become unpruned. Pruning depends on which
// rules are proved, so it is recomputed whole rather than patched.
func (s *Store) SetPruning(ctx context.Context, ps []Pruning) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("store: set pruning: %w", err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `UPDATE rules SET pruned_by = NULL, prune_reason = NULL WHERE pruned_by IS NOT NULL`); err != nil {
		return fmt.Errorf("store: set pruning: %w", err)
	}
	upd, err := tx.PrepareContext(ctx, `UPDATE rules SET pruned_by = ?, prune_reason = ? WHERE id = ?`)
	if err != nil {
		return fmt.Errorf("store: set pruning: %w", err)
	}
	defer upd.Close()
	for _, p := range ps {
		if _, err := upd.ExecContext(ctx, p.By, p.Reason, p.Rule); err != nil {
			return fmt.Errorf("store: set pruning of rule %d: %w", p.Rule, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("store: set pruning: %w", err)
	}
	return nil
}

// Write prints the counts as 'rulebook stats' shows them: a heading line
// naming the database, then one sorted block per count.
func (s Stats) Write(w io.Writer, path string) error {
	if _, err := fmt.Fprintf(w, "%s from %s in %s\n", plural(s.Rules, "rule"), plural(s.Runs, "run"), path); err != nil {
		return err
	}
	sizes := map[string]int64{}
	for k, v := range s.BySize {
		sizes[fmt.Sprintf("%d ops", k)] = v
	}
	for _, c := range []struct {
		title  string
		counts map[string]int64
	}{{"status", s.ByStatus}, {"size", sizes}, {"operator", s.ByOperator}, {"run status", s.RunsByStatus}} {
		fmt.Fprintf(w, "by %s:\n", c.title)
		for _, k := range slices.Sorted(maps.Keys(c.counts)) {
			if _, err := fmt.Fprintf(w, "  %-12s %8d\n", k, c.counts[k]); err != nil {
				return err
			}
		}
	}
	return nil
}

// plural counts n of a noun that takes an s.
func plural[N int | int64](n N, noun string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, noun)
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// WriteSummary prints the rule as 'rulebook show' does: status, both
// sides, sizes, the shapes it was found with, operators and fingerprint.
func (r Rule) WriteSummary(w io.Writer) error {
	fmt.Fprintf(w, "rule %d (%s)\n", r.ID, r.Hash)
	fmt.Fprintf(w, "  status:      %s\n", r.Status)
	if r.PrunedBy != 0 {
		fmt.Fprintf(w, "  pruned:      in favour of rule %d (%s); releases leave it out\n", r.PrunedBy, r.PruneReason)
	}
	fmt.Fprintf(w, "  source:      %s\n", r.Src)
	fmt.Fprintf(w, "  target:      %s\n", r.Dst)
	fmt.Fprintf(w, "  size:        %d => %s, %s, %s\n", r.SrcOps, plural(r.DstOps, "operator"), plural(r.NumInputs, "input"), plural(r.NumOutputs, "output"))
	fmt.Fprintf(w, "  found with:  %s", r.Inputs)
	if r.Constants != "" {
		fmt.Fprintf(w, "; constants %s", r.Constants)
	}
	fmt.Fprintf(w, "\n  operators:   %s\n", strings.Join(r.Operators, ", "))
	_, err := fmt.Fprintf(w, "  fingerprint: %016x (run %d)\n", r.Fingerprint, r.RunID)
	return err
}
