package main

import (
	"fmt"
	"runtime"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"rulebook/axioms"
	"rulebook/compare"
	"rulebook/internal/budget"
	"rulebook/internal/english"
	"rulebook/internal/progress"
	"rulebook/store"
	"rulebook/verify"
	"rulebook/version"
)

type releaseOptions struct {
	axiomsDir  string
	wall       time.Duration
	workers    int
	seed       uint64
	noProgress bool
}

func newReleaseCmd() *cobra.Command {
	var o releaseOptions
	cmd := &cobra.Command{
		Use:     "release TAG",
		Short:   "Prove the proved rules again and freeze them as an immutable, content-hashed version",
		Long:    help("release"),
		Example: "  rulebook release v3",
		Args:    cobra.ExactArgs(1),
		RunE:    func(cmd *cobra.Command, args []string) error { return runRelease(cmd, args[0], o) },
	}
	f := cmd.Flags()
	f.StringVar(&o.axiomsDir, "axioms", "", "folder of *.smt2 axiom files to prove again against (default: ./axioms if present, else the built-in set)")
	f.DurationVar(&o.wall, "timeout", verify.DefaultBudget().WallClock, "wall-clock safety net per rule")
	f.IntVar(&o.workers, "workers", runtime.GOMAXPROCS(0), "parallel Z3 solvers")
	f.Uint64Var(&o.seed, "seed", 1, "seed of the tests at other shapes")
	f.BoolVar(&o.noProgress, "no-progress", false, "do not draw a progress bar")
	return cmd
}

func runRelease(cmd *cobra.Command, tag string, o releaseOptions) error {
	if err := budget.CheckWorkers(o.workers); err != nil {
		return fmt.Errorf("--workers: %w", err)
	}
	if o.wall <= 0 {
		return fmt.Errorf("--timeout must be positive, got %s", o.wall)
	}
	reg := version.Registry()
	set, err := axioms.Find(o.axiomsDir, reg)
	if err != nil {
		return err
	}
	db, err := store.OpenExisting(cmd.Context(), dbPath(cmd))
	if err != nil {
		return err
	}
	defer db.Close()
	bar := progress.New(cmd.ErrOrStderr(), o.noProgress)
	r, err := verify.Release(cmd.Context(), db, verify.Config{Registry: reg, Axioms: set, Budget: verify.Budget{WallClock: o.wall},
		Workers: o.workers, Seed: o.seed, Progress: bar.Stage("prove again")}, tag, toolVersion)
	bar.Finish()
	if r != nil {
		r.WriteRefused(cmd.ErrOrStderr())
	}
	if err != nil {
		return err
	}
	parent := "none"
	if r.Version.Parent != "" {
		parent = r.Version.Parent
	}
	fmt.Fprintf(cmd.OutOrStdout(), "released %s: %s, hash %s, parent %s\n", r.Version.Tag, english.Nouns(r.Version.Rules, "rule"), r.Version.Hash, parent)
	if r.Version.SameAs != "" {
		fmt.Fprintf(cmd.OutOrStdout(), "%s holds the same rules as %s: %s is an alias, and the hash keeps naming %s\n", r.Version.Tag, r.Version.SameAs, r.Version.Tag, r.Version.SameAs)
	}
	return nil
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
		Long:  help("diff"),
		Example: `  rulebook export --version v1 --format json -o v1.json
  rulebook diff v1.json v1
  rulebook build --max-ops 2 --db small.db --no-progress
  rulebook diff small.db:v1 v1`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			a, err := version.Open(cmd.Context(), dbPath(cmd), args[0])
			if err != nil {
				return err
			}
			b, err := version.Open(cmd.Context(), dbPath(cmd), args[1])
			if err != nil {
				return err
			}
			compare.DiffVersions(a, b).WriteText(cmd.OutOrStdout())
			return nil
		},
	}
}
