package verify

import (
	"context"
	"fmt"
	"io"
	"time"

	"rulebook/internal/english"
	"rulebook/store"
)

// WriteWhy prints what 'rulebook why' says of a stored rule: its text and
// status, the rule it was pruned in favour of, and its latest result with
// the solver, the budget, the reason and the axioms the proof used.
func WriteWhy(ctx context.Context, w io.Writer, db *store.Store, r store.Rule) error {
	fmt.Fprintf(w, "rule %d: %s => %s\nstatus: %s\n", r.ID, r.Src, r.Dst, r.Status)
	if r.PrunedBy != 0 {
		fmt.Fprintf(w, "pruned in favour of rule %d (%s): releases leave it out\n", r.PrunedBy, r.PruneReason)
	}
	p, ok, err := db.LatestProof(ctx, r.ID)
	if err != nil {
		return err
	}
	if !ok {
		fmt.Fprintln(w, "not verified yet: run 'rulebook verify'")
		return nil
	}
	fmt.Fprintf(w, "verified by run %d against axiom set %s with %s in %s\n", p.RunID, p.AxiomSet, p.Solver, p.Elapsed.Round(time.Microsecond))
	if p.Budget > 0 {
		fmt.Fprintf(w, "budget: %d Z3 resource units, %d spent\n", p.Budget, p.Units)
	}
	if p.Reason != "" {
		fmt.Fprintf(w, "reason: %s\n", p.Reason)
	}
	if len(p.Core) == 0 {
		return nil
	}
	set, err := db.AxiomSetByHash(ctx, p.AxiomSet)
	if err != nil {
		return err
	}
	comments := set.Comments()
	comments[PointwiseAxiom] = "lemmas about sub-terms, proved element by element in real arithmetic"
	fmt.Fprintf(w, "the proof uses %s:\n", english.Nouns(len(p.Core), "axiom"))
	for _, name := range p.Core {
		fmt.Fprintf(w, "  %-28s %s\n", name, comments[name])
	}
	return nil
}
