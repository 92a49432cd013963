package main

import (
	"context"
	"fmt"
	"runtime"
	"time"

	"github.com/spf13/cobra"

	"rulebook/axioms"
	"rulebook/internal/budget"
	"rulebook/internal/progress"
	"rulebook/store"
	"rulebook/verify"
	"rulebook/version"
)

type verifyOptions struct {
	limits     proofLimits
	sel        verify.Selection
	workers    int
	seed       uint64
	noProgress bool
}

func newVerifyCmd() *cobra.Command {
	var o verifyOptions
	cmd := &cobra.Command{
		Use:   "verify [DIR]",
		Short: "Prove candidate rules from the axioms in DIR (default axioms/) with Z3",
		Long:  help("verify"),
		Example: `  rulebook verify
  rulebook verify axioms/ --budget 1000000 --rule 42
  rulebook verify --retry-unknown --budget 5000000 --timeout 2m`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir := ""
			if len(args) == 1 {
				dir = args[0]
			}
			return runVerify(cmd.Context(), cmd, dir, o)
		},
	}
	f := cmd.Flags()
	o.limits.register(f)
	f.Int64Var(&o.sel.RuleID, "rule", 0, "verify only this rule (again, if it has a result)")
	f.BoolVar(&o.sel.Recheck, "recheck", false, "verify every rule again, even those with a result under this axiom set")
	f.BoolVar(&o.sel.RetryUnknown, "retry-unknown", false, "verify again the rules whose latest result under this axiom set is unknown")
	f.IntVar(&o.workers, "workers", runtime.GOMAXPROCS(0), "parallel Z3 solvers")
	f.Uint64Var(&o.seed, "seed", 1, "seed of the counterexample search")
	f.BoolVar(&o.noProgress, "no-progress", false, "do not draw a progress bar")
	return cmd
}

func runVerify(ctx context.Context, cmd *cobra.Command, dir string, o verifyOptions) error {
	if err := o.limits.check(); err != nil {
		return err
	}
	if err := o.sel.Check(); err != nil {
		return err
	}
	if err := budget.CheckWorkers(o.workers); err != nil {
		return fmt.Errorf("--workers: %w", err)
	}
	reg := version.Registry()
	set, err := axioms.Find(dir, reg) // before the database: a bad file changes nothing
	if err != nil {
		return err
	}
	db, err := store.OpenExisting(ctx, dbPath(cmd))
	if err != nil {
		return err
	}
	defer db.Close()
	settings := map[string]any{"axioms": dir, "axiom_set": set.Hash, "budget": o.limits.units, "timeout": o.limits.wall.String(), "rule": o.sel.RuleID, "recheck": o.sel.Recheck, "retry_unknown": o.sel.RetryUnknown}
	bar := progress.New(cmd.ErrOrStderr(), o.noProgress)
	start := time.Now()
	sum, err := verify.Stored(ctx, db, verify.Config{Registry: reg, Axioms: set, Budget: o.limits.budget(), Workers: o.workers, Seed: o.seed,
		Progress: bar.Stage("verify")}, verify.Request{Selection: o.sel, Settings: settings, ToolVersion: toolVersion, Waiting: waitingNote(cmd)})
	bar.Finish()
	if err != nil {
		return err
	}
	sum.WriteText(cmd.OutOrStdout(), set, time.Since(start))
	if sum.Rules > 0 {
		return nil
	}
	note, err := verify.NothingSelected(ctx, db, set.Hash, o.limits.units, o.sel)
	if err == nil {
		fmt.Fprintln(cmd.OutOrStdout(), note)
	}
	return err
}

// waitingNote tells the user which run a verification waits for.
func waitingNote(cmd *cobra.Command) func(store.Run) {
	return func(r store.Run) {
		fmt.Fprintf(cmd.ErrOrStderr(), "waiting for run %d (%s, pid %d on %s, started %s) to finish verifying this database\n",
			r.ID, r.Command, r.PID, r.Host, r.StartedAt.Local().Format("15:04:05"))
	}
}

func newWhyCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "why ID",
		Short: "Show a rule, its status and the axioms its proof used",
		Args:  cobra.ExactArgs(1),
		RunE: withRule(func(cmd *cobra.Command, db *store.Store, r store.Rule) error {
			return verify.WriteWhy(cmd.Context(), cmd.OutOrStdout(), db, r)
		}),
	}
}
