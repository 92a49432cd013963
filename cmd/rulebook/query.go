package main

import (
	"fmt"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"rulebook/exchange"
	"rulebook/internal/outfile"
	"rulebook/rules"
	"rulebook/store"
	"rulebook/version"
)

func newListCmd() *cobra.Command {
	var f store.Filter
	var size int
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List rules, optionally filtered by size, operator and status",
		Long:  help("list"),
		Example: `  rulebook list --op matmul --size 2
  rulebook list --status candidate --limit 20`,
		Args: cobra.NoArgs,
		PreRunE: func(cmd *cobra.Command, _ []string) error {
			if f.Operator != "" {
				if _, ok := version.Registry().Lookup(f.Operator); !ok {
					return fmt.Errorf("--op: unknown operator %q (known: %s)", f.Operator, strings.Join(version.Registry().Names(), ","))
				}
			}
			if size < 0 {
				return fmt.Errorf("--size must be positive, got %d", size)
			}
			if f.Status != "" {
				if err := rules.CheckStatus(f.Status); err != nil {
					return fmt.Errorf("--status: %w", err)
				}
			}
			if size > 0 {
				f.MinOps, f.MaxOps = size, size
			}
			return nil
		},
		RunE: withStore(func(cmd *cobra.Command, _ []string, db *store.Store) error {
			rs, err := db.ListRules(cmd.Context(), f)
			if err != nil {
				return err
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tSTATUS\tSIZE\tRULE")
			for _, r := range rs {
				status := string(r.Status)
				if r.PrunedBy != 0 {
					status += fmt.Sprintf(", pruned by %d", r.PrunedBy)
				}
				fmt.Fprintf(tw, "%d\t%s\t%d\t%s => %s\n", r.ID, status, max(r.SrcOps, r.DstOps), r.Src, r.Dst)
			}
			return tw.Flush()
		}),
	}
	cmd.Flags().IntVar(&size, "size", 0, "only rules whose larger side has this many operators")
	cmd.Flags().StringVar(&f.Operator, "op", "", "only rules that use this operator")
	cmd.Flags().StringVar((*string)(&f.Status), "status", "", "only rules with this status (candidate, proved, refuted, unknown)")
	cmd.Flags().IntVar(&f.Limit, "limit", 0, "at most this many rules (0: all)")
	return cmd
}

func newShowCmd() *cobra.Command {
	var picture string
	cmd := &cobra.Command{
		Use:     "show ID",
		Short:   "Show one rule in full, or draw it",
		Long:    help("show"),
		Example: "  rulebook show 12\n  rulebook show 12 --svg rule12.svg\n  rulebook show 12 --svg rule12.png",
		Args:    cobra.ExactArgs(1),
		PreRunE: func(cmd *cobra.Command, _ []string) error {
			if _, err := exchange.PictureFormat(picture); picture != "" && err != nil {
				return fmt.Errorf("--svg %w", err)
			}
			return outfile.Distinct(outfile.Database(dbPath(cmd)), []outfile.Named{{Path: picture, Role: "--svg"}})
		},
		RunE: withRule(func(cmd *cobra.Command, _ *store.Store, r store.Rule) error {
			if picture != "" {
				if err := exchange.WritePicture(cmd.Context(), picture, version.Registry(), exchange.RulePicture(r)); err != nil {
					return fmt.Errorf("--svg %w", err)
				}
				return nil
			}
			return r.WriteSummary(cmd.OutOrStdout())
		}),
	}
	cmd.Flags().StringVar(&picture, "svg", "", "draw the rule into this file: .svg, .png, .pdf (with Graphviz's dot) or .dot")
	return cmd
}

// withStore runs fn with the database opened (and closed after); a
// database that does not exist is refused, not created.
func withStore(fn func(*cobra.Command, []string, *store.Store) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		db, err := store.OpenExisting(cmd.Context(), dbPath(cmd))
		if err != nil {
			return err
		}
		defer db.Close()
		return fn(cmd, args, db)
	}
}

// withRule runs fn on the rule whose id is the command's argument.
func withRule(fn func(*cobra.Command, *store.Store, store.Rule) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		id, err := parseRuleID(args[0])
		if err != nil {
			return err
		}
		db, err := store.OpenExisting(cmd.Context(), dbPath(cmd))
		if err != nil {
			return err
		}
		defer db.Close()
		r, err := db.Rule(cmd.Context(), id)
		if err != nil {
			return err
		}
		return fn(cmd, db, r)
	}
}

func newStatsCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "stats",
		Short: "Count rules by status, size and operator",
		Args:  cobra.NoArgs,
		RunE: withStore(func(cmd *cobra.Command, _ []string, db *store.Store) error {
			s, err := db.Stats(cmd.Context())
			if err != nil {
				return err
			}
			return s.Write(cmd.OutOrStdout(), db.Path())
		}),
	}
}

func newOpsCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "ops",
		Short: "List the operators of the default and parallel sets with their parameters",
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return version.Registry().WriteTable(cmd.OutOrStdout()) },
	}
}

func parseRuleID(s string) (int64, error) {
	id, err := strconv.ParseInt(s, 10, 64)
	if err != nil || id < 1 {
		return 0, fmt.Errorf("rule id must be a positive integer, got %q", s)
	}
	return id, nil
}
