package prune

import (
	"context"
	"fmt"

	"rulebook/rules"
	"rulebook/store"
)

// Stored prunes the rules of db, refuted ones aside, and records each
// decision (pruned_by and the reason). Pruning is recomputed whole each
// time, since it depends on what is proved by then.
func Stored(ctx context.Context, db *store.Store, reg *rules.Registry, progress func(stage string, done, total int)) (*Result, error) {
	all, err := db.ListRules(ctx, store.Filter{})
	if err != nil {
		return nil, err
	}
	var in []Rule
	for _, r := range all {
		if r.Status == rules.StatusRefuted {
			continue
		}
		t, err := r.Checked(reg)
		if err != nil {
			return nil, fmt.Errorf("prune: rule %d: %w", r.ID, err)
		}
		in = append(in, Rule{ID: r.ID, Rule: t.Rule(), Proved: r.Status == rules.StatusProved})
	}
	res, err := Prune(ctx, in, progress)
	if err != nil {
		return nil, err
	}
	ps := make([]store.Pruning, len(res.Decisions))
	for i, d := range res.Decisions {
		ps[i] = store.Pruning{Rule: d.ID, By: d.By, Reason: string(d.Reason)}
	}
	return res, db.SetPruning(ctx, ps)
}
