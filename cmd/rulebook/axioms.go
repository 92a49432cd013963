package main

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"time"

	"github.com/spf13/cobra"

	"rulebook/axioms"
	"rulebook/internal/budget"
	"rulebook/internal/progress"
	"rulebook/verify"
	"rulebook/version"
)

func newAxiomsCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "axioms",
		Short: "Inspect and validate axiom files",
	}
	cmd.AddCommand(newAxiomsCheckCmd())
	return cmd
}

func newAxiomsCheckCmd() *cobra.Command {
	var timeout time.Duration
	var workers, maxDim int
	var noProgress bool
	cmd := &cobra.Command{
		Use:   "check [DIR]",
		Short: "Check that the axioms in DIR (default axioms/) are consistent, which are redundant, and that each holds on concrete tensors",
		Long:  help("axioms-check"),
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir := ""
			if len(args) == 1 {
				dir = args[0]
			}
			if timeout <= 0 {
				return fmt.Errorf("--timeout must be positive, got %s", timeout)
			}
			if err := budget.CheckWorkers(workers); err != nil {
				return fmt.Errorf("--workers: %w", err)
			}
			if maxDim < 1 || maxDim > 4 {
				return fmt.Errorf("--max-dim must be 1..4, got %d", maxDim)
			}
			bar := progress.New(cmd.ErrOrStderr(), noProgress)
			defer bar.Finish()
			return runAxiomsCheck(cmd.Context(), cmd.OutOrStdout(), dir, verify.AxiomCheck{Timeout: timeout, Workers: workers, MaxDim: maxDim, Progress: func(s progress.Step) {
				bar.Report(s)
				if s.Done == s.Total {
					bar.Finish() // the step's report comes next, on a clean line
				}
			}})
		},
	}
	cmd.Flags().DurationVar(&timeout, "timeout", time.Second, "time limit per Z3 query (ten times this for the consistency query)")
	cmd.Flags().IntVar(&workers, "workers", runtime.GOMAXPROCS(0), "parallel workers")
	cmd.Flags().IntVar(&maxDim, "max-dim", 3, "largest extent of a dimension in the concrete check")
	cmd.Flags().BoolVar(&noProgress, "no-progress", false, "do not draw progress bars (a line per step instead)")
	return cmd
}

func runAxiomsCheck(ctx context.Context, out io.Writer, dir string, c verify.AxiomCheck) error {
	reg := version.Registry()
	set, err := axioms.Find(dir, reg)
	if err != nil {
		return err
	}
	return verify.CheckAxioms(ctx, out, reg, set, c)
}
