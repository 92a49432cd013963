package backend

import (
	"context"
	"fmt"
	"io"
	"math"
	"text/tabwriter"
	"time"

	"rulebook/runtime"
	"rulebook/timing"
)

// Result is one executor's part in a side-by-side run.
type Result struct {
	// Device is the executor's device key ("cpu/2", "ort-cpu/2").
	Device string
	// Median is the median wall-clock time of one run.
	Median time.Duration
	// Outputs are those of its last run.
	Outputs map[string]*runtime.Tensor
}

// SideBySide runs the same model on each executor with the same inputs,
// in one process: one warm-up run each, then rounds runs each, the order
// alternating from round to round (timing.SideBySide), so that the load
// of a shared machine falls on all of them alike.
func SideBySide(ctx context.Context, execs []runtime.Executor, feeds map[string]*runtime.Tensor, rounds int) ([]Result, error) {
	results := make([]Result, len(execs))
	contenders := make([]func() error, len(execs))
	for i, e := range execs {
		results[i].Device = e.DeviceKey()
		contenders[i] = func() (err error) {
			results[i].Outputs, err = e.Run(ctx, feeds)
			if err != nil {
				err = fmt.Errorf("%s: %w", results[i].Device, err)
			}
			return err
		}
	}
	medians, err := timing.SideBySide(ctx, rounds, contenders...)
	if err != nil {
		return nil, err
	}
	for i, d := range medians {
		results[i].Median = d
	}
	return results, nil
}

// WriteSideBySide prints one line per backend: its device, median, the
// ratio of its median to the first backend's, and how far its outputs
// are from the first's (the largest difference relative to the largest
// magnitude of the first's, over all outputs).
func WriteSideBySide(w io.Writer, m *runtime.Model, names []string, results []Result, rounds int) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "BACKEND\tDEVICE\tMEDIAN\t× %s\tOUTPUTS AGAINST %s\n", names[0], names[0])
	for i, r := range results {
		ratio := float64(r.Median) / float64(results[0].Median)
		diff := "-"
		if i > 0 {
			diff = fmt.Sprintf("largest difference %.2g of largest |output|", relativeDifference(m, results[0].Outputs, r.Outputs))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%.2f\t%s\n", names[i], r.Device, r.Median.Round(time.Microsecond), ratio, diff)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "medians of %d runs each, alternating, after a warm-up run each\n", rounds)
	return err
}

// relativeDifference is the largest |got − want| over every output,
// divided by the largest |want|: a scale-free measure that logits near
// zero do not inflate.
func relativeDifference(m *runtime.Model, want, got map[string]*runtime.Tensor) float64 {
	var diff, scale float64
	for _, o := range m.Outputs() {
		w, g := want[o.Name], got[o.Name]
		if g == nil {
			return math.Inf(1)
		}
		for k := range w.Data {
			scale = math.Max(scale, math.Abs(float64(w.Data[k])))
			if k < len(g.Data) {
				diff = math.Max(diff, math.Abs(float64(g.Data[k])-float64(w.Data[k])))
			} else {
				diff = math.Inf(1)
			}
		}
	}
	if scale == 0 {
		return diff
	}
	return diff / scale
}
