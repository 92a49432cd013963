package enumerate_test

import (
	"context"
	"sync"
	"testing"

	"rulebook/enumerate"
	"rulebook/fingerprint"
	"rulebook/rules"
)

var (
	threeOnce sync.Once
	three     *enumerate.Result
	threeErr  error
)

// generateThree runs the default generation at ≤3 operators once per test
// binary; several tests read it.
func generateThree(t *testing.T) *enumerate.Result {
	t.Helper()
	if testing.Short() {
		t.Skip("generation at 3 operators takes several seconds; skipped with -short")
	}
	threeOnce.Do(func() {
		three, threeErr = enumerate.Generate(context.Background(), enumerate.Config{
			Registry: rules.Default(), Pool: rules.DefaultPool(), MaxOps: 3, Seed: 1,
		})
	})
	if threeErr != nil {
		t.Fatal(threeErr)
	}
	return three
}

func identity(t *testing.T, text string) string {
	t.Helper()
	r, err := rules.ParseRule(rules.Default(), text)
	if err != nil {
		t.Fatalf("parse %q: %v", text, err)
	}
	_, id := r.Oriented()
	return id.String()
}

// TestExpectedRules checks the rules issue 2 names are among the
// candidates, up to input naming and orientation. Where the rule has two
// natural forms (left or right distributivity, say) either counts.
func TestExpectedRules(t *testing.T) {
	res := generateThree(t)
	have := map[string]bool{}
	for _, c := range res.Candidates {
		have[c.Text.String()] = true
	}
	cases := []struct {
		name  string
		forms []string
	}{
		{"ewadd commutativity", []string{"(ewadd ?a ?b) => (ewadd ?b ?a)"}},
		{"ewmul commutativity", []string{"(ewmul ?a ?b) => (ewmul ?b ?a)"}},
		{"ewadd associativity", []string{"(ewadd (ewadd ?a ?b) ?c) => (ewadd ?a (ewadd ?b ?c))"}},
		{"ewmul associativity", []string{"(ewmul (ewmul ?a ?b) ?c) => (ewmul ?a (ewmul ?b ?c))"}},
		{"ewmul distributes over ewadd", []string{
			"(ewmul (ewadd ?a ?b) ?c) => (ewadd (ewmul ?a ?c) (ewmul ?b ?c))",
			"(ewmul ?c (ewadd ?a ?b)) => (ewadd (ewmul ?c ?a) (ewmul ?c ?b))"}},
		{"matmul associativity", []string{"(matmul (matmul ?a ?b) ?c) => (matmul ?a (matmul ?b ?c))"}},
		{"matmul linear over ewadd", []string{
			"(matmul ?a (ewadd ?b ?c)) => (ewadd (matmul ?a ?b) (matmul ?a ?c))",
			"(matmul (ewadd ?a ?b) ?c) => (ewadd (matmul ?a ?c) (matmul ?b ?c))"}},
		{"matmul linear over smul", []string{
			"(matmul ?a (smul ?b ?s)) => (smul (matmul ?a ?b) ?s)",
			"(matmul (smul ?a ?s) ?b) => (smul (matmul ?a ?b) ?s)"}},
		{"transpose is an involution", []string{"(transpose (transpose ?a)) => ?a"}},
		{"transpose of matmul", []string{"(transpose (matmul ?a ?b)) => (matmul (transpose ?b) (transpose ?a))"}},
		{"conv with relu activation", []string{"(conv2d 1 same relu 1 ?a ?b) => (relu (conv2d 1 same none 1 ?a ?b))"}},
		{"conv linear in its input", []string{"(conv2d 1 same none 1 (ewadd ?a ?b) ?k) => (ewadd (conv2d 1 same none 1 ?a ?k) (conv2d 1 same none 1 ?b ?k))"}},
		{"conv linear in its kernel", []string{"(conv2d 1 same none 1 ?a (ewadd ?k ?l)) => (ewadd (conv2d 1 same none 1 ?a ?k) (conv2d 1 same none 1 ?a ?l))"}},
		{"split of concat, axis 0", []string{"(let ((%0 (concat 0 ?a ?b))) (outputs (split0 0 %0) (split1 0 %0))) => (outputs ?a ?b)"}},
		{"split of concat, axis 1", []string{"(let ((%0 (concat 1 ?a ?b))) (outputs (split0 1 %0) (split1 1 %0))) => (outputs ?a ?b)"}},
		{"two matmuls sharing an input", []string{"(outputs (matmul ?x ?a) (matmul ?x ?b)) => (let ((%0 (matmul ?x (concat 1 ?a ?b)))) (outputs (split0 1 %0) (split1 1 %0)))"}},
		{"average pooling is a convolution", []string{"(pool_avg 3 1 same ?a) => (conv2d 1 same none dw ?a (C_pool 3))"}},
		{"matmul identity", []string{"(matmul ?a (I_matmul)) => ?a"}},
		{"ewmul identity", []string{"(ewmul ?a (I_ewmul)) => ?a", "(ewmul (I_ewmul) ?a) => ?a"}},
		{"conv identity", []string{"(conv2d 1 same none 1 ?a (I_conv 3)) => ?a"}},
		{"enlarge a kernel under same padding", []string{"(conv2d 1 same none 1 ?a ?k) => (conv2d 1 same none 1 ?a (enlarge 3 ?k))"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for _, f := range c.forms {
				if have[identity(t, f)] {
					return
				}
			}
			t.Errorf("none of these forms is a candidate: %q", c.forms)
		})
	}
}

