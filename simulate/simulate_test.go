package simulate

import (
	"bytes"
	"context"
	"math"
	"strings"
	"testing"
)

var twoDevices = []Resource{
	{Name: "device 0", Kind: Device, Device: 0},
	{Name: "device 0 link", Kind: Link, Device: 0},
	{Name: "device 1", Kind: Device, Device: 1},
}

// TestRun: hand-computed starts and ends.
func TestRun(t *testing.T) {
	for _, c := range []struct {
		name       string
		tasks      []Task
		start, end []float64
		breakdown  Breakdown // of device 0
	}{
		{"chain", []Task{{Name: "a", Duration: 1}, {Name: "b", Duration: 2, Deps: []int{0}}},
			[]float64{0, 1}, []float64{1, 3}, Breakdown{Compute: 3}},
		{"resource order", []Task{{Name: "a", Duration: 1}, {Name: "b", Duration: 2}},
			[]float64{0, 1}, []float64{1, 3}, Breakdown{Compute: 3}},
		{"fork join over two devices", []Task{{Name: "a", Duration: 1}, {Name: "b", Resource: 2, Duration: 3},
			{Name: "c", Duration: 1, Deps: []int{0, 1}}},
			[]float64{0, 0, 3}, []float64{1, 3, 4}, Breakdown{Compute: 2, Idle: 2}},
		{"communication overlapped", []Task{{Name: "f", Duration: 2}, {Name: "send", Category: Communication, Resource: 1, Duration: 1, Deps: []int{0}},
			{Name: "g", Duration: 2, Deps: []int{0}}},
			[]float64{0, 2, 2}, []float64{2, 3, 4}, Breakdown{Compute: 4}},
		{"communication exposed", []Task{{Name: "f", Duration: 1}, {Name: "all-reduce", Category: Communication, Resource: 1, Duration: 3, Deps: []int{0}},
			{Name: "g", Duration: 1, Deps: []int{1}}},
			[]float64{0, 1, 4}, []float64{1, 4, 5}, Breakdown{Compute: 2, ExposedCommunication: 3}},
		{"a later task waits for an earlier one's resource", []Task{{Name: "x", Resource: 2, Duration: 5}, {Name: "y", Duration: 1, Deps: []int{0}},
			{Name: "z", Resource: 2, Duration: 1}},
			[]float64{0, 5, 5}, []float64{5, 6, 6}, Breakdown{Compute: 1, Idle: 5}},
	} {
		s, err := Run(context.Background(), twoDevices, c.tasks)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		for i := range c.tasks {
			if s.Start[i] != c.start[i] || s.End[i] != c.end[i] {
				t.Errorf("%s: task %s runs %g–%g, want %g–%g", c.name, c.tasks[i].Name, s.Start[i], s.End[i], c.start[i], c.end[i])
			}
		}
		b := s.Breakdown(0)
		if b != c.breakdown || math.Abs(b.Compute+b.ExposedCommunication+b.Idle-s.Makespan) > 1e-12 {
			t.Errorf("%s: device 0 %+v of %g, want %+v", c.name, b, s.Makespan, c.breakdown)
		}
		// both devices at once, as Breakdown gives each
		if all := s.Breakdowns([]int{0, 2}); all[0] != b || all[1] != s.Breakdown(2) {
			t.Errorf("%s: Breakdowns %+v, Breakdown %+v and %+v", c.name, all, b, s.Breakdown(2))
		}
	}
}

// TestRunRefuses: bad task graphs get one line naming the task.
func TestRunRefuses(t *testing.T) {
	for _, c := range []struct {
		tasks []Task
		err   string
	}{
		{[]Task{{Name: "a", Resource: 7}}, "task 0 (a): resource 7 out of range"},
		{[]Task{{Name: "a", Duration: -1}}, "task 0 (a): duration -1"},
		{[]Task{{Name: "a", Deps: []int{3}}}, "task 0 (a): dependency 3"},
		{[]Task{{Name: "a", Deps: []int{1}}, {Name: "b", Deps: []int{0}}}, "cycle"},
		// b waits on c, queued after it on the same device
		{[]Task{{Name: "b", Deps: []int{1}}, {Name: "c"}}, "cycle"},
	} {
		_, err := Run(context.Background(), twoDevices, c.tasks)
		if err == nil || !strings.Contains(err.Error(), c.err) {
			t.Errorf("%+v: %v, want %q", c.tasks, err, c.err)
		}
	}
}

// TestChromeTrace checks the trace against the Trace Event Format: an
// object with traceEvents; every event has name, ph, pid, tid, ts; "X"
// events a non-negative dur; "M" events name a process or thread; every
// thread with slices is named.
func TestChromeTrace(t *testing.T) {
	s, err := Run(context.Background(), twoDevices, []Task{{Name: "f", Duration: 1e-3}, {Name: "send", Category: Communication, Resource: 1, Duration: 2e-3, Deps: []int{0}}})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := WriteChromeTrace(&buf, s, "test"); err != nil {
		t.Fatal(err)
	}
	if err := CheckTrace(buf.Bytes()); err != nil {
		t.Error(err)
	}
	if !strings.Contains(buf.String(), "simulated") {
		t.Error("the trace does not say it is simulated")
	}
}

// BenchmarkRun: a chain-and-fan graph of a million tasks on 64 resources.
func BenchmarkRun(b *testing.B) {
	res := make([]Resource, 64)
	for i := range res {
		res[i] = Resource{Name: "r", Kind: ResourceKind(i % 2), Device: i / 2}
	}
	tasks := make([]Task, 1_000_000)
	for i := range tasks {
		tasks[i] = Task{Name: "t", Resource: i % 64, Duration: 1e-6}
		if i >= 64 {
			tasks[i].Deps = []int{i - 63}
		}
	}
	b.ResetTimer()
	for range b.N {
		if _, err := Run(context.Background(), res, tasks); err != nil {
			b.Fatal(err)
		}
	}
}
