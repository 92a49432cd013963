package plan

import (
	"context"
	"testing"
	"time"

	"rulebook/runtime"
	"rulebook/simulate"
	"rulebook/timing"

	"rulebook/internal/testfiles"
)

// BenchmarkSimulatedAgainstRun holds the simulator's single-device
// prediction against a real run (issue 15, item 2): each operator
// configuration of a shared model is timed alone on this CPU (what
// bench-ops stores), the simulator schedules the model's nodes with those
// costs on one device, and the whole model is run as 'rulebook run' does;
// both are medians, taken alternately. It reports the simulated and the
// measured milliseconds and their ratio.
//
//	go test ./plan -run '^$' -bench SimulatedAgainstRun -benchtime 1x
func BenchmarkSimulatedAgainstRun(b *testing.B) {
	for _, name := range []string{"squeezenet1_1", "resnet50", "inception_v3", "bert_base"} {
		b.Run(name, func(b *testing.B) {
			m, _, err := runtime.Load(testfiles.Shared(b, "models", name+".onnx"), runtime.LoadOptions{Weights: "auto", Seed: 1})
			if err != nil {
				b.Fatal(err)
			}
			e, err := m.Open(runtime.BackendCPU, 0)
			if err != nil {
				b.Fatal(err)
			}
			defer e.Close()
			ctx := context.Background()
			inputs := m.RandomInputs(1)
			for range b.N {
				simulated, err := simulateNodes(ctx, m, e)
				if err != nil {
					b.Fatal(err)
				}
				measured, err := timing.Repeat(ctx, 10, timing.Wall(func() error { _, err := e.Run(ctx, inputs); return err }))
				if err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(simulated*1e3, "simulated-ms")
				b.ReportMetric(timing.Milliseconds(measured), "measured-ms")
				b.ReportMetric(simulated/measured.Seconds(), "ratio")
			}
		})
	}
}

// simulateNodes times every configuration alone (median of 10) and
// simulates the nodes in order on one device.
func simulateNodes(ctx context.Context, m *runtime.Model, e runtime.Executor) (float64, error) {
	nodes := m.Nodes()
	configs := runtime.DistinctConfigs(nodes)
	times, err := runtime.TimeConfigs(ctx, e, configs, 10, nil)
	if err != nil {
		return 0, err
	}
	cost := map[string]time.Duration{}
	for i, c := range configs {
		cost[c.ConfigKey()] = times[i]
	}
	tasks := make([]simulate.Task, len(nodes))
	for i, n := range nodes {
		tasks[i] = simulate.Task{Name: n.Name, Duration: cost[n.ConfigKey()].Seconds()}
	}
	s, err := simulate.Run(ctx, []simulate.Resource{{Name: "cpu", Kind: simulate.Device}}, tasks)
	if err != nil {
		return 0, err
	}
	return s.Makespan, nil
}