// TestCandidatesHoldOnFreshInputs re-checks every candidate, from its stored
// text and shapes, on float64 inputs drawn from a new seed.
func TestCandidatesHoldOnFreshInputs(t *testing.T) {
	res := generateThree(t)
	fresh := fingerprint.Inputs{Seed: 0xF2E5}
	for _, c := range res.Candidates {
		r, err := rules.ParseRule(rules.Default(), c.Text.String())
		if err != nil {
			t.Fatalf("parse %s: %v", c.Text, err)
		}
		if err := r.SetShapes(c.Text.Inputs, c.Text.Constants); err != nil {
			t.Fatalf("%s: %v", c.Text, err)
		}
		for draw := uint64(0); draw < 64; draw++ {
			in := make([]*rules.FloatTensor, r.NumInputs)
			for i, s := range r.InputShapes {
				in[i] = fresh.Float(draw, i, s)
			}
			a, err := rules.Evaluate(&r.Src, rules.FloatKernelOf, in)
			if err != nil {
				t.Fatalf("%s: source: %v", c.Text, err)
			}
			b, err := rules.Evaluate(&r.Dst, rules.FloatKernelOf, in)
			if err != nil {
				t.Fatalf("%s: target: %v", c.Text, err)
			}
			for o := range a {
				if !enumerate.Close(a[o], b[o], 1e-6) {
					t.Errorf("false candidate %s (inputs %s): output %d differs on draw %d", c.Text, c.Text.Inputs, o, draw)
				}
			}
		}
	}
}

// TestCanonicalTextRoundTrips parses and re-prints every candidate.
func TestCanonicalTextRoundTrips(t *testing.T) {
	res := generateThree(t)
	for _, c := range res.Candidates {
		r, err := rules.ParseRule(rules.Default(), c.Text.String())
		if err != nil {
			t.Fatalf("parse %s: %v", c.Text, err)
		}
		if got := r.Format().String(); got != c.Text.String() {
			t.Errorf("round trip changed the rule:\n got  %s\n want %s", got, c.Text)
		}
		if _, id := r.Oriented(); id.String() != c.Text.String() {
			t.Errorf("orientation is not stable: %s -> %s", c.Text, id)
		}
	}
}

func TestTooManyInputClassesIsAnError(t *testing.T) {
	var pool rules.Pool
	for i := 0; i < 17; i++ {
		pool.Classes = append(pool.Classes, rules.InputClass{Name: "x", Shape: rules.NewShape(2, 4), Copies: 1, Role: rules.RoleData})
	}
	reg, _ := rules.Default().Select([]string{"ewadd"})
	if _, err := enumerate.Generate(context.Background(), enumerate.Config{Registry: reg, Pool: pool, MaxOps: 2}); err == nil {
		t.Error("a pool of 17 classes was accepted")
	}
}
