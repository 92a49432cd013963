package plan

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"rulebook/cluster"
	"rulebook/onnx"
	"rulebook/profile"
	"rulebook/training"
)

func h200(t *testing.T) (cluster.Machine, *profile.Profile) {
	t.Helper()
	m, err := cluster.Parse("h200:1x1")
	if err != nil {
		t.Fatal(err)
	}
	p, err := profile.Builtin("h200-torch2.11-ops.csv")
	if err != nil {
		t.Fatal(err)
	}
	return m, p
}

func dp1() Strategy { return Strategy{Kind: DataParallel, DP: 1, TP: 1, PP: 1, Microbatches: 1} }

// TestOperatorSources: each operator is priced by an exact profile match
// where the profile measured its shape and precision (and then costs what
// was measured: the host's launch plus the device's rest), by a fit
// through its class's points where it did not, and by the roofline where
// the profile has nothing for the precision or there is no profile.
func TestOperatorSources(t *testing.T) {
	m, prof := h200(t)
	for _, c := range []struct {
		name  string
		width int64
		prec  cluster.Precision
		prof  *profile.Profile
		want  Source
	}{
		{"a measured shape", 1024, cluster.FP32, prof, FromProfile},
		{"a measured shape in bf16", 1024, cluster.BF16, prof, FromProfile},
		{"an unmeasured width", 1000, cluster.FP32, prof, FromFit},
		{"no fp16 points", 1024, cluster.FP16, prof, FromRoofline},
		{"no profile", 1024, cluster.BF16, nil, FromRoofline},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := mlpGraph(t, 2, c.width, 512)
			r, err := Price(context.Background(), g, dp1(), Options{Machine: m, Precision: c.prec, Profile: c.prof})
			if err != nil {
				t.Fatal(err)
			}
			gemm := r.Costs[0]
			if g.Ops[0].Type != "Gemm" || gemm.Source != c.want || gemm.Forward <= 0 || gemm.Backward <= 0 {
				t.Fatalf("%s: %+v, want source %s", g.Ops[0].Name, gemm, c.want)
			}
			if r.Optimizer.Source == "" || r.Optimizer.Forward <= 0 {
				t.Errorf("optimizer step %+v", r.Optimizer)
			}
			if c.want != FromProfile || c.prec != cluster.FP32 {
				return
			}
			e, ok := prof.Find(profile.Linear, profile.LinearShape(512, 1024, 1024), c.prec)
			if !ok || math.Abs(gemm.Forward+gemm.Launch-e.Forward()) > 1e-12 {
				t.Errorf("forward %g + launch %g, measured %g", gemm.Forward, gemm.Launch, e.Forward())
			}
		})
	}
}

