package optimizer

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"rulebook/version"
)

// The released ≤3-operator rulebook, exported as a bundle: 'rulebook build
// --max-ops 3' in an empty folder, then 'rulebook export --version v1
// --format json'. Regenerate it so when the rulebook changes.
const bundle3Ops = "testdata/rules-3ops.json"

// TestOptimizeModels optimizes every shared model with the released
// rulebook under a small budget: the rewritten model must compute the same
// outputs as the original within 1e-4, and cost no more.
func TestOptimizeModels(t *testing.T) {
	rs, err := version.LoadBundle(bundle3Ops)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		model  string
		budget int
		// applies says whether the budget reaches a cheaper graph.
		applies bool
	}{
		{"squeezenet1_1.onnx", 20, false},
		{"resnet50.onnx", 5, false},
		{"inception_v3.onnx", 5, false},
		{"bert_base.onnx", 10, false},
	}
	for _, c := range cases {
		t.Run(c.model, func(t *testing.T) {
			m, rt := load(t, c.model)
			g, err := FromONNX(m, rt)
			if err != nil {
				t.Fatal(err)
			}
			opt := DefaultOptions()
			opt.Budget, opt.Timeout = c.budget, time.Minute
			res, err := Optimize(context.Background(), g, rs, opt)
			if err != nil {
				t.Fatal(err)
			}
			if res.After > res.Before || c.applies && (res.After == res.Before || len(res.Applied) == 0) {
				t.Errorf("cost %.3f -> %.3f ms with %d rules applied", res.Before, res.After, len(res.Applied))
			}
			_, rt2 := written(t, res.Graph)
			assertSameOutputs(t, rt, rt2)
		})
	}
}

// BenchmarkSearch times the search with the released rulebook on the
// shared models, 20 expansions a run, and reports graphs expanded a second
// (go test -run XXX -bench Search -benchtime 3x ./optimizer).
// RULEBOOK_SEARCH_MODELS, a comma-separated list of ONNX paths, searches
// those instead, e.g. torchvision's exports (scripts/export_torchvision.py),
// and RULEBOOK_SEARCH_RULES names another bundle (e.g.
// testdata/rules-3ops-1x1.json, as scripts/optimize_torchvision.py uses)
// and RULEBOOK_SEARCH_BUDGET another budget (300 is the default search's).
func BenchmarkSearch(b *testing.B) {
	bundle := bundle3Ops
	if path := os.Getenv("RULEBOOK_SEARCH_RULES"); path != "" {
		bundle = path
	}
	rs, err := version.LoadBundle(bundle)
	if err != nil {
		b.Fatal(err)
	}
	models := []string{"resnet50.onnx", "inception_v3.onnx", "bert_base.onnx"}
	if list := os.Getenv("RULEBOOK_SEARCH_MODELS"); list != "" {
		models = strings.Split(list, ",")
	}
	for _, model := range models {
		b.Run(model, func(b *testing.B) {
			m, rt := load(b, model)
			g, err := FromONNX(m, rt)
			if err != nil {
				b.Fatal(err)
			}
			opt := DefaultOptions()
			opt.Budget, opt.Timeout = 20, time.Hour
			if n, err := strconv.Atoi(os.Getenv("RULEBOOK_SEARCH_BUDGET")); err == nil {
				opt.Budget = n
			}
			b.ResetTimer()
			for range b.N {
				res, err := Optimize(context.Background(), g, rs, opt)
				if err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(float64(res.Explored)/res.Elapsed.Seconds(), "expanded/s")
				b.ReportMetric(float64(res.Generated)/res.Elapsed.Seconds(), "graphs/s")
			}
		})
	}
}
