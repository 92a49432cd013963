package plan

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"rulebook/cluster"
	"rulebook/internal/testfiles"
	"rulebook/simulate"
	"rulebook/training"
)

func mlpGraph(t *testing.T, layers, width, batch int64) *training.Graph {
	t.Helper()
	g, err := training.FromONNX(training.MLP(training.MLPConfig{Layers: layers, Width: width}), "mlp", batch)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// tasksNamed are the schedule's tasks whose names start with prefix.
func tasksNamed(s *simulate.Schedule, prefix string) []simulate.Task {
	var out []simulate.Task
	for _, t := range s.Tasks {
		if strings.HasPrefix(t.Name, prefix) {
			out = append(out, t)
		}
	}
	return out
}

// TestGroupsPricedWhereTheyAre: on summit:2 (6 devices a node) the grid's
// dp3×tp4 has the tensor-parallel group {4,5,6,7} across both nodes; every
// tensor-parallel all-reduce is priced as that group's, on the network,
// not as device 0's group {0,1,2,3}. dp6×tp2's groups each sit inside a
// node and use the node's link.
func TestGroupsPricedWhereTheyAre(t *testing.T) {
	m, err := cluster.Parse("summit:2")
	if err != nil {
		t.Fatal(err)
	}
	g := mlpGraph(t, 4, 1536, 48)
	for _, c := range []struct {
		dp, tp  int
		slowest cluster.Group
		network bool
	}{
		{3, 4, cluster.Group{4, 5, 6, 7}, true},
		{6, 2, cluster.Group{0, 1}, false},
	} {
		s := Strategy{Kind: Grid, DP: c.dp, TP: c.tp, PP: 1, Microbatches: 1}
		// fp32, so that the activations' all-reduces carry OutputBytes
		r, err := Price(context.Background(), g, s, Options{Machine: m, Precision: cluster.FP32})
		if err != nil || r.Err != nil {
			t.Fatalf("%s: %v, %v", s, err, r.Err)
		}
		var priced int
		for _, task := range tasksNamed(r.Schedule, "all-reduce ") {
			name := strings.TrimPrefix(task.Name, "all-reduce ")
			op, ok := opNamed(g, name)
			if !ok {
				continue // gradient all-reduces: checked below by resource
			}
			want := m.AllReduce(c.slowest, op.OutputBytes/float64(c.dp))
			if task.Duration != want {
				t.Errorf("%s: %s takes %.4g s, want %.4g s, the all-reduce of group %v", s, task.Name, task.Duration, want, c.slowest)
			}
			if inside := m.AllReduce(cluster.Group{0, 1, 2, 3}, op.OutputBytes/float64(c.dp)); c.network && task.Duration <= inside {
				t.Errorf("%s: %s takes %.4g s, no more than device 0's group inside a node (%.4g s)", s, task.Name, task.Duration, inside)
			}
			if res := r.Schedule.Resources[task.Resource].Name; strings.Contains(res, "network") != c.network {
				t.Errorf("%s: %s runs on %q; want the network: %v", s, task.Name, res, c.network)
			}
			priced++
		}
		if priced == 0 {
			t.Errorf("%s: no tensor-parallel all-reduce in the step", s)
		}
	}
}

func opNamed(g *training.Graph, name string) (training.Op, bool) {
	for _, op := range g.Ops {
		if op.Name == name {
			return op, true
		}
	}
	return training.Op{}, false
}

// TestGradientBuckets: with no bucket every weight has its own
// data-parallel all-reduce; with DDP's 25 MiB the gradients share fewer
// all-reduces, each closed once it holds 25 MiB (the first at 1 MiB), the
// last one holding the rest; a bucket as large as the model gives two, the
// first bucket and the rest. The
// optimizer step waits for every bucket.
func TestGradientBuckets(t *testing.T) {
	m, _ := cluster.Parse("dgx-a100:2")
	g := mlpGraph(t, 8, 1536, 64)
	var weights int
	var total float64
	for _, op := range g.Ops {
		if op.ParamBytes > 0 {
			weights++
			total += op.ParamBytes
		}
	}
	s := Strategy{Kind: DataParallel, DP: 16, TP: 1, PP: 1, Microbatches: 1}
	for _, c := range []struct {
		bucket    float64
		min, most int
	}{
		{0, weights, weights},
		{DefaultBucketBytes, 2, int(total/DefaultBucketBytes) + 2},
		{1 << 40, 2, 2},
	} {
		r, err := Price(context.Background(), g, s, Options{Machine: m, BucketBytes: c.bucket})
		if err != nil || r.Err != nil {
			t.Fatalf("bucket %g: %v, %v", c.bucket, err, r.Err)
		}
		var buckets []int
		for i, task := range r.Schedule.Tasks {
			if strings.HasPrefix(task.Name, "all-reduce weight grads") {
				buckets = append(buckets, i)
			}
		}
		if n := len(buckets); n < c.min || n > c.most {
			t.Errorf("bucket %g bytes: %d gradient all-reduces for %d weights (%.1f MiB); want %d to %d", c.bucket, n, weights, total/(1<<20), c.min, c.most)
		}
		adam := tasksNamed(r.Schedule, "optimizer step")
		if len(adam) != 1 || !containsAll(adam[0].Deps, buckets) {
			t.Errorf("bucket %g bytes: the optimizer step does not wait for every bucket", c.bucket)
		}
	}
	if _, err := Price(context.Background(), g, s, Options{Machine: m, BucketBytes: -1}); err == nil {
		t.Error("a negative bucket is accepted")
	}
}

// TestPlanFileRecordsBucket: plan.json says which gradient bucket its
// times were priced with.
func TestPlanFileRecordsBucket(t *testing.T) {
	out := filepath.Join(t.TempDir(), "plan.json")
	if _, err := Run(context.Background(), Request{Model: "mlp", Machine: "h100:1x2", Batch: 64, BucketBytes: DefaultBucketBytes, Out: out}); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		BucketBytes float64 `json:"gradient_bucket_bytes"`
	}
	if err := json.Unmarshal(data, &f); err != nil || f.BucketBytes != DefaultBucketBytes {
		t.Errorf("plan.json: gradient_bucket_bytes %g, %v; want %d", f.BucketBytes, err, DefaultBucketBytes)
	}
}