// TestPrecisionMovesCompute: on an H100, bf16 mixed precision prices a
// compute-bound step faster than fp32 and saves activations in half the
// bytes, weights and optimizer state staying fp32; each device's default
// is its best 16-bit precision (fp16 on summit's V100s).
func TestPrecisionMovesCompute(t *testing.T) {
	m, err := cluster.Parse("h100:1x1")
	if err != nil {
		t.Fatal(err)
	}
	g := mlpGraph(t, 4, 4096, 1024)
	price := func(p cluster.Precision) *Result {
		r, err := Price(context.Background(), g, dp1(), Options{Machine: m, Precision: p})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	bf, fp := price(cluster.BF16), price(cluster.FP32)
	if bf.Time.Step*4 > fp.Time.Step {
		t.Errorf("bf16 step %g s, fp32 %g s: want bf16 at least 4× faster", bf.Time.Step, fp.Time.Step)
	}
	if bf.Memory.Weights != fp.Memory.Weights || bf.Memory.Optimizer != fp.Memory.Optimizer || math.Abs(2*bf.Memory.Activations-fp.Memory.Activations) > 1 {
		t.Errorf("bf16 memory %+v, fp32 %+v", bf.Memory, fp.Memory)
	}
	for name, want := range map[string]cluster.Precision{"summit": cluster.FP16, "h100": cluster.BF16, "dgx-a100": cluster.BF16, "h200": cluster.BF16, "cpu": cluster.BF16} {
		pm, _ := cluster.Preset(name, 1)
		if got := (Options{Machine: pm}).precision(); got != want {
			t.Errorf("%s: default precision %s, want %s", name, got, want)
		}
	}
}

// TestSmallMicrobatchesPayWeightReads: a pipeline's simulated step grows
// when its micro-batches shrink below the size where reading the weights
// dominates, since every micro-batch reads them again (with and without a
// profile).
func TestSmallMicrobatchesPayWeightReads(t *testing.T) {
	m, prof := h200(t)
	m.DevicesPerNode = 2
	g := mlpGraph(t, 8, 8192, 64)
	for _, p := range []*profile.Profile{nil, prof} {
		step := func(micro int) float64 {
			r, err := Price(context.Background(), g, Strategy{Kind: Pipeline, DP: 1, TP: 1, PP: 2, Microbatches: micro}, Options{Machine: m, Profile: p})
			if err != nil || r.Err != nil {
				t.Fatal(err, r.Err)
			}
			return r.Time.Step
		}
		big, small := step(2), step(32)
		if small <= 1.5*big {
			t.Errorf("profile %v: 32 micro-batches of 2 rows %g s, 2 of 32 rows %g s: want the small ones to cost more", p != nil, small, big)
		}
	}
}

// TestOptimizerFromProfile: Adam costs what the profile measured per
// parameter, foreach or fused.
func TestOptimizerFromProfile(t *testing.T) {
	m, prof := h200(t)
	g := mlpGraph(t, 2, 1024, 512)
	for _, c := range []struct {
		impl Optimizer
		kind profile.Kind
	}{{ForeachAdam, profile.AdamForeach}, {FusedAdam, profile.AdamFused}} {
		r, err := Price(context.Background(), g, dp1(), Options{Machine: m, Profile: prof, Optimizer: c.impl})
		if err != nil {
			t.Fatal(err)
		}
		e, _ := prof.Find(c.kind, profile.ParamsShape(c.kind, 100_000_000), cluster.FP32)
		want := e.Forward() * g.Params() / 1e8
		if r.Optimizer.Source != FromFit || math.Abs(r.Optimizer.Forward-want) > 1e-9 {
			t.Errorf("%s: %+v, want %g s", c.impl, r.Optimizer, want)
		}
	}
}

// TestH200PlanCitesItsProfile: the h200 preset prices from the shipped
// profile; the header and plan.json name it and the precision, and
// plan.json says per operator what priced it.
func TestH200PlanCitesItsProfile(t *testing.T) {
	dir := t.TempDir()
	model := filepath.Join(dir, "mlp.onnx")
	if err := os.WriteFile(model, onnx.EncodeModel(training.MLP(training.MLPConfig{Layers: 2, Width: 1024})), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "plan.json")
	res, err := Run(context.Background(), Request{Model: model, Machine: "h200:1x1", Batch: 512, Out: out})
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		CostModel string `json:"cost_model"`
		Precision string `json:"precision"`
		Operators []struct {
			Cost OpCost `json:"cost"`
		} `json:"operators"`
		Optimizer OpCost `json:"optimizer_step"`
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &f); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(f.CostModel, "h200-torch2.11-ops.csv") || !strings.Contains(f.CostModel, "bf16") || f.Precision != "bf16" {
		t.Errorf("cost model %q, precision %q", f.CostModel, f.Precision)
	}
	sources := map[Source]int{}
	for _, op := range f.Operators {
		sources[op.Cost.Source]++
	}
	if sources[FromProfile] == 0 || f.Optimizer.Source != FromFit {
		t.Errorf("sources %v, optimizer %+v", sources, f.Optimizer)
	}
	var explain strings.Builder
	if err := res.Choice.WriteExplain(&explain, res.Graph); err != nil || !strings.Contains(explain.String(), "profile") || !strings.Contains(explain.String(), "optimizer step") {
		t.Errorf("explain: %v\n%s", err, explain.String())
	}
}

// TestPrecisionRefused: a precision the device has no peak for, asked for
// or measured in the profile, is one line naming it (and the profile's
// file and line), and nothing is written.
func TestPrecisionRefused(t *testing.T) {
	dir := t.TempDir()
	bf16 := filepath.Join(dir, "bf16.csv")
	os.WriteFile(bf16, []byte(profile.Header+"\nlinear,512x1024->1024,fp32,0.05,0.1,1.074,8.389\nlinear,512x1024->1024,bf16,0.03,0.1,1.074,4.194\n"), 0o644)
	unknown := filepath.Join(dir, "unknown.csv")
	os.WriteFile(unknown, []byte(profile.Header+"\nmatmul,512x1024->1024,fp32,0.05,0.1,1.074,8.389\n"), 0o644)
	out := filepath.Join(dir, "plan.json")
	for _, c := range []struct {
		req     Request
		want    string
		noPeak  bool
		profile bool
	}{
		{Request{Model: "mlp", Machine: "summit:1", Batch: 12, Precision: "bf16"}, "the V100-SXM2-16GB has no bf16 peak", true, false},
		{Request{Model: "mlp", Machine: "summit:1", Batch: 12, Precision: "tf32"}, "has no tf32 peak", true, false},
		{Request{Model: "mlp", Machine: "summit:1", Batch: 12, Precision: "fp8"}, `unknown precision "fp8"`, false, false},
		{Request{Model: "mlp", Machine: "summit:1", Batch: 12, Profile: bf16}, "bf16.csv:3: precision bf16, which the V100-SXM2-16GB has no peak for", false, true},
		{Request{Model: "mlp", Machine: "h100:1", Batch: 12, Profile: unknown}, `unknown.csv:2: unknown operator "matmul"`, false, true},
	} {
		c.req.Out = out
		_, err := Run(context.Background(), c.req)
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%+v: %v, want one line with %q", c.req, err, c.want)
		}
		if _, ok := errors.AsType[*profile.Error](err); ok != c.profile {
			t.Errorf("%v: a profile error %v, want %v", err, ok, c.profile)
		}
		if errors.Is(err, cluster.ErrNoPeak) != c.noPeak {
			t.Errorf("%v: ErrNoPeak %v, want %v", err, !c.noPeak, c.noPeak)
		}
		if entries, _ := filepath.Glob(filepath.Join(dir, "plan*")); len(entries) > 0 {
			t.Errorf("%+v wrote %v", c.req, entries)
		}
	}
}

