package main

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"rulebook/axioms"
	"rulebook/rules"
	"rulebook/verify"
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
	cmd := &cobra.Command{
		Use:   "check [DIR]",
		Short: "Check that the axioms in DIR (default axioms/) are consistent, which are redundant, and that each holds on concrete tensors",
		Long: `check validates the axioms themselves, in three steps:
  consistency  Z3 looks for a model of all axioms together (an inconsistent set
               proves anything);
  redundancy   for each axiom, whether the others entail it (reported only:
               a redundant axiom can still make proofs fast);
  concrete     each axiom is evaluated on tensors of every shape up to rank 4
               with extents 1..--max-dim, for every parameter value the
               registry lists, in exact (modular) and float64 arithmetic.
               A false axiom is reported with shapes, parameters and values.
The command fails if the set is inconsistent or any axiom is false.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir := "axioms"
			if len(args) == 1 {
				dir = args[0]
			}
			if timeout <= 0 {
				return fmt.Errorf("--timeout must be positive, got %s", timeout)
			}
			if maxDim < 1 || maxDim > 4 {
				return fmt.Errorf("--max-dim must be 1..4, got %d", maxDim)
			}
			return runAxiomsCheck(cmd.Context(), cmd.OutOrStdout(), dir, timeout, workers, maxDim)
		},
	}
	cmd.Flags().DurationVar(&timeout, "timeout", time.Second, "time limit per Z3 query")
	cmd.Flags().IntVar(&workers, "workers", runtime.GOMAXPROCS(0), "parallel workers")
	cmd.Flags().IntVar(&maxDim, "max-dim", 3, "largest extent of a dimension in the concrete check")
	return cmd
}

func runAxiomsCheck(ctx context.Context, out io.Writer, dir string, timeout time.Duration, workers, maxDim int) error {
	reg := rules.Default()
	set, err := axioms.Load(dir, reg)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "%d axioms in %s (set %s)\n", len(set.Axioms), dir, set.Hash)
	var failures []string

	status, core, err := verify.Consistency(ctx, reg, set, 10*timeout)
	if err != nil {
		return err
	}
	switch status {
	case verify.Consistent:
		fmt.Fprintln(out, "consistency: consistent (Z3 found a model)")
	case verify.Inconsistent:
		fmt.Fprintf(out, "consistency: INCONSISTENT: %s contradict each other\n", strings.Join(core, ", "))
		failures = append(failures, "the axioms are inconsistent")
	default:
		fmt.Fprintf(out, "consistency: unknown (%s)\n", strings.Join(core, " "))
	}

	reds, err := verify.Redundancies(ctx, reg, set, timeout, workers)
	if err != nil {
		return err
	}
	n := map[string]int{}
	for _, r := range reds {
		n[r.Status]++
		if r.Status == verify.Redundant {
			fmt.Fprintf(out, "redundancy: %s is entailed by %s\n", r.Axiom, strings.Join(r.By, ", "))
		}
	}
	fmt.Fprintf(out, "redundancy: %d redundant, %d independent, %d not shown redundant within %s (reported, not an error)\n",
		n[verify.Redundant], n[verify.Independent], n[verify.Undetermined], timeout)

	bound := axioms.DefaultBound()
	bound.Dims = bound.Dims[:0]
	for d := 1; d <= maxDim; d++ {
		bound.Dims = append(bound.Dims, d)
	}
	reports, err := axioms.Validate(ctx, set, reg, bound, workers)
	if err != nil {
		return err
	}
	total := 0
	for _, r := range reports {
		total += r.Instances
		if !r.OK() {
			fmt.Fprintf(out, "concrete: %s (%s:%d) is FALSE: %s\n", r.Axiom.Name, r.Axiom.File, r.Axiom.Line, r.Counterexample)
			failures = append(failures, "axiom "+r.Axiom.Name+" is false")
		}
	}
	fmt.Fprintf(out, "concrete: %d of %d axioms hold at all %d instances (shapes up to rank 4, extents 1..%d)\n",
		len(reports)-len(failures), len(reports), total, maxDim)
	if len(failures) > 0 {
		return fmt.Errorf("%s", strings.Join(failures, "; "))
	}
	return nil
}
