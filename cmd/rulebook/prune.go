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
		Use:     "prune",
		Short:   "Mark the rules that more general proved rules already imply",
		Long:    help("prune"),
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
