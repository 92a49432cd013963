package enumerate

import (
	"context"
	"testing"

	"rulebook/rules"
)

// BenchmarkGenerate measures the default generation at 2 and 3 operators;
// it reports graphs per second and bytes per fingerprint class.
func BenchmarkGenerate(b *testing.B) {
	for _, n := range []int{2, 3} {
		b.Run(map[int]string{2: "ops=2", 3: "ops=3"}[n], func(b *testing.B) {
			var res *Result
			for i := 0; i < b.N; i++ {
				var err error
				res, err = Generate(context.Background(), Config{Registry: rules.Default(), Pool: rules.DefaultPool(), MaxOps: n, Seed: 1})
				if err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(res.Stats.Graphs)*float64(b.N)/b.Elapsed().Seconds(), "graphs/s")
			b.ReportMetric(float64(len(res.Candidates)), "rules")
		})
	}
}

// BenchmarkGenerateParallel measures issue 14's parallel generation: the
// parallel set at degrees 2 and 3 up to three operators (about 3 s of CPU;
// go test ./enumerate -run - -bench GenerateParallel -benchtime 1x).
func BenchmarkGenerateParallel(b *testing.B) {
	var res *Result
	for i := 0; i < b.N; i++ {
		var err error
		res, err = Generate(context.Background(), Config{Registry: rules.Parallel(), Degrees: []int{2, 3}, MaxOps: 3, Seed: 1})
		if err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(res.Stats.Graphs)*float64(b.N)/b.Elapsed().Seconds(), "graphs/s")
	b.ReportMetric(float64(len(res.Candidates)), "rules")
	b.ReportMetric(float64(res.Stats.Generalised), "generalised")
}
