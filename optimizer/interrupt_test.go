package optimizer

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"rulebook/internal/testfiles"
	"rulebook/onnx"
	"rulebook/rules"
	"rulebook/runtime"
	"rulebook/version"
)

// twoProductsModel writes x·w1 + x·w2 with 128×128 weights inline, which
// distributivity turns into one product: a gain measured costs see.
func twoProductsModel(t *testing.T, dir string) string {
	t.Helper()
	m, _ := tinyModel(t, []int{64, 128}, map[string][]int{"w1": {128, 128}, "w2": {128, 128}}, []string{"y"},
		&onnx.Node{Name: "p1", OpType: "MatMul", Inputs: []string{"x", "w1"}, Outputs: []string{"p1"}},
		&onnx.Node{Name: "p2", OpType: "MatMul", Inputs: []string{"x", "w2"}, Outputs: []string{"p2"}},
		&onnx.Node{Name: "sum", OpType: "Add", Inputs: []string{"p1", "p2"}, Outputs: []string{"y"}})
	path := filepath.Join(dir, "two.onnx")
	if err := onnx.WriteModel(path, m); err != nil {
		t.Fatal(err)
	}
	return path
}

// Cancelling the context in each phase of a Job (Ctrl-C) stops it within
// 2 s: it writes the best graph found so far, which loads, and its
// report, and returns an *InterruptedError that names the phase and
// unwraps to the cancellation. A measured gain interrupted before it was
// timed again is not kept.
func TestInterruptEveryPhase(t *testing.T) {
	bundle, err := version.LoadBundle(bundle3Ops)
	if err != nil {
		t.Fatal(err)
	}
	text, err := rules.ParseText(rules.Default(), "(ewadd (matmul ?a ?b) (matmul ?a ?c)) => (matmul ?a (ewadd ?b ?c))", "?a:2x4 ?b:4x4 ?c:4x4", "")
	if err != nil {
		t.Fatal(err)
	}
	distributivity := &version.Set{Tag: "test", Rules: []*rules.Rule{text.Rule()}, Texts: []string{text.String()}, RuleHashes: []string{"h"}}
	squeezenet := testfiles.Shared(t, "models", "squeezenet1_1.onnx")
	cases := []struct {
		phase    string
		model    string
		rules    *version.Set
		measured bool
		compare  int
	}{
		{PhaseSearch, squeezenet, bundle, false, 0},
		{PhaseConfirmation, "", distributivity, true, 0},
		{PhaseComparison, squeezenet, bundle, false, 100000},
		{PhaseWriting, squeezenet, bundle, false, 0},
	}
	for _, c := range cases {
		t.Run(c.phase, func(t *testing.T) {
			dir := t.TempDir()
			if c.model == "" {
				c.model = twoProductsModel(t, dir)
			}
			rt, g, _, err := LoadModel(c.model, runtime.LoadOptions{Seed: 1})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var cancelled time.Time
			interrupt := func() {
				if cancelled.IsZero() {
					cancelled = time.Now()
					cancel()
				}
			}
			opt := DefaultOptions()
			opt.Budget = 50
			opt.Phase = func(phase string) {
				if phase == c.phase && phase != PhaseSearch {
					interrupt()
				}
			}
			if c.phase == PhaseSearch {
				opt.Progress = func(p Progress) { // in the middle of the search
					if p.Explored >= 2 {
						interrupt()
					}
				}
			}
			if c.measured {
				opt.Cost = NewCostCache(nil, runtime.CPUDevice(1), 0).Measured(ctx, runtime.BackendCPU, 1)
				opt.MinGain = 0.005
			}
			job := Job{Path: c.model, Runtime: rt, Graph: g, Rules: c.rules, Options: opt, CostModel: "analytic", Compare: c.compare, Threads: 1,
				Output: filepath.Join(dir, "out.onnx"), Report: filepath.Join(dir, "out.json")}
			rep, err := job.Run(ctx)
			if cancelled.IsZero() {
				t.Fatalf("the %s phase never began (err %v)", c.phase, err)
			}
			if took := time.Since(cancelled); took > 2*time.Second {
				t.Errorf("took %s to stop after the cancellation, want at most 2 s", took.Round(time.Millisecond))
			}
			var ie *InterruptedError
			if !errors.As(err, &ie) || ie.Phase != c.phase || !errors.Is(err, context.Canceled) || rep == nil {
				t.Fatalf("err %v (report %v), want an interruption during the %s", err, rep != nil, c.phase)
			}
			if _, _, err := runtime.Load(job.Output, runtime.LoadOptions{Seed: 1}); err != nil {
				t.Errorf("the written model does not load: %v", err)
			}
			var written Report
			data, err := os.ReadFile(job.Report)
			if err == nil {
				err = json.Unmarshal(data, &written)
			}
			if err != nil {
				t.Fatalf("the report: %v", err)
			}
			switch c.phase {
			case PhaseSearch:
				if written.Search.Stopped != Interrupted || written.Search.Explored < 2 {
					t.Errorf("search stopped %s after %d graphs, want interrupted after 2", written.Search.Stopped, written.Search.Explored)
				}
			case PhaseConfirmation:
				if c := written.Confirmed; c == nil || c.Held || c.Error != ErrConfirmationInterrupted.Error() || len(written.Applied) != 0 {
					t.Errorf("confirmation %+v, applied %v: want the gain interrupted and not kept", c, written.Applied)
				}
			case PhaseComparison:
				if written.Measured != nil {
					t.Errorf("an interrupted comparison reported %+v", written.Measured)
				}
			}
		})
	}
}
