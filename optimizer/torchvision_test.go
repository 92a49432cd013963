package optimizer

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"rulebook/internal/testfiles"
	"rulebook/onnx"
	"rulebook/runtime"
	"rulebook/version"
)

// TestOptimizeTorchvision optimizes PyTorch's exports of torchvision
// classifiers (scripts/export_torchvision.py, random weights) with the
// released rulebook: every rewritten model computes the original's
// outputs within 1e-4, and every opaque node has its reason counted.
func TestOptimizeTorchvision(t *testing.T) {
	if testing.Short() {
		t.Skip("exports seven models with PyTorch")
	}
	dir := testfiles.ExportTorchvision(t, testfiles.SmallTorchvision...)
	rs, err := version.LoadBundle(bundle3Ops)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range testfiles.SmallTorchvision {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(dir, name, "model.onnx")
			m, err := onnx.ReadModel(path)
			if err != nil {
				t.Fatal(err)
			}
			rt, _, err := runtime.Load(path, runtime.LoadOptions{Weights: runtime.WeightsFile})
			if err != nil {
				t.Fatal(err)
			}
			g, err := FromONNX(m, rt)
			if err != nil {
				t.Fatal(err)
			}
			opt := DefaultOptions()
			opt.Budget, opt.Timeout = 30, time.Minute
			res, err := Optimize(context.Background(), g, rs, opt)
			if err != nil {
				t.Fatal(err)
			}
			if res.After > res.Before {
				t.Errorf("cost %.3f -> %.3f", res.Before, res.After)
			}
			_, rt2 := written(t, res.Graph)
			assertSameOutputs(t, rt, rt2)
			share := g.OpaqueShare()
			t.Logf("%d of %d nodes opaque (%d refused, uncovered %v); cost %.3f -> %.3f, %d expanded in %s",
				share.Opaque, share.Nodes, share.Refused, share.UncoveredOperators, res.Before, res.After, res.Explored, res.Elapsed.Round(time.Millisecond))
		})
	}
}
