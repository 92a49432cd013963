package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"rulebook/internal/progress"
	"rulebook/profile"
)

func newProfileCmd() *cobra.Command {
	var opt profile.MeasureOptions
	var out, sizes, clock string
	var noProgress bool
	cmd := &cobra.Command{
		Use:     "profile --out FILE",
		Short:   "Measure a device profile (operator times) with PyTorch on this machine's GPU or CPU",
		Long:    help("profile"),
		Example: "  rulebook profile --out cpu-profile.csv --sizes small",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			var err error
			if opt.CPUClock, err = profile.ParseClock(clock); err != nil {
				return fmt.Errorf("--clock: %w", err)
			}
			if opt.Sizes, err = profile.ParseSizes(sizes); err != nil {
				return fmt.Errorf("--sizes: %w", err)
			}
			bar := progress.New(cmd.ErrOrStderr(), noProgress)
			opt.Progress = func(done, total int, what string) {
				bar.Line(fmt.Sprintf("measuring %d operators with PyTorch", total))
				bar.Status(what, int64(done), int64(total))
			}
			opt.Started = func() { bar.Line(fmt.Sprintf("starting %s (sizes %s)", opt.Python, opt.Sizes)) }
			m, err := profile.MeasureFile(cmd.Context(), out, opt)
			bar.Finish()
			if err != nil {
				return err
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "measured %d operators in %s on %s\nwrote %s\n", len(m.Profile.Entries), m.Profile.PrecisionList(), m.Profile.Device, out)
			return err
		},
	}
	f := cmd.Flags()
	f.StringVarP(&out, "out", "o", "", "the profile to write (CSV, as ../shared/devices/README.md describes)")
	f.StringVar(&sizes, "sizes", "full", "shapes to measure: full (the H200 profile's on a GPU, a CPU-sized set on a CPU) or small (seconds, for CI)")
	f.StringVar(&opt.Python, "python", "python3", "the Python interpreter, with torch installed")
	f.StringVar(&opt.Device, "device", "", "cpu or cuda (default: a CUDA GPU if torch sees one, else the CPU)")
	f.IntVar(&opt.Threads, "threads", 0, "CPU threads for torch (default: torch's own choice)")
	f.StringVar(&clock, "clock", "wall", "wall, or cpu: the process's CPU time, which other work on a shared machine does not inflate (with --device cpu)")
	f.BoolVar(&noProgress, "no-progress", false, "draw no progress bar")
	_ = cmd.MarkFlagRequired("out")
	return cmd
}