// TestFitBetweenMeasuredPoints: a linear layer the profile did not
// measure is priced between the measured shapes of the same weight
// around it, in every precision the profile has.
func TestFitBetweenMeasuredPoints(t *testing.T) {
	m, prof := h200(t)
	for _, prec := range []cluster.Precision{cluster.FP32, cluster.TF32, cluster.BF16} {
		for _, c := range []struct{ tokens, lo, hi int64 }{{1024, 512, 2048}, {4096, 2048, 8192}, {12288, 8192, 16384}} {
			g := mlpGraph(t, 2, 8192, c.tokens)
			r, err := Price(context.Background(), g, dp1(), Options{Machine: m, Precision: prec, Profile: prof})
			if err != nil {
				t.Fatal(err)
			}
			lo, _ := prof.Find(profile.Linear, profile.LinearShape(c.lo, 8192, 8192), prec)
			hi, _ := prof.Find(profile.Linear, profile.LinearShape(c.hi, 8192, 8192), prec)
			got := r.Costs[0].Forward + r.Costs[0].Launch
			if r.Costs[0].Source != FromFit || got < lo.Forward() || got > hi.Forward() {
				t.Errorf("%s, %d tokens: %s %g s, want between %g and %g", prec, c.tokens, r.Costs[0].Source, got, lo.Forward(), hi.Forward())
			}
		}
	}
}

// TestHostRunsAhead: with a profile, the host launches each kernel ahead
// of the device, so a step of tiny operators takes about their launches,
// not their launches and device times in turn.
func TestHostRunsAhead(t *testing.T) {
	m, prof := h200(t)
	g := mlpGraph(t, 16, 64, 8)
	r, err := Price(context.Background(), g, dp1(), Options{Machine: m, Profile: prof})
	if err != nil {
		t.Fatal(err)
	}
	var launches, serial float64
	for _, c := range r.Costs {
		launches += c.Launch + c.BackwardLaunch + c.CastLaunch
		serial += c.Launch + c.BackwardLaunch + c.CastLaunch + c.Forward + c.Backward + c.Cast
	}
	serial += r.Optimizer.Forward
	if r.Time.Step < launches || r.Time.Step >= serial {
		t.Errorf("step %g s, launches %g s, launch and device in turn %g s", r.Time.Step, launches, serial)
	}
}

// TestAutocastWeightCopies: in 16 bits, memory counts autocast's copy of
// every weight a product reads (2 bytes a parameter), sharded as the
// weights are; fp32 and tf32 keep none.
func TestAutocastWeightCopies(t *testing.T) {
	g := smallEncoder(t)
	var products float64
	for _, op := range g.Ops {
		if op.Product != nil {
			products += op.ParamBytes
		}
	}
	for _, c := range []struct {
		precision cluster.Precision
		s         Strategy
		want      func(copies float64) bool
	}{
		{cluster.FP32, dp1(), func(x float64) bool { return x == 0 }},
		{cluster.TF32, dp1(), func(x float64) bool { return x == 0 }},
		{cluster.BF16, dp1(), func(x float64) bool { return x == products/2 }},
		// tensor parallelism cuts every product of the encoder in two
		{cluster.BF16, Strategy{Kind: TensorParallel, DP: 1, TP: 2, PP: 1, Microbatches: 1}, func(x float64) bool { return x == products/4 }},
		// ZeRO-3 over 4: a quarter, and the block gathered whole
		{cluster.BF16, Strategy{Kind: DataParallel, DP: 4, TP: 1, PP: 1, Microbatches: 1, ZeRO: 3}, func(x float64) bool { return x > products/8 && x < products/2 }},
	} {
		m, err := cluster.Parse(fmt.Sprintf("h100:1x%d", c.s.DP*c.s.TP))
		if err != nil {
			t.Fatal(err)
		}
		r, err := Price(context.Background(), g, c.s, Options{Machine: m, Precision: c.precision})
		if err != nil {
			t.Fatalf("%s %s: %v", c.precision, layoutText(c.s), err)
		}
		if r.Err != nil {
			t.Fatalf("%s %s: %v", c.precision, layoutText(c.s), r.Err)
		}
		if !c.want(r.Memory.CastCopies) {
			t.Errorf("%s %s: autocast copies %g bytes, products' weights %g", c.precision, layoutText(c.s), r.Memory.CastCopies, products)
		}
	}
}
