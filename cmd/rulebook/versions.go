package main

import (
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"rulebook/compare"
	"rulebook/store"
	"rulebook/verify"
)

func newReleaseCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "release TAG",
		Short: "Freeze the proved rules as an immutable, content-hashed version",
		Long: `release records every proved rule as version TAG. The version keeps its
content hash (SHA-256 over the sorted canonical rule texts, the same in any
database holding the same rules), the axiom sets that proved its rules, the
operators they use, the generator settings and the previous version as
parent. Released versions never change; loading one re-checks its hash.`,
		Example: "  rulebook release v3",
		Args:    cobra.ExactArgs(1),
		RunE: withStore(func(cmd *cobra.Command, args []string, db *store.Store) error {
			v, leftOut, err := db.Release(cmd.Context(), args[0], version)
			if len(leftOut) > 0 {
				fmt.Fprintf(cmd.ErrOrStderr(), "left out, marked proved but with no proof of their current text (changed outside rulebook? 'rulebook verify' checks them again): rules %s\n",
					abbreviate(idStrings(leftOut), 10))
			}
			if err != nil {
				return err
			}
			parent := "none"
			if v.Parent != "" {
				parent = v.Parent
			}
			fmt.Fprintf(cmd.OutOrStdout(), "released %s: %s, hash %s, parent %s\n", v.Tag, verify.Nouns(v.Rules, "rule"), v.Hash, parent)
			return nil
		}),
	}
}

func idStrings(ids []int64) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = fmt.Sprint(id)
	}
	return out
}

func newVersionsCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "versions",
		Short: "List the released versions",
		Args:  cobra.NoArgs,
		RunE: withStore(func(cmd *cobra.Command, _ []string, db *store.Store) error {
			vs, err := db.Versions(cmd.Context())
			if err != nil {
				return err
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "TAG\tHASH\tRULES\tPARENT\tAXIOM SETS\tRELEASED")
			for _, v := range vs {
				fmt.Fprintf(tw, "%s\t%.12s\t%d\t%s\t%s\t%s\n", v.Tag, v.Hash, v.Rules, v.Parent, strings.Join(v.AxiomSets, ","), v.Created.Format("2006-01-02 15:04"))
			}
			return tw.Flush()
		}),
	}
}

func newDiffCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "diff A B",
		Short: "Show the rules version B adds to and removes from version A",
		Long: `diff loads both versions and prints the rules only B has ("+") and the rules
only A has ("-"), as canonical text. Each of A and B is a version of --db
(by tag or hash prefix), FILE:TAG for a version of another database, or a
bundle exported with 'rulebook export --format json'; every one is
re-hashed on load, and one whose rules no longer match its hash is refused.`,
		Example: `  rulebook export --version v1 --format json -o v1.json
  rulebook diff v1.json v1
  rulebook build --max-ops 2 --db small.db --no-progress
  rulebook diff small.db:v1 v1`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			a, err := compare.LoadVersion(cmd.Context(), dbPath(cmd), args[0])
			if err != nil {
				return err
			}
			b, err := compare.LoadVersion(cmd.Context(), dbPath(cmd), args[1])
			if err != nil {
				return err
			}
			compare.DiffVersions(a, b).WriteText(cmd.OutOrStdout())
			return nil
		},
	}
}
