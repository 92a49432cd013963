package rules_test

import (
	"math/rand/v2"
	"strings"
	"testing"

	"rulebook/rules"
)

// evalFloat evaluates a one-output graph text on the given inputs.
func evalFloat(t *testing.T, text string, in []*rules.FloatTensor) (*rules.FloatTensor, error) {
	t.Helper()
	g, err := rules.ParseGraph(rules.All(), text)
	if err != nil {
		t.Fatalf("parse %s: %v", text, err)
	}
	out, err := rules.Evaluate(g, rules.FloatKernelOf, in)
	if err != nil {
		return nil, err
	}
	return out[0], nil
}

func randomTensor(r *rand.Rand, shape string) *rules.FloatTensor {
	s, err := rules.ParseDims(shape)
	if err != nil {
		panic(err)
	}
	x := rules.NewTensor[float64](s)
	for i := range x.Data {
		x.Data[i] = r.Float64()*2 - 1
	}
	return x
}

// TestParallelValues checks the value semantics of docs/parallel.md: a
// parallel tensor's value is its pieces.
func TestParallelValues(t *testing.T) {
	cases := []struct {
		name     string
		inputs   []string
		src, dst string
		scale    float64 // src = scale × dst
	}{
		{"partition and combine are inverses", []string{"6x6"}, "(combine 1 2 (partition 1 2 ?a))", "?a", 1},
		{"partitions commute", []string{"6x6"}, "(partition 0 2 (partition 1 3 ?a))", "(partition 1 3 (partition 0 2 ?a))", 1},
		{"reduce adds partial sums and leaves copies", []string{"6x6+sum3"}, "(reduce 3 (replicate 2 ?a))", "(replicate 2 (reduce 3 ?a))", 1},
		{"reduce adds consecutive partial sums", []string{"6x6+sum2", "6x6+sum2"}, "(reduce 2 (ewadd ?a ?b))", "(ewadd (reduce 2 ?a) (reduce 2 ?b))", 1},
		{"a cut contraction gives partial sums", []string{"4x6", "6x4"}, "(reduce 2 (matmul (partition 1 2 ?a) (partition 0 2 ?b)))", "(matmul ?a ?b)", 1},
		{"row-parallel linear", []string{"2x4x6", "6x4"}, "(reduce 3 (linear none (partition 2 3 ?a) (partition 0 3 ?b)))", "(linear none ?a ?b)", 1},
		{"column-parallel linear (FlexFlow's rule 241)", []string{"2x4x6", "6x4"}, "(linear none (replicate 2 ?a) (partition 1 2 ?b))", "(partition 2 2 (linear none ?a ?b))", 1},
		{"data-parallel linear", []string{"2x4x6", "6x4"}, "(linear relu (partition 1 2 ?a) (replicate 2 ?b))", "(partition 1 2 (linear relu ?a ?b))", 1},
		{"relu commutes with partition", []string{"6x6"}, "(relu (partition 0 2 ?a))", "(partition 0 2 (relu ?a))", 1},
		{"data-parallel convolution", []string{"4x6x5x5", "8x6x3x3"}, "(conv2d 1 same relu 1 (partition 0 2 ?a) (replicate 2 ?b))", "(partition 0 2 (conv2d 1 same relu 1 ?a ?b))", 1},
		{"channel-parallel convolution", []string{"4x6x5x5", "8x6x3x3"}, "(conv2d 1 same relu 1 (replicate 2 ?a) (partition 0 2 ?b))", "(partition 1 2 (conv2d 1 same relu 1 ?a ?b))", 1},
		{"input-channel-parallel convolution", []string{"4x6x5x5", "8x6x3x3"}, "(reduce 3 (conv2d 1 same none 1 (partition 1 3 ?a) (partition 1 3 ?b)))", "(conv2d 1 same none 1 ?a ?b)", 1},
		{"average pool of partial sums", []string{"4x6x5x5", "8x6x3x3"}, "(reduce 2 (pool_avg 3 1 same (conv2d 1 same none 1 (partition 1 2 ?a) (partition 1 2 ?b))))", "(pool_avg 3 1 same (conv2d 1 same none 1 ?a ?b))", 1},
		{"ewadd of partial sums", []string{"4x6", "6x4"}, "(reduce 2 (ewadd (matmul (partition 1 2 ?a) (partition 0 2 ?b)) (matmul (partition 1 2 ?a) (partition 0 2 ?b))))", "(ewadd (matmul ?a ?b) (matmul ?a ?b))", 1},
	}
	r := rand.New(rand.NewPCG(1, 2))
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := make([]*rules.FloatTensor, len(c.inputs))
			for i, s := range c.inputs {
				in[i] = randomTensor(r, s)
			}
			a, err := evalFloat(t, c.src, in)
			if err != nil {
				t.Fatalf("source: %v", err)
			}
			b, err := evalFloat(t, c.dst, in)
			if err != nil {
				t.Fatalf("target: %v", err)
			}
			if !a.Shape.Equal(b.Shape) {
				t.Fatalf("layouts differ: %s against %s", a.Shape, b.Shape)
			}
			for i := range a.Data {
				if d := a.Data[i] - c.scale*b.Data[i]; d > 1e-9 || d < -1e-9 {
					t.Fatalf("piece element %d: %g against %g×%g", i, a.Data[i], c.scale, b.Data[i])
				}
			}
		})
	}
}

