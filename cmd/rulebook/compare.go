package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"rulebook/axioms"
	"rulebook/compare"
	"rulebook/internal/budget"
	"rulebook/internal/progress"
	"rulebook/store"
	"rulebook/verify"
	"rulebook/version"
)

// maxSteps bounds --steps: every step multiplies the rewrites a search
// for an implication may try.
const maxSteps = 64

type compareOptions struct {
	tag, format, axiomDir string
	limits                proofLimits
	steps, workers        int
	all, noProgress       bool
}

func newCompareCmd() *cobra.Command {
	var o compareOptions
	cmd := &cobra.Command{
		Use:   "compare --version TAG FILE",
		Short: "Relate a foreign rule file to a released version, and prove its rules",
		Long:  help("compare"),
		Example: `  rulebook compare --version v1 ../shared/anchors/taso-generator-3ops.pb
  rulebook compare --version v1 --all ../shared/anchors/taso-repo-graph_subst.pb`,
		Args: cobra.ExactArgs(1),
		PreRunE: func(*cobra.Command, []string) error {
			if o.tag == "" {
				return fmt.Errorf("--version is required (see 'rulebook versions')")
			}
			if o.steps < 1 || o.steps > maxSteps {
				return fmt.Errorf("--steps must be 1 to %d, got %d", maxSteps, o.steps)
			}
			if o.workers != 0 { // 0: all cores
				if err := budget.CheckWorkers(o.workers); err != nil {
					return fmt.Errorf("--workers: %w", err)
				}
			}
			return o.limits.check()
		},
		RunE: withStore(func(cmd *cobra.Command, args []string, db *store.Store) error {
			return runCompare(cmd, db, args[0], o)
		}),
	}
	f := cmd.Flags()
	f.StringVar(&o.tag, "version", "", "version tag or hash prefix to compare against")
	f.StringVar(&o.format, "format", "", "taso-pb, flexflow-json, json or sexpr (default: from the file's extension and content)")
	f.StringVar(&o.axiomDir, "axioms", "", "axiom folder for the verifier (default: ./axioms if present, else the built-in set)")
	o.limits.register(f)
	f.IntVar(&o.steps, "steps", compare.DefaultLimits.Steps, "longest rewrite sequence that counts as implied")
	f.IntVar(&o.workers, "workers", 0, "parallel workers (default: all cores)")
	f.BoolVar(&o.all, "all", false, "print every rule, not only those that fall short")
	f.BoolVar(&o.noProgress, "no-progress", false, "no progress bar")
	return cmd
}

func runCompare(cmd *cobra.Command, db *store.Store, path string, o compareOptions) error {
	reg := version.Registry()
	set, err := axioms.Find(o.axiomDir, reg)
	if err != nil {
		return err
	}
	bar := progress.New(cmd.ErrOrStderr(), o.noProgress)
	lim := compare.DefaultLimits
	lim.Steps, lim.Workers = o.steps, o.workers
	cfg := verify.Config{Registry: reg, Axioms: set, Budget: o.limits.budget(), Workers: o.workers}
	r, err := compare.File(cmd.Context(), db, path, o.format, o.tag, lim, cfg, bar.Report)
	bar.Finish()
	if err != nil {
		return err
	}
	r.WriteText(cmd.OutOrStdout(), path, o.all)
	return nil
}
