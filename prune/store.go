package prune

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"rulebook/internal/progress"
	"rulebook/rules"
	"rulebook/store"
)

// Stored prunes the rules of db, refuted ones aside, and records each
// decision (pruned_by and the reason), as a "prune" run of toolVersion.
// Pruning is recomputed whole each time, since it depends on what is
// proved by then.
func Stored(ctx context.Context, db *store.Store, reg *rules.Registry, toolVersion string, report progress.Func) (*Result, error) {
	runID, err := db.BeginRun(ctx, "prune", "{}", 0, toolVersion)
	if err != nil {
		return nil, err
	}
	res, err := pruneStored(ctx, db, reg, report)
	run := store.Run{ID: runID, Status: store.RunDone}
	if res != nil {
		run.Candidates, run.Stored = int64(res.Stages[0].Rules), int64(len(res.Decisions))
	}
	if err := db.EndRun(ctx, run, err); err != nil {
		return nil, err
	}
	return res, nil
}

func pruneStored(ctx context.Context, db *store.Store, reg *rules.Registry, report progress.Func) (*Result, error) {
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
	res, err := Prune(ctx, in, report)
	if err != nil {
		return nil, err
	}
	ps := make([]store.Pruning, len(res.Decisions))
	for i, d := range res.Decisions {
		ps[i] = store.Pruning{Rule: d.ID, By: d.By, Reason: string(d.Reason)}
	}
	return res, db.SetPruning(ctx, ps)
}

// WriteText prints the stages as TASO's Table 2.3 does, then the pruned
// rules by reason, as 'rulebook prune' does.
func (res *Result) WriteText(w io.Writer, elapsed time.Duration) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "stage\trules\tproved\t")
	for _, s := range res.Stages {
		fmt.Fprintf(tw, "%s\t%d\t%d\t\n", s.Name, s.Rules, s.Proved)
	}
	first, last := res.Stages[0], res.Stages[len(res.Stages)-1]
	fmt.Fprintf(tw, "reduction\t%s\t%s\t\n", percentDrop(first.Rules, last.Rules), percentDrop(first.Proved, last.Proved))
	tw.Flush()
	byReason := map[Reason]int{}
	for _, d := range res.Decisions {
		byReason[d.Reason]++
	}
	noun := "rules"
	if len(res.Decisions) == 1 {
		noun = "rule"
	}
	fmt.Fprintf(w, "pruned %d %s (renaming %d, common subgraph at inputs %d, at outputs %d) in %s\n",
		len(res.Decisions), noun, byReason[Renaming], byReason[CommonInput], byReason[CommonOutput], elapsed.Round(time.Millisecond))
}

func percentDrop(from, to int) string {
	if from == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f%%", 100*float64(from-to)/float64(from))
}
