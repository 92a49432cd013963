package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"rulebook/exchange"
	"rulebook/internal/english"
	"rulebook/internal/outfile"
	"rulebook/rules"
	"rulebook/store"
	"rulebook/version"
)

func newExportCmd() *cobra.Command {
	var tag, format, output string
	var sel exchange.Selection
	cmd := &cobra.Command{
		Use:   "export --version TAG [--format json|sexpr|taso-pb|flexflow-json|dot] [--id ID,…] [--op OP,…]",
		Short: "Write a released version's rules as json, sexpr, taso-pb, flexflow-json or dot",
		Long:  help("export"),
		Example: `  rulebook export --version v1 --format json -o v1.json
  rulebook export --version v1 --format taso-pb -o v1.pb
  rulebook export --version v1 --format flexflow-json --degree 4 -o v1-ff4.json
  rulebook export --version v1 --format dot --id 12,59 -o rules.dot
  rulebook export --version v1 --format dot --op split,conv2d -o split.dot`,
		Args: cobra.NoArgs,
		PreRunE: func(cmd *cobra.Command, _ []string) error {
			if tag == "" {
				return fmt.Errorf("--version is required (see 'rulebook versions')")
			}
			if err := sel.Check(version.Registry()); err != nil {
				return err
			}
			if err := sel.CheckDegree(format, cmd.Flags().Changed("degree")); err != nil {
				return err
			}
			if err := outfile.Distinct(outfile.Database(dbPath(cmd)), []outfile.Named{{Path: output, Role: "-o"}}); err != nil {
				return err
			}
			switch format {
			case "json", "sexpr", "taso-pb", "flexflow-json", "dot":
				return nil
			}
			return fmt.Errorf("--format must be json, sexpr, taso-pb, flexflow-json or dot, got %q", format)
		},
		RunE: withStore(func(cmd *cobra.Command, _ []string, db *store.Store) error {
			v, rs, err := db.VersionRules(cmd.Context(), tag)
			if err != nil {
				return err
			}
			var skipped []exchange.Skip
			err = writeOutput(cmd, output, func(w io.Writer) (err error) {
				skipped, err = exchange.Export(w, version.Registry(), format, v, rs, sel)
				return err
			})
			if err != nil || len(skipped) == 0 {
				return err
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "skipped %d of %d rules that %s cannot carry:\n", len(skipped), len(rs), format)
			for _, g := range exchange.GroupSkips(skipped, nil) {
				fmt.Fprintf(cmd.ErrOrStderr(), "  %d: %s (ids %s)\n", g.Rules, g.Reason, abbreviate(g.Names, 10))
			}
			return nil
		}),
	}
	cmd.Flags().StringVar(&tag, "version", "", "version tag or hash prefix")
	cmd.Flags().StringVar(&format, "format", "json", "json, sexpr, taso-pb, flexflow-json or dot")
	cmd.Flags().StringVarP(&output, "output", "o", "", "file to write (default standard output)")
	cmd.Flags().Int64SliceVar(&sel.IDs, "id", nil, "only the rules with these ids (repeat or comma-separate)")
	cmd.Flags().StringSliceVar(&sel.Ops, "op", nil, "only the rules that use all these operators (repeat or comma-separate)")
	cmd.Flags().IntVar(&sel.Degree, "degree", rules.BaseDegree, "flexflow-json: the parallel degree to write rules at")
	return cmd
}

// abbreviate joins the first n names.
func abbreviate(names []string, n int) string {
	if len(names) <= n {
		return strings.Join(names, ", ")
	}
	return strings.Join(names[:n], ", ") + fmt.Sprintf(", … (%d more)", len(names)-n)
}

// writeOutput writes to standard output, or to a file that appears only
// once it is complete.
func writeOutput(cmd *cobra.Command, path string, write func(io.Writer) error) error {
	if path == "" {
		return write(cmd.OutOrStdout())
	}
	return exchange.WriteFile(path, write)
}

func newImportCmd() *cobra.Command {
	var format string
	cmd := &cobra.Command{
		Use:   "import --format json|sexpr|taso-pb|flexflow-json FILE",
		Short: "Add the rules of a file (rulebook's, TASO's or FlexFlow's) to the store as candidates",
		Long:  help("import"),
		Example: `  rulebook export --version v1 --format json -o v1.json
  rulebook import --format json v1.json
  rulebook import --format taso-pb ../shared/anchors/taso-repo-graph_subst.pb
  rulebook import --format flexflow-json ../shared/anchors/flexflow-graph_subst_3_v2.json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runImport(cmd.Context(), cmd, format, args[0])
		},
	}
	cmd.Flags().StringVar(&format, "format", "", "json, sexpr, taso-pb or flexflow-json (default: from the file's extension and content)")
	return cmd
}

func runImport(ctx context.Context, cmd *cobra.Command, format, path string) error {
	foreign, format, err := exchange.ReadFileContext(ctx, path, format, version.Registry())
	if err != nil {
		return err
	}
	db, err := store.Open(ctx, dbPath(cmd))
	if err != nil {
		return err
	}
	defer db.Close()
	runID, n, err := exchange.Import(ctx, db, foreign, path, format, toolVersion)
	if err != nil {
		return err
	}
	fmt.Fprintf(cmd.OutOrStdout(), "imported %s from %s: %d new (run %d)\n", english.Nouns(len(foreign.Rules), "rule"), path, n, runID)
	for _, note := range foreign.Notes {
		fmt.Fprintln(cmd.OutOrStdout(), "note: "+note)
	}
	if len(foreign.Skipped) > 0 {
		groups := exchange.GroupSkips(foreign.Skipped, foreign.Unknown)
		describe := func(g exchange.SkipGroup) string {
			if g.Names == nil {
				return g.Reason
			}
			return fmt.Sprintf("%s (%s)", g.Reason, abbreviate(g.Names, 5))
		}
		if len(groups) == 1 {
			fmt.Fprintf(cmd.OutOrStdout(), "skipped %s: %s\n", english.Nouns(len(foreign.Skipped), "rule"), describe(groups[0]))
		} else {
			fmt.Fprintf(cmd.OutOrStdout(), "skipped %d rules:\n", len(foreign.Skipped))
			for _, g := range groups {
				fmt.Fprintf(cmd.OutOrStdout(), "  %d: %s\n", g.Rules, describe(g))
			}
		}
	}
	return nil
}
