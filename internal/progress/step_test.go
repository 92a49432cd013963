package progress

import (
	"slices"
	"sync"
	"testing"
)

// TestFunc checks that a nil Func hears nothing, that Stage renames every
// step, and that a Counter counts each item once from many goroutines.
func TestFunc(t *testing.T) {
	var nothing Func
	nothing.Report(Step{Stage: "x"})
	nothing.Stage("y").Report(Step{})
	nothing.Counter("z", 3)()

	var mu sync.Mutex
	var got []Step
	f := Func(func(s Step) {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, s)
	})
	f.Stage("verify").Report(Step{Stage: "check", Level: 2, Done: 1, Total: 4})
	if want := (Step{Stage: "verify", Level: 2, Done: 1, Total: 4}); len(got) != 1 || got[0] != want {
		t.Fatalf("Stage reported %v, want %v", got, want)
	}

	got = nil
	tick := f.Counter("compare", 50)
	var wg sync.WaitGroup
	for range 50 {
		wg.Add(1)
		go func() { defer wg.Done(); tick() }()
	}
	wg.Wait()
	var done []int64
	for _, s := range got {
		if s.Stage != "compare" || s.Total != 50 {
			t.Errorf("counter reported %+v", s)
		}
		done = append(done, s.Done)
	}
	slices.Sort(done)
	for i, d := range done {
		if d != int64(i+1) {
			t.Fatalf("counts %v, want 1 to 50 once each", done)
		}
	}
}
