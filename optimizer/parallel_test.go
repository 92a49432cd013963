package optimizer

import (
	"context"
	"testing"

	"rulebook/rules"
	"rulebook/version"
)

// TestParallelRulesLeaveModels: a version that also holds parallel rules
// (parsed with every operator the store knows) optimizes a model as its
// other rules alone do. No parallel rule matches an ONNX graph.
func TestParallelRulesLeaveModels(t *testing.T) {
	m, rt := halvedProducts(t, 64, 512, 4096)
	g, err := FromONNX(m, rt)
	if err != nil {
		t.Fatal(err)
	}
	plain := bundleRules(t, "(matmul (smul ?a ?b) ?c) => (matmul ?a (smul ?c ?b))")
	mixed := &version.Set{Tag: "test", Rules: plain.Rules, Texts: plain.Texts}
	for _, text := range []string{
		"(combine 0 2 (partition 0 2 ?a)) => ?a",
		"(combine 0 2 (relu ?a)) => (relu (combine 0 2 ?a))",
	} {
		r, err := rules.ParseRule(version.Registry(), text)
		if err != nil {
			t.Fatal(err)
		}
		mixed.Rules, mixed.Texts = append(mixed.Rules, r), append(mixed.Texts, text)
	}
	opt := DefaultOptions()
	opt.Budget = 20
	want, err := Optimize(context.Background(), g, plain, opt)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Optimize(context.Background(), g, mixed, opt)
	if err != nil {
		t.Fatal(err)
	}
	if got.After != want.After || got.After >= got.Before || len(got.Applied) != len(want.Applied) {
		t.Errorf("with parallel rules: cost %.4f -> %.4f, applied %v; without: %.4f, applied %v", got.Before, got.After, got.Applied, want.After, want.Applied)
	}
}
