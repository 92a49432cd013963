package timing

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"
)

func TestMedian(t *testing.T) {
	cases := []struct {
		in   []time.Duration
		want time.Duration
	}{
		{nil, 0},
		{[]time.Duration{3}, 3},
		{[]time.Duration{5, 1, 3}, 3},
		{[]time.Duration{4, 1, 3, 2}, 3}, // the upper middle
	}
	for _, c := range cases {
		if got := Median(slices.Clone(c.in)); got != c.want {
			t.Errorf("Median(%v) = %v, want %v", c.in, got, c.want)
		}
	}
	if ms := Milliseconds(1500 * time.Microsecond); ms != 1.5 {
		t.Errorf("Milliseconds(1.5ms) = %g", ms)
	}
	if d := FromMilliseconds(2.25); d != 2250*time.Microsecond {
		t.Errorf("FromMilliseconds(2.25) = %v", d)
	}
}

// Repeat warms up once, uncounted, and takes the median of the rest.
func TestRepeat(t *testing.T) {
	var calls int
	times := []time.Duration{time.Hour, 7, 1, 9}
	got, err := Repeat(context.Background(), 3, func() (time.Duration, error) {
		calls++
		return times[calls-1], nil
	})
	if err != nil || got != 7 || calls != 4 {
		t.Errorf("Repeat = %v, %v after %d calls; want 7 after 4 (the warm-up's hour left out)", got, err, calls)
	}
	if _, err := Repeat(context.Background(), 0, func() (time.Duration, error) { calls++; return 1, nil }); err != nil || calls != 6 {
		t.Errorf("Repeat 0 times: %v, %d calls; want one timed run after the warm-up", err, calls-4)
	}
	boom := errors.New("boom")
	if _, err := Repeat(context.Background(), 3, func() (time.Duration, error) { return 0, boom }); err != boom {
		t.Errorf("a failing measurement: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Repeat(ctx, 3, func() (time.Duration, error) { return 1, nil }); !errors.Is(err, context.Canceled) {
		t.Errorf("a cancelled context: %v", err)
	}
}

func TestAlternate(t *testing.T) {
	var order []int
	err := Alternate(context.Background(), 3, 3, func(i int) error { order = append(order, i); return nil })
	if want := []int{0, 1, 2, 2, 1, 0, 0, 1, 2}; err != nil || !slices.Equal(order, want) {
		t.Errorf("order %v (err %v), want %v", order, err, want)
	}
}

func TestSideBySide(t *testing.T) {
	var runs [2]int
	medians, err := SideBySide(context.Background(), 4,
		func() error { runs[0]++; return nil },
		func() error { runs[1]++; time.Sleep(2 * time.Millisecond); return nil })
	if err != nil || len(medians) != 2 || medians[1] < 2*time.Millisecond || medians[0] >= medians[1] {
		t.Errorf("medians %v (err %v)", medians, err)
	}
	if runs != [2]int{5, 5} {
		t.Errorf("runs %v, want a warm-up and 4 rounds each", runs)
	}
}

// Spread is the interquartile range: the odd slow run does not widen it,
// and one run has none.
func TestSpread(t *testing.T) {
	cases := []struct {
		in   []time.Duration
		want time.Duration
	}{
		{nil, 0},
		{[]time.Duration{7}, 0},
		{[]time.Duration{3, 1}, 2},
		{[]time.Duration{10, 11, 12, 13, 100}, 2}, // the outlier falls outside
	}
	for _, c := range cases {
		if got := Spread(slices.Clone(c.in)); got != c.want {
			t.Errorf("Spread(%v) = %v, want %v", c.in, got, c.want)
		}
	}
}
