// Command rulebook discovers, proves and publishes graph substitutions.
// Its subcommands only parse flags and print. The work is in the packages.
// README.md shows the commands, and docs/design.md ("Data flow") how the
// stages fit together.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"

	"github.com/spf13/cobra"

	"rulebook/internal/budget"
	"rulebook/internal/outfile"
	"rulebook/internal/safetext"
	"rulebook/store"
)

// toolVersion is the tool version recorded with every run.
const toolVersion = "0.1.0-dev"

const defaultDB = "rulebook.db"

// defaultMemoryLimit is the Go heap's soft limit unless GOMEMLIMIT says
// otherwise: generation at 4 operators must stay under 8 GiB, and without a
// limit the collector lets the heap reach twice the live data.
const defaultMemoryLimit = 6 << 30

func main() {
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(defaultMemoryLimit)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// Output lost to a full disk or a closed standard output is an error
	// like any other: the exit status says so.
	stdout := outfile.NewStdout(os.Stdout)
	root := newRootCmd()
	root.SetOut(stdout)
	err := root.ExecuteContext(ctx)
	if serr := stdout.Err(); serr != nil && !errors.Is(err, context.Canceled) {
		err = serr
	}
	if err == nil {
		return
	}
	err = store.DiskFull(dbPath(root), err)
	// Paths and names in an error come from the user or from files.
	fmt.Fprintln(os.Stderr, "rulebook:", safetext.Message(err.Error()))
	if errors.Is(err, context.Canceled) {
		os.Exit(130)
	}
	os.Exit(1)
}

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "rulebook",
		Short:         "Discover, prove and publish tensor graph substitutions",
		Long:          help("rulebook"),
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       toolVersion,
	}
	root.PersistentFlags().String("db", "", "SQLite database file (default $RULEBOOK_DB or rulebook.db)")
	root.PersistentFlags().String("memory-budget", "", "most memory that sizes from inputs may ask for (tensor shapes, degrees, workers), e.g. 8GiB (default half of the machine's memory)")
	root.AddCommand(newGenerateCmd(), newVerifyCmd(), newWhyCmd(), newAxiomsCmd(), newPruneCmd(), newCompareCmd(), newReleaseCmd(), newVersionsCmd(), newDiffCmd(), newExportCmd(), newImportCmd(), newRunCmd(), newBenchOpsCmd(), newOptimizeCmd(), newListCmd(), newShowCmd(), newStatsCmd(), newOpsCmd(), newPlanCmd(), newProfileCmd())
	root.AddCommand(newUsageCmd(), newBuildCmd())
	return root
}

// memoryBudget reads --memory-budget: the machine's default unless given.
func memoryBudget(cmd *cobra.Command) (budget.Budget, error) {
	s, _ := cmd.Flags().GetString("memory-budget")
	if s == "" {
		return budget.Default(), nil
	}
	b, err := budget.Parse(s)
	if err != nil {
		return budget.Budget{}, fmt.Errorf("--memory-budget: %w", err)
	}
	return b, nil
}

// dbPath resolves --db, then RULEBOOK_DB, then the default.
func dbPath(cmd *cobra.Command) string {
	if p, _ := cmd.Flags().GetString("db"); p != "" {
		return p
	}
	if p := os.Getenv("RULEBOOK_DB"); p != "" {
		return p
	}
	return defaultDB
}
