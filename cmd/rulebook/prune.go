package main

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"rulebook/internal/progress"
	"rulebook/prune"
	"rulebook/rules"
	"rulebook/store"
)

func newPruneCmd() *cobra.Command {
	var quiet bool
	cmd := &cobra.Command{
		Use:   "prune",
		Short: "Mark the rules that more general proved rules already imply",
		Long: `prune applies TASO's pruning (§2.5) to the stored rules, refuted ones
aside. First input renaming: of rules equal up to renaming or merging of
inputs, the most general is kept. Then common subgraphs: a rule whose two
sides share a subgraph at the inputs, or sit in the same surrounding graph at
the outputs, is pruned when the rule without that subgraph is kept.

A rule is pruned only in favour of a kept, proved rule that turns its source
into its target with one rewrite; the store records that rule (pruned_by)
and the reason. Pruning is recomputed whole on each run, since it depends on
what is proved. 'rulebook release' leaves pruned rules out.`,
		Example: "  rulebook prune\n  sqlite3 rulebook.db \"SELECT prune_reason, count(*) FROM rules GROUP BY 1\"",
		Args:    cobra.NoArgs,
		RunE: withStore(func(cmd *cobra.Command, _ []string, db *store.Store) error {
			start := time.Now()
			bar := progress.New(cmd.ErrOrStderr(), quiet)
			res, err := prune.Stored(cmd.Context(), db, rules.Default(), bar.Count)
			bar.Finish()
			if err != nil {
				return err
			}
			printPruneStages(cmd.OutOrStdout(), res, time.Since(start))
			return nil
		}),
	}
	cmd.Flags().BoolVar(&quiet, "no-progress", false, "no progress bar")
	return cmd
}

func printPruneStages(w io.Writer, res *prune.Result, elapsed time.Duration) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "stage\trules\tproved\t")
	for _, s := range res.Stages {
		fmt.Fprintf(tw, "%s\t%d\t%d\t\n", s.Name, s.Rules, s.Proved)
	}
	first, last := res.Stages[0], res.Stages[len(res.Stages)-1]
	fmt.Fprintf(tw, "reduction\t%s\t%s\t\n", percentDrop(first.Rules, last.Rules), percentDrop(first.Proved, last.Proved))
	tw.Flush()
	byReason := map[prune.Reason]int{}
	for _, d := range res.Decisions {
		byReason[d.Reason]++
	}
	fmt.Fprintf(w, "pruned %d rules (renaming %d, common subgraph at inputs %d, at outputs %d) in %s\n",
		len(res.Decisions), byReason[prune.Renaming], byReason[prune.CommonInput], byReason[prune.CommonOutput], elapsed.Round(time.Millisecond))
}

func percentDrop(from, to int) string {
	if from == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f%%", 100*float64(from-to)/float64(from))
}
