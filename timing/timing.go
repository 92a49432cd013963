// Package timing measures how long things take, the one way every
// measurement in rulebook does it. One warm-up run is not counted. Of the
// repeated runs after it the median counts, since a shared machine makes the
// odd run slow. Things compared with each other run side by side, in an
// order that alternates from round to round, so drift in the load falls on
// all of them. docs/design.md's package map lists it.
package timing

import (
	"context"
	"slices"
	"time"
)

// Median is the middle of ds (the upper middle for an even count), 0 for
// none. It sorts ds in place.
func Median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	return ds[len(ds)/2]
}

// Milliseconds is d in milliseconds, the unit costs are kept in.
func Milliseconds(d time.Duration) float64 {
	return float64(d) / float64(time.Millisecond)
}

// FromMilliseconds is the duration of ms milliseconds.
func FromMilliseconds(ms float64) time.Duration {
	return time.Duration(ms * float64(time.Millisecond))
}

// Wall turns run into a measurement by the wall clock.
func Wall(run func() error) func() (time.Duration, error) {
	return func() (time.Duration, error) {
		start := time.Now()
		err := run()
		return time.Since(start), err
	}
}

// Repeat calls measure once to warm up, then repeat times (at least once),
// and returns the median of the repeated measurements. measure reports
// the time of one run: Wall's, or a device's own clock. ctx is checked
// before each timed run; its error and measure's come back unwrapped.
func Repeat(ctx context.Context, repeat int, measure func() (time.Duration, error)) (time.Duration, error) {
	if _, err := measure(); err != nil {
		return 0, err
	}
	times := make([]time.Duration, max(repeat, 1))
	for i := range times {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		d, err := measure()
		if err != nil {
			return 0, err
		}
		times[i] = d
	}
	return Median(times), nil
}

// Alternate runs n contenders once a round for rounds rounds: first to
// last in even rounds, last to first in odd ones, so that none always runs
// first, or always right after the same other one. run(i) runs contender
// i and records whatever it measures. ctx is checked before each round.
func Alternate(ctx context.Context, rounds, n int, run func(i int) error) error {
	for r := range rounds {
		if err := ctx.Err(); err != nil {
			return err
		}
		for k := range n {
			i := k
			if r%2 == 1 {
				i = n - 1 - k
			}
			if err := run(i); err != nil {
				return err
			}
		}
	}
	return nil
}

// Settle is how long SideBySide leaves the machine idle between two
// different contenders. Runtimes keep their worker threads spinning for a
// while after a run (ONNX Runtime's for milliseconds, ours for 100 µs);
// timed right after another runtime's run, a contender shared its cores
// with those spinning threads: resnet50 at two threads took 72 ms
// instead of 49 right after ONNX Runtime's runs, 61 ms with 20 ms between
// them, and within noise of its own process's time with 100 ms.
const Settle = 50 * time.Millisecond

// SideBySide runs every contender once to warm up, then rounds times
// each, alternating their order (see Alternate) with Settle between
// different contenders, and returns each one's median wall-clock time, in
// the contenders' order.
func SideBySide(ctx context.Context, rounds int, contenders ...func() error) ([]time.Duration, error) {
	times, err := SideBySideTimes(ctx, rounds, contenders...)
	if err != nil {
		return nil, err
	}
	medians := make([]time.Duration, len(contenders))
	for i, ts := range times {
		medians[i] = Median(ts)
	}
	return medians, nil
}

// Spread is the interquartile range of ds, how far apart the middle half
// of the runs lie: two medians closer than it differ by noise. It is 0
// for fewer than two runs, and sorts ds in place.
func Spread(ds []time.Duration) time.Duration {
	if len(ds) < 2 {
		return 0
	}
	slices.Sort(ds)
	q := (len(ds) - 1) / 4
	return ds[len(ds)-1-q] - ds[q]
}

// SideBySideTimes is SideBySide with every timed run kept: each
// contender's wall-clock times, in the contenders' order.
func SideBySideTimes(ctx context.Context, rounds int, contenders ...func() error) ([][]time.Duration, error) {
	for _, run := range contenders {
		if err := run(); err != nil {
			return nil, err
		}
	}
	times := make([][]time.Duration, len(contenders))
	last := -1
	err := Alternate(ctx, max(rounds, 1), len(contenders), func(i int) error {
		if last >= 0 && last != i {
			time.Sleep(Settle)
		}
		last = i
		d, err := Wall(contenders[i])()
		times[i] = append(times[i], d)
		return err
	})
	if err != nil {
		return nil, err
	}
	return times, nil
}
