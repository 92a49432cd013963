package verify

import (
	"context"
	"fmt"

	"rulebook/internal/english"
	"rulebook/rules"
	"rulebook/store"
)

// Selection says which stored rules a verification takes. The zero value
// takes those without a result under the axiom set, the solver and the
// budget, so that an interrupted run resumes.
type Selection struct {
	RuleID       int64 // only this rule, whatever its results
	Recheck      bool  // every rule
	RetryUnknown bool  // the rules whose latest result, under this axiom set, is unknown
}

// Check refuses selections that contradict each other.
func (s Selection) Check() error {
	if s.RetryUnknown && (s.Recheck || s.RuleID != 0) {
		return fmt.Errorf("--retry-unknown retries the unknown rules; it cannot be combined with --recheck or --rule")
	}
	return nil
}

// SelectRules lists the rules sel takes, ordered by id, for a run under
// the axiom set (by hash), this solver and a budget of units.
func SelectRules(ctx context.Context, db *store.Store, axiomSet string, units uint64, sel Selection) ([]store.Rule, error) {
	switch {
	case sel.RuleID != 0:
		r, err := db.Rule(ctx, sel.RuleID)
		if err != nil {
			return nil, fmt.Errorf("--rule: %w", err)
		}
		return []store.Rule{r}, nil
	case sel.RetryUnknown:
		return unknownRules(ctx, db, axiomSet)
	}
	return db.RulesToVerify(ctx, axiomSet, SolverVersion(), units, sel.Recheck)
}

// unknownRules lists the rules whose latest result is unknown and was
// found under the axiom set, whatever the budget: a retry usually gives
// them a larger one.
func unknownRules(ctx context.Context, db *store.Store, axiomSet string) ([]store.Rule, error) {
	rs, err := db.ListRules(ctx, store.Filter{Status: rules.StatusUnknown})
	if err != nil {
		return nil, err
	}
	out := rs[:0]
	for _, r := range rs {
		p, ok, err := db.LatestProof(ctx, r.ID)
		if err != nil {
			return nil, err
		}
		if ok && p.AxiomSet == axiomSet {
			out = append(out, r)
		}
	}
	return out, nil
}

// NothingSelected says why sel took no rule and what would take some, for
// a run under the axiom set and a budget of units.
func NothingSelected(ctx context.Context, db *store.Store, axiomSet string, units uint64, sel Selection) (string, error) {
	stats, err := db.Stats(ctx)
	switch {
	case err != nil:
		return "", err
	case stats.Rules == 0:
		return fmt.Sprintf("%s holds no rules: 'rulebook generate' or 'rulebook import' adds some", db.Path()), nil
	case sel.RetryUnknown:
		return fmt.Sprintf("no rule's latest result under axiom set %s is unknown", axiomSet), nil
	}
	unknown, err := unknownRules(ctx, db, axiomSet)
	if err != nil {
		return "", err
	}
	note := fmt.Sprintf("all %s have a result under axiom set %s, Z3 %s and rlimit %d", english.Nouns(int(stats.Rules), "rule"), axiomSet, SolverVersion(), units)
	if len(unknown) > 0 {
		note += fmt.Sprintf("; %s unknown: --retry-unknown with a larger --budget retries them", english.Nouns(len(unknown), "is", "are"))
	}
	return note + "; --recheck verifies every rule again", nil
}
