package progress

import "sync/atomic"

// Step is how far one stage of a long computation is.
type Step struct {
	Stage string
	// Level is the graph size, in stages that go size by size; else 0.
	Level       int
	Done, Total int64
}

// Func hears of steps, possibly from several goroutines at once. It is
// the one shape of progress callback in the module. A nil Func hears
// nothing, so callers need not check.
type Func func(Step)

// Report tells f of s, if f is not nil.
func (f Func) Report(s Step) {
	if f != nil {
		f(s)
	}
}

// Stage returns f with every step renamed to stage: a caller's name for
// work that it hands on. It is nil where f is.
func (f Func) Stage(stage string) Func {
	if f == nil {
		return nil
	}
	return func(s Step) {
		s.Stage = stage
		f(s)
	}
}

// Counter returns a function that counts one more item of total done in
// stage and tells f. Workers may call it concurrently.
func (f Func) Counter(stage string, total int) func() {
	var done atomic.Int64
	return func() {
		d := done.Add(1)
		f.Report(Step{Stage: stage, Done: d, Total: int64(total)})
	}
}
