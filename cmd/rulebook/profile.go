package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"rulebook/internal/progress"
	"rulebook/profile"
)

func newProfileCmd() *cobra.Command {
	var (
		opt        profile.MeasureOptions
		out, sizes string
		noProgress bool
		clock      string
	)
	cmd := &cobra.Command{
		Use:     "profile --out FILE",
		Short:   "Measure a device profile (operator times) with PyTorch on this machine's GPU or CPU",
		Long:    help("profile"),
		Example: "  rulebook profile --out cpu-profile.csv --sizes small",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if out == "" {
				return fmt.Errorf("--out: name the profile file to write")
			}
			if opt.Threads < 0 {
				return fmt.Errorf("--threads must not be negative, got %d", opt.Threads)
			}
			if clock != "wall" && clock != "cpu" {
				return fmt.Errorf("--clock: unknown clock %q (known: wall, cpu)", clock)
			}
			opt.CPUClock = clock == "cpu"
			var err error
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
			p := m.Profile
			fmt.Fprintf(cmd.OutOrStdout(), "measured %d operators in %s on %s\nwrote %s\n",
				len(p.Entries), precisions(p), p.Device, out)
			return nil
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
	return cmd
}

// precisions lists a profile's precisions: "bf16 and fp32".
func precisions(p *profile.Profile) string {
	var names []string
	for _, prec := range p.Precisions() {
		names = append(names, string(prec))
	}
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
}
