package runtime

import (
	"context"
	"fmt"
	goruntime "runtime"
	"strings"
	"testing"
)

// benchModels are the shared models benchmarked at batch 1 (bert_base at
// sequence length 64, as exported).
var benchModels = []string{"resnet50", "inception_v3", "squeezenet1_1", "bert_base"}

func BenchmarkModel(b *testing.B) {
	for _, name := range benchModels {
		b.Run(name, func(b *testing.B) {
			m, _, err := Load(sharedModel(b, name+".onnx"), LoadOptions{Seed: 1})
			if err != nil {
				b.Fatal(err)
			}
			s, err := m.NewSession(SessionOptions{})
			if err != nil {
				b.Fatal(err)
			}
			inputs := m.RandomInputs(1)
			ctx := context.Background()
			if _, err := s.Run(ctx, inputs); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := s.Run(ctx, inputs); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/op")
		})
	}
}

// BenchmarkSgemm times the tiled product on shapes from the models:
// M×N×K as convolutions (filters × positions × taps) and bert's layers.
func BenchmarkSgemm(b *testing.B) {
	w := newWorkers(goruntime.GOMAXPROCS(0))
	defer w.stop()
	for _, s := range [][3]int{{64, 3136, 576}, {256, 784, 1152}, {512, 196, 4608}, {2048, 49, 512}, {64, 768, 768}, {64, 3072, 768}, {1, 1000, 2048}} {
		m, n, k := s[0], s[1], s[2]
		b.Run(fmt.Sprintf("%dx%dx%d", m, n, k), func(b *testing.B) {
			a, bb, c := randomTensor(1, m, k), randomTensor(2, k, n), NewTensor(m, n)
			g := newGemmCall()
			for b.Loop() {
				g.set(false, false, m, n, k, 1, a.Data, bb.Data, 0, c.Data)
				g.run(w)
			}
			b.ReportMetric(2*float64(m*n*k)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOPS")
		})
	}
}

// TestRunAllocations: a Run allocates the returned map and output tensors
// only; everything else was planned by NewSession.
func TestRunAllocations(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a model repeatedly")
	}
	for _, name := range []string{"squeezenet1_1-full", "bert_base"} {
		t.Run(name, func(t *testing.T) {
			m, _, err := Load(sharedModel(t, name+".onnx"), LoadOptions{})
			if err != nil {
				t.Fatal(err)
			}
			s, err := m.NewSession(SessionOptions{})
			if err != nil {
				t.Fatal(err)
			}
			inputs := m.RandomInputs(1)
			ctx := context.Background()
			// Over 20 runs, so that the Go runtime's own occasional
			// allocation averages out (AllocsPerRun truncates): a memory
			// profile of 60 bert_base runs showed one, in
			// sync.runtime_SemacquireWaitGroup under the GEMM's WaitGroup.
			allocs := testing.AllocsPerRun(20, func() {
				if _, err := s.Run(ctx, inputs); err != nil {
					t.Fatal(err)
				}
			})
			// The map (header and one group), and per output the Tensor,
			// its Shape and its Data.
			limit := float64(2 + 3*len(m.Outputs()))
			t.Logf("%s: %.0f allocations per Run (limit %.0f)", name, allocs, limit)
			if allocs > limit {
				t.Errorf("%.0f allocations per Run, want at most %.0f", allocs, limit)
			}
		})
	}
}

// TestTimeNode times every node kind of squeezenet once.
func TestTimeNode(t *testing.T) {
	m, _, err := Load(sharedModel(t, "squeezenet1_1.onnx"), LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s, err := m.NewSession(SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	var lines []string
	for _, n := range m.Nodes() {
		if seen[n.Op] {
			continue
		}
		seen[n.Op] = true
		d, err := s.TimeNode(context.Background(), n.Index, 3)
		if err != nil {
			t.Fatal(err)
		}
		if d <= 0 {
			t.Errorf("node %d (%s) took %v", n.Index, n.Op, d)
		}
		lines = append(lines, fmt.Sprintf("%s %v %s: %v", n.Op, n.Inputs[0], n.Params, d))
	}
	t.Log("\n" + strings.Join(lines, "\n"))
}
