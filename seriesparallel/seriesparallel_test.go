package seriesparallel_test

import (
	"math/rand/v2"
	"slices"
	"testing"

	"rulebook/internal/testfiles"
	"rulebook/onnx"
	"rulebook/seriesparallel"
	"rulebook/training"
)

// TestShapes: the trees of small graphs, written out.
func TestShapes(t *testing.T) {
	for _, c := range []struct {
		name  string
		n     int
		edges [][2]int
		want  string
	}{
		{"one operator", 1, nil, "0"},
		{"a chain", 3, [][2]int{{0, 1}, {1, 2}}, "S(0 1 2)"},
		{"two strands", 4, [][2]int{{0, 1}, {2, 3}}, "P(S(0 1) S(2 3))"},
		// a residual block: x, f(x), x + f(x)
		{"a residual", 3, [][2]int{{0, 1}, {0, 2}, {1, 2}}, "S(0 1 2)"},
		// ResNeXt's module: a split into strands joined by an add
		{"a diamond", 5, [][2]int{{0, 1}, {0, 2}, {1, 3}, {2, 3}, {3, 4}}, "S(0 P(1 2) 3 4)"},
		// attention: q = 1, k = 2, v = 3 from x = 0; scores 4 = q·kᵀ;
		// softmax 5; out 6 = softmax · v: v is a strand beside the scores
		{"attention", 7, [][2]int{{0, 1}, {0, 2}, {0, 3}, {1, 4}, {2, 4}, {4, 5}, {5, 6}, {3, 6}}, "S(0 P(S(P(1 2) 4 5) 3) 6)"},
		// a diamond whose left strand also skips past the join: neither
		// split exists inside 1…3, so it is cut where one tensor crosses
		{"not series-parallel", 5, [][2]int{{0, 1}, {0, 2}, {1, 3}, {2, 3}, {3, 4}, {1, 4}}, "S(0 C(1 S(2 3)) 4)"},
	} {
		tr, err := seriesparallel.Decompose(c.n, c.edges)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got := tr.String(); got != c.want {
			t.Errorf("%s: %s, want %s", c.name, got, c.want)
		}
		check(t, c.name, tr, c.n, c.edges)
	}
}

// TestBadGraphs: edges out of range or against the order are refused.
func TestBadGraphs(t *testing.T) {
	for _, c := range []struct {
		n     int
		edges [][2]int
	}{
		{0, nil},
		{2, [][2]int{{0, 2}}},
		{2, [][2]int{{-1, 1}}},
		{2, [][2]int{{1, 0}}},
		{2, [][2]int{{1, 1}}},
	} {
		if _, err := seriesparallel.Decompose(c.n, c.edges); err == nil {
			t.Errorf("%d operators, edges %v: accepted", c.n, c.edges)
		}
	}
}

// TestModels: the built-in workloads and the shared models decompose, each
// operator once, with every split's invariant holding.
func TestModels(t *testing.T) {
	graphs := map[string]*onnx.Model{}
	for _, name := range training.BuiltinNames() {
		m, err := training.Builtin(name)
		if err != nil {
			t.Fatal(err)
		}
		graphs[name] = m
	}
	for _, name := range []string{"resnet50", "inception_v3", "bert_base"} {
		m, err := onnx.ReadModel(testfiles.Shared(t, "models", name+".onnx"))
		if err != nil {
			t.Fatal(err)
		}
		graphs[name] = m
	}
	for name, m := range graphs {
		g, err := training.FromONNX(m, name, 8)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		tr, err := seriesparallel.Decompose(len(g.Ops), g.Edges())
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		check(t, name, tr, len(g.Ops), g.Edges())
		t.Logf("%s: %d operators, %d series, %d parallel, %d cuts (widest %d)", name, len(g.Ops),
			tr.Count(seriesparallel.Series), tr.Count(seriesparallel.Parallel), tr.Count(seriesparallel.Cut), widest(tr))
	}
}

// FuzzDecompose: any acyclic graph decomposes with every invariant holding.
func FuzzDecompose(f *testing.F) {
	f.Add(uint64(1), uint8(6), uint8(30))
	f.Add(uint64(7), uint8(40), uint8(8))
	f.Fuzz(func(t *testing.T, seed uint64, size, density uint8) {
		n := 1 + int(size)%80
		r := rand.New(rand.NewPCG(seed, 0))
		var edges [][2]int
		for j := 1; j < n; j++ {
			for i := 0; i < j; i++ {
				if r.IntN(100) < int(density)%60 {
					edges = append(edges, [2]int{i, j})
				}
			}
		}
		tr, err := seriesparallel.Decompose(n, edges)
		if err != nil {
			t.Fatal(err)
		}
		check(t, "fuzzed", tr, n, edges)
	})
}

// check holds the tree to its definition: each operator once; a series'
// parts joined only part to next part; a parallel's parts not at all; a
// cut's second part never feeding its first.
func check(t *testing.T, name string, tr *seriesparallel.Tree, n int, edges [][2]int) {
	t.Helper()
	nodes := tr.Nodes()
	slices.Sort(nodes)
	if len(nodes) != n || (n > 0 && (nodes[0] != 0 || nodes[n-1] != n-1 || len(slices.Compact(slices.Clone(nodes))) != n)) {
		t.Fatalf("%s: the tree holds %v, want each of 0…%d once", name, nodes, n-1)
	}
	var walk func(*seriesparallel.Tree)
	walk = func(s *seriesparallel.Tree) {
		part := map[int]int{}
		for i, p := range s.Parts {
			for _, v := range p.Nodes() {
				part[v] = i
			}
		}
		first, last := len(s.Parts), -1 // the first and last pivots
		for i, p := range s.Parts {
			if p.Pivot {
				first, last = min(first, i), i
			}
		}
		pivotBetween := func(a, b int) bool {
			for i := a + 1; i < b; i++ {
				if s.Parts[i].Pivot {
					return true
				}
			}
			return false
		}
		for _, e := range edges {
			a, aok := part[e[0]]
			b, bok := part[e[1]]
			bad := false
			switch {
			case aok && bok && a == b:
				continue
			case aok && bok && s.Kind == seriesparallel.Series:
				bad = pivotBetween(a, b)
			case aok && bok && s.Kind == seriesparallel.Parallel:
				bad = true
			case aok && bok && s.Kind == seriesparallel.Cut:
				bad = b < a
			case aok && !bok && s.Kind == seriesparallel.Series:
				bad = a < last // read outside before the last pivot
			case !aok && bok && s.Kind == seriesparallel.Series:
				bad = b > first // reading from outside after the first pivot
			}
			if bad {
				t.Errorf("%s: %s %s: edge %d→%d crosses a pivot", name, s.Kind, s, e[0], e[1])
			}
		}
		if s.Kind != seriesparallel.Leaf && len(s.Parts) < 2 {
			t.Errorf("%s: %s has %d parts", name, s.Kind, len(s.Parts))
		}
		for _, p := range s.Parts {
			walk(p)
		}
	}
	walk(tr)
}

func widest(tr *seriesparallel.Tree) int {
	w := tr.Crossing
	for _, p := range tr.Parts {
		w = max(w, widest(p))
	}
	return w
}
