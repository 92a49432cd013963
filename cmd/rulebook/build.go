package main

import (
	"fmt"
	"runtime"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"rulebook/axioms"
	"rulebook/build"
	"rulebook/enumerate"
	"rulebook/internal/progress"
	"rulebook/store"
	"rulebook/verify"
)

type buildOptions struct {
	maxOps     int
	ops        string
	degrees    string
	tag        string
	axiomsDir  string
	limits     proofLimits
	seed       uint64
	workers    int
	noProgress bool
}

func newBuildCmd() *cobra.Command {
	var o buildOptions
	cmd := &cobra.Command{
		Use:   "build",
		Short: "Generate, verify, prune and release a rulebook in one command",
		Long:  help("build"),
		Example: `  rulebook build --max-ops 3
  rulebook build --max-ops 4 --tag v4 --db big.db
  rulebook build --axioms my-axioms/ --tag experiment
  rulebook build --max-ops 2 --ops parallel --degrees 2,3 --db pcg.db`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runBuild(cmd, o) },
	}
	f := cmd.Flags()
	f.IntVar(&o.maxOps, "max-ops", 3, fmt.Sprintf("largest graph size in operators (1..%d)", enumerate.MaxOps))
	f.StringVar(&o.ops, "ops", "", "operators to generate over, as for generate")
	f.StringVar(&o.degrees, "degrees", "2", "parallel degrees, as for generate")
	f.StringVar(&o.tag, "tag", "", "tag of the released version (default: the first free v1, v2, ...)")
	f.StringVar(&o.axiomsDir, "axioms", "", "folder of *.smt2 axiom files (default: ./axioms if present, else the built-in set)")
	o.limits.register(f)
	f.Uint64Var(&o.seed, "seed", 1, "seed of the fingerprint, float-test and counterexample inputs")
	f.IntVar(&o.workers, "workers", runtime.GOMAXPROCS(0), "parallel workers")
	f.BoolVar(&o.noProgress, "no-progress", false, "do not draw progress bars")
	return cmd
}

func runBuild(cmd *cobra.Command, o buildOptions) error {
	ctx := cmd.Context()
	switch {
	case o.maxOps < 1 || o.maxOps > enumerate.MaxOps:
		return fmt.Errorf("--max-ops must be between 1 and %d, got %d", enumerate.MaxOps, o.maxOps)
	case o.workers < 1:
		return fmt.Errorf("--workers must be at least 1, got %d", o.workers)
	}
	if err := o.limits.check(); err != nil {
		return err
	}
	ops, degrees, err := enumerate.Operators(o.ops, o.degrees, cmd.Flags().Changed("degrees"))
	if err != nil {
		return err
	}
	mem, err := generationBudget(cmd, ops, degrees, o.workers)
	if err != nil {
		return err
	}
	reg := build.VerifyRegistry()
	set, err := axioms.Find(o.axiomsDir, reg) // before the database: a bad file changes nothing
	if err != nil {
		return err
	}
	db, err := store.Open(ctx, dbPath(cmd))
	if err != nil {
		return err
	}
	defer db.Close()
	bar := progress.New(cmd.ErrOrStderr(), o.noProgress)
	sum, err := build.Run(ctx, db, build.Config{Registry: reg, Ops: ops, Degrees: degrees, Axioms: set, MaxOps: o.maxOps, Tag: o.tag, Seed: o.seed,
		Workers: o.workers, Budget: o.limits.budget(), Memory: mem, ToolVersion: toolVersion,
		Progress: bar.Report})
	bar.Finish()
	if err != nil {
		return err
	}
	sum.WriteText(cmd.OutOrStdout(), db.Path())
	return nil
}

// proofLimits are the verifier's limits per rule, as flags: the budget of
// Z3 resource units that decides, and the wall clock that only guards.
type proofLimits struct {
	units uint64
	wall  time.Duration
}

func (l *proofLimits) register(f *pflag.FlagSet) {
	d := verify.DefaultBudget()
	f.Uint64Var(&l.units, "budget", d.Units, "Z3 resource units (rlimit) per rule: the deterministic proof budget")
	f.DurationVar(&l.wall, "timeout", d.WallClock, "wall-clock safety net per rule")
}

func (l proofLimits) check() error {
	if l.units == 0 || l.wall <= 0 {
		return fmt.Errorf("--budget and --timeout must be positive, got %d and %s", l.units, l.wall)
	}
	return l.budget().Check()
}

func (l proofLimits) budget() verify.Budget { return verify.Budget{Units: l.units, WallClock: l.wall} }
