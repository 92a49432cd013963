package main

import (
	"context"
	"fmt"
	"runtime"
	"time"

	"github.com/spf13/cobra"

	"rulebook/enumerate"
	"rulebook/internal/budget"
	"rulebook/internal/progress"
	"rulebook/rules"
	"rulebook/store"
)

type generateOptions struct {
	maxOps     int
	ops        string
	degrees    string
	seed       uint64
	workers    int
	exhaustive bool
	noProgress bool
	kernel1x1  bool
}

func newGenerateCmd() *cobra.Command {
	var o generateOptions
	cmd := &cobra.Command{
		Use:   "generate",
		Short: "Enumerate small graphs and store candidate rules",
		Long:  help("generate"),
		Example: `  rulebook generate --max-ops 3
  rulebook generate --max-ops 2 --ops matmul,ewadd,transpose --db small.db
  rulebook generate --max-ops 2 --ops parallel --degrees 2,3 --db pcg.db
  rulebook generate --max-ops 2 --ops conv2d,pool_avg --kernel-1x1 --db cond.db`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runGenerate(cmd.Context(), cmd, o)
		},
	}
	f := cmd.Flags()
	f.IntVar(&o.maxOps, "max-ops", 3, fmt.Sprintf("largest graph size in operators (1..%d)", enumerate.MaxOps))
	f.StringVar(&o.ops, "ops", "", "comma-separated operators, or 'parallel' for the parallel set (default: TASO's set; see 'rulebook ops')")
	f.StringVar(&o.degrees, "degrees", "2", "parallel degrees to enumerate, comma-separated (parallel operators only)")
	f.BoolVar(&o.kernel1x1, "kernel-1x1", false, "also find rules that hold only for 1x1 kernels, conditioned on them")
	f.Uint64Var(&o.seed, "seed", 1, "seed of the fingerprint and float-test inputs")
	f.IntVar(&o.workers, "workers", runtime.GOMAXPROCS(0), "parallel workers")
	f.BoolVar(&o.exhaustive, "exhaustive", false, "extend every graph, not only class representatives (slow)")
	f.BoolVar(&o.noProgress, "no-progress", false, "do not draw progress bars")
	return cmd
}

func runGenerate(ctx context.Context, cmd *cobra.Command, o generateOptions) error {
	// Validate everything before touching the database.
	if o.maxOps < 1 || o.maxOps > enumerate.MaxOps {
		return fmt.Errorf("--max-ops must be between 1 and %d, got %d", enumerate.MaxOps, o.maxOps)
	}
	reg, degrees, err := enumerate.Operators(o.ops, o.degrees, cmd.Flags().Changed("degrees"))
	if err != nil {
		return err
	}
	if o.workers < 1 {
		return fmt.Errorf("--workers must be at least 1, got %d", o.workers)
	}
	mem, err := generationBudget(cmd, reg, degrees, o.workers)
	if err != nil {
		return err
	}
	db, err := store.Open(ctx, dbPath(cmd))
	if err != nil {
		return err
	}
	defer db.Close()
	start := time.Now()
	bar := progress.New(cmd.ErrOrStderr(), o.noProgress)
	cfg := enumerate.Config{Registry: reg, Pool: rules.DefaultPool(), Degrees: degrees, MaxOps: o.maxOps, Seed: o.seed, Workers: o.workers,
		Exhaustive: o.exhaustive, ConditionKernels: kernelConditions(o.kernel1x1), Memory: mem, Progress: bar.Report}
	res, err := enumerate.GenerateInto(ctx, db, cfg, toolVersion)
	bar.Finish()
	if err != nil {
		return err
	}
	res.WriteText(cmd.OutOrStdout(), time.Since(start))
	fmt.Fprintf(cmd.OutOrStdout(), "run %d written to %s\n", res.RunID, db.Path())
	return nil
}

// generationBudget reads --memory-budget and refuses --workers and
// --degrees that do not fit in it, before the database is opened.
func generationBudget(cmd *cobra.Command, reg *rules.Registry, degrees []int, workers int) (budget.Budget, error) {
	mem, err := memoryBudget(cmd)
	if err == nil {
		err = enumerate.CheckBudget(reg, degrees, workers, mem)
	}
	return mem, err
}

// kernelConditions are the kernel extents --kernel-1x1 asks for.
func kernelConditions(on bool) [][2]int {
	if on {
		return [][2]int{{1, 1}}
	}
	return nil
}
