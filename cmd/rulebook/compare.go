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
		Long: `compare reads a rule file (taso-pb, flexflow-json, json or sexpr) and, for
each of its rules, says whether version TAG contains it (the same rule up to
renaming of inputs, order of outputs and orientation), implies it (a short
sequence of the version's rules, used in either direction, rewrites its
source into its target) or misses it. It also runs our verifier on each
foreign rule against the axioms in --axioms: proved, unknown or refuted.

It prints the rules that fall short (missed, or not proved) and a summary;
--all prints every rule. "implied by 298,~3" lists, by id ('rulebook show
298'), the version's rules whose rewrites turn the foreign rule's source
into its target, in order; "~" marks a rule applied backwards, target to
source. Nothing is written to the database.

Parallel rules are swept in the file's direction at every combined layout of
their inputs, by the exact evaluator, with their degree 2 read as d = 2, 3, 4:
"refuted" (in value, in layout, or a target that cannot be laid out where the
source can) or "true at degree 2 only", each with the layout it fails at. A
rule our verifier refutes is never contained or implied. Targets reading
inputs the source never binds are listed, sound or not. A FlexFlow file is
also judged under FlexFlow's own reading, where replicate and reduce act on
the dimension they name, and both readings are counted side by side
(docs/parallel.md).`,
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
