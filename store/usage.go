package store

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"time"
)

// RuleUse is how often one optimization applied one rule, named by its
// canonical text "SRC => DST".
type RuleUse struct {
	Rule  string
	Count int
}

// Optimization is one result of 'rulebook optimize': which model, which rule
// version, the modelled cost before and after, how the search went, and the
// rules it applied.
type Optimization struct {
	ID, RunID                                 int64
	Model, VersionTag, VersionHash, CostModel string
	Before, After                             float64 // modelled cost, ms
	Explored, Seen                            int
	Seconds                                   float64
	Stopped                                   string
	At                                        time.Time
	Uses                                      []RuleUse
}

// Usage is how often the latest optimization of a model applied a rule.
type Usage struct {
	Rule  string `json:"rule"`
	Model string `json:"model"`
	Count int    `json:"count"`
}

// RecordOptimization stores o and its rule uses in one transaction and
// returns its id. A zero At means now. Uses with a zero count are dropped (a
// rule set lists every rule, most never apply); the same rule listed twice
// is counted once with the sum.
func (s *Store) RecordOptimization(ctx context.Context, o Optimization) (int64, error) {
	if o.At.IsZero() {
		o.At = time.Now()
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("store: record optimization of %s: %w", o.Model, err)
	}
	defer tx.Rollback()
	id, err := insertOptimization(ctx, tx, o)
	if err != nil {
		return 0, fmt.Errorf("store: record optimization of %s: %w", o.Model, err)
	}
	if err := insertRuleUses(ctx, tx, id, o.Uses); err != nil {
		return 0, fmt.Errorf("store: record optimization of %s: %w", o.Model, err)
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("store: record optimization of %s: %w", o.Model, err)
	}
	return id, nil
}

func insertOptimization(ctx context.Context, tx *sql.Tx, o Optimization) (int64, error) {
	res, err := tx.ExecContext(ctx, `INSERT INTO optimizations(run_id, model, version_tag, version_hash, cost_model,
		cost_before_ms, cost_after_ms, explored, seen, seconds, stopped, optimized_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		o.RunID, o.Model, o.VersionTag, o.VersionHash, o.CostModel, o.Before, o.After,
		o.Explored, o.Seen, o.Seconds, o.Stopped, formatTime(o.At))
	if err != nil {
		return 0, err
	}
	return res.LastInsertId()
}

func insertRuleUses(ctx context.Context, tx *sql.Tx, id int64, uses []RuleUse) error {
	ins, err := tx.PrepareContext(ctx, `INSERT INTO rule_uses(optimization_id, rule, count) VALUES (?, ?, ?)
		ON CONFLICT(optimization_id, rule) DO UPDATE SET count = count + excluded.count`)
	if err != nil {
		return err
	}
	defer ins.Close()
	for _, u := range uses {
		if u.Count == 0 {
			continue
		}
		if _, err := ins.ExecContext(ctx, id, u.Rule, u.Count); err != nil {
			return fmt.Errorf("rule %s (count %d): %w", u.Rule, u.Count, err)
		}
	}
	return nil
}

// Usage returns, for the latest optimization of each model under the version
// hash (all versions when versionHash is ""), how often it applied each rule,
// sorted by rule then model. Models are told apart by the base name of their
// path, so re-optimizing a model from another directory replaces its counts;
// Usage.Model is that base name.
func (s *Store) Usage(ctx context.Context, versionHash string) ([]Usage, error) {
	latest, err := s.latestOptimizations(ctx, versionHash)
	if err != nil {
		return nil, fmt.Errorf("store: usage: %w", err)
	}
	var out []Usage
	for id, model := range latest {
		uses, err := s.ruleUses(ctx, id)
		if err != nil {
			return nil, fmt.Errorf("store: usage: optimization %d: %w", id, err)
		}
		for _, u := range uses {
			out = append(out, Usage{Rule: u.Rule, Model: model, Count: u.Count})
		}
	}
	slices.SortFunc(out, func(a, b Usage) int {
		if c := strings.Compare(a.Rule, b.Rule); c != 0 {
			return c
		}
		return strings.Compare(a.Model, b.Model)
	})
	return out, nil
}

// latestOptimizations maps the id of each model's latest optimization to the
// model's base name. The base name is taken here rather than in SQL, which
// has no function for it.
func (s *Store) latestOptimizations(ctx context.Context, versionHash string) (map[int64]string, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT id, model FROM optimizations
		WHERE ? = '' OR version_hash = ? ORDER BY optimized_at, id`, versionHash, versionHash)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	byModel := map[string]int64{} // later rows overwrite earlier ones
	for rows.Next() {
		var id int64
		var model string
		if err := rows.Scan(&id, &model); err != nil {
			return nil, err
		}
		byModel[baseName(model)] = id
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	latest := make(map[int64]string, len(byModel))
	for model, id := range byModel {
		latest[id] = model
	}
	return latest, nil
}

func (s *Store) ruleUses(ctx context.Context, id int64) ([]RuleUse, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT rule, count FROM rule_uses WHERE optimization_id = ?`, id)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []RuleUse
	for rows.Next() {
		var u RuleUse
		if err := rows.Scan(&u.Rule, &u.Count); err != nil {
			return nil, err
		}
		out = append(out, u)
	}
	return out, rows.Err()
}

// baseName is the last element of a model path written on any system: the
// database may be read on another one than the optimizer ran on.
func baseName(path string) string {
	return path[strings.LastIndexAny(path, `/\`)+1:]
}