func containsAll(have, want []int) bool {
	set := map[int]bool{}
	for _, h := range have {
		set[h] = true
	}
	for _, w := range want {
		if !set[w] {
			return false
		}
	}
	return true
}

// TestCNNsChooseDataParallel: ResNet-50 and Inception-v3 at 32 images per
// device choose data parallel on 2 to 16 nodes of summit and dgx-a100, as
// practice does (issue 27, Done-when 7). BENCHMARKS.md ("Collectives as
// NCCL runs them") has the whole table, 8 nodes included.
func TestCNNsChooseDataParallel(t *testing.T) {
	for _, c := range []struct {
		model   string
		nodes   []int
		presets []string
	}{
		{"resnet50", []int{2, 4, 16}, []string{"summit", "dgx-a100"}},
		{"inception_v3", []int{2, 4}, []string{"summit", "dgx-a100"}},
	} {
		path := testfiles.Shared(t, "models", c.model+".onnx")
		for _, preset := range c.presets {
			for _, n := range c.nodes {
				machine := fmt.Sprintf("%s:%d", preset, n)
				out, err := Run(context.Background(), Request{Model: path, Machine: machine, Batch: 32, PerDevice: true, BucketBytes: DefaultBucketBytes})
				if err != nil {
					t.Fatalf("%s on %s: %v", c.model, machine, err)
				}
				if s := out.Choice.Chosen.Strategy; s.TP != 1 || s.PP != 1 || !out.Choice.Fits {
					t.Errorf("%s on %s at 32 per device: chose %s, want data parallel", c.model, machine, s)
				}
			}
		}
	}
}
