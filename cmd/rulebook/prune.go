package main

import (
	"time"

	"github.com/spf13/cobra"

	"rulebook/internal/progress"
	"rulebook/prune"
	"rulebook/store"
	"rulebook/version"
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
			res, err := prune.Stored(cmd.Context(), db, version.Registry(), toolVersion, bar.Report)
			bar.Finish()
			if err != nil {
				return err
			}
			res.WriteText(cmd.OutOrStdout(), time.Since(start))
			return nil
		}),
	}
	cmd.Flags().BoolVar(&quiet, "no-progress", false, "no progress bar")
	return cmd
}
