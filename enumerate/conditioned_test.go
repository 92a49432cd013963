package enumerate

import (
	"context"
	"strings"
	"testing"

	"rulebook/rules"
)

// TestGeneratesConditionedRules: enumerating again with 1×1 kernels finds
// pooling after a 1×1 convolution instead of before it, conditioned on the
// kernel; max pooling, which does not commute with a linear map, yields no
// such rule, and every conditioned rule fails without its condition.
func TestGeneratesConditionedRules(t *testing.T) {
	cfg := Config{Registry: rules.Default(), Pool: rules.DefaultPool(), MaxOps: 2, Seed: 1, Workers: 2, Tolerance: 1e-5}
	cfg.ConditionKernels = [][2]int{{1, 1}}
	res, err := Generate(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	const want = "(conv2d 1 same none 1 (pool_avg 3 1 same ?a) ?b) => (pool_avg 3 1 same (conv2d 1 same none 1 ?a ?b)) if (kernel ?b 1 1)"
	found, conditioned := false, 0
	for _, c := range res.Candidates {
		text := c.Text.String()
		if c.Text.Cond == "" {
			continue
		}
		conditioned++
		found = found || text == want
		if strings.Contains(text, "pool_max") && strings.Contains(text, "conv2d") && !strings.Contains(text, "relu") {
			t.Errorf("max pooling commuted with a convolution: %s", text)
		}
		if !c.Rule.Conditional() || !c.Rule.Holds(c.Rule.InputShapes) {
			t.Errorf("%s: conditions %v do not hold at its shapes %s", text, c.Rule.Conds, c.Text.Inputs)
		}
	}
	t.Logf("%d candidates, %d conditioned", len(res.Candidates), conditioned)
	if !found {
		t.Errorf("%s not among the %d conditioned candidates", want, conditioned)
	}
}