// TestParallelLayoutErrors checks that ill-laid-out inputs get a clear
// shape error.
func TestParallelLayoutErrors(t *testing.T) {
	cases := []struct {
		inputs []string
		graph  string
		want   string
	}{
		{[]string{"6x6"}, "(partition 0 4 ?a)", "degree 4 does not divide dimension 0"},
		{[]string{"4x6", "6x4"}, "(relu (matmul (partition 1 2 ?a) (partition 0 2 ?b)))", "partial sums; reduce them first"},
		{[]string{"6x6"}, "(concat 0 (partition 0 2 ?a) (partition 0 2 ?a))", "along axis 0, the operator's own axis"},
		{[]string{"6x6", "6x6"}, "(ewadd (partition 0 2 ?a) ?b)", "equal shapes"},
		{[]string{"6x6"}, "(reduce 2 ?a)", "degree 2 does not divide the 1 partial sums"},
		{[]string{"6x6"}, "(reduce 2 (replicate 2 ?a))", "degree 2 does not divide the 1 partial sums of 6x6+copy2"},
		{[]string{"6x6"}, "(combine 0 2 ?a)", "does not divide dimension 0's 1 pieces"},
		{[]string{"1x6x6x6", "6x6x3x3"}, "(conv2d 1 same none 1 (partition 1 2 ?a) ?b)", "input channels cut in 2 and 1 pieces"},
		{[]string{"6x6x3x3"}, "(enlarge 5 (partition 0 2 ?a))", "takes tensors on one device only"},
		{[]string{"4x6", "6x4"}, "(matmul (partition 1 2 ?a) ?b)", "contraction dimension cut in 2 and 1 pieces"},
		{[]string{"4x6", "6x4"}, "(linear none (partition 0 2 ?a) ?b)", "pieces do not pair up"},
	}
	r := rand.New(rand.NewPCG(1, 2))
	for _, c := range cases {
		t.Run(c.graph, func(t *testing.T) {
			in := make([]*rules.FloatTensor, len(c.inputs))
			for i, s := range c.inputs {
				in[i] = randomTensor(r, s)
			}
			_, err := evalFloat(t, c.graph, in)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want an error with %q", err, c.want)
			}
		})
	}
}

func TestParallelShapeText(t *testing.T) {
	for _, text := range []string{"6x6", "scalar", "12/2x6", "12/2x6/3+sum2+copy3", "4x4+copy2", "scalar+copy2"} {
		s, err := rules.ParseDims(text)
		if err != nil {
			t.Fatalf("%s: %v", text, err)
		}
		if s.String() != text {
			t.Errorf("%s came back as %s", text, s)
		}
	}
	for _, bad := range []string{"6/4x6", "6/0x6", "6x6+sum0", "6x6+twice2", "6/x6"} {
		if _, err := rules.ParseDims(bad); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
}

func TestDegreeVariable(t *testing.T) {
	reg := rules.All()
	r, err := rules.ParseRule(reg, "(combine 1 d (partition 1 d ?a)) => ?a")
	if err != nil {
		t.Fatal(err)
	}
	if !r.HasDegreeVar() {
		t.Fatal("no degree variable found")
	}
	rnd := rand.New(rand.NewPCG(3, 4))
	for _, d := range []int{2, 3, 4, 8} {
		at := r.WithDegree(d)
		if at.HasDegreeVar() {
			t.Fatalf("degree %d: variable left", d)
		}
		x := randomTensor(rnd, "24x24")
		out, err := rules.Evaluate(&at.Src, rules.FloatKernelOf, []*rules.FloatTensor{x})
		if err != nil {
			t.Fatalf("degree %d: %v", d, err)
		}
		if !out[0].Shape.Equal(x.Shape) {
			t.Fatalf("degree %d: %s", d, out[0].Shape)
		}
	}
	if _, err := rules.Evaluate(&r.Src, rules.FloatKernelOf, []*rules.FloatTensor{randomTensor(rnd, "24x24")}); err == nil || !strings.Contains(err.Error(), "degree variable d") {
		t.Fatalf("unsubstituted: %v", err)
	}
}
