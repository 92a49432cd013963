package optimizer

import (
	"testing"

	"rulebook/rewrite"
)

// The key, type check and cost that neighbours derives from what a rewrite
// changed are those of the neighbour built by Apply and priced whole, bit
// for bit, on every neighbour of each shared model's graph under the
// released rulebook, and of two of its neighbours' neighbours (whose
// nodes are all live, unlike a mapped model's).
func TestNeighboursMatchBuiltGraphs(t *testing.T) {
	rs, err := LoadBundle(bundle3Ops)
	if err != nil {
		t.Fatal(err)
	}
	vs, rws, _ := rs.variants()
	for _, model := range []string{"squeezenet1_1.onnx", "resnet50.onnx", "inception_v3.onnx", "bert_base.onnx"} {
		t.Run(model, func(t *testing.T) {
			m, rt := load(t, model)
			g, err := FromONNX(m, rt)
			if err != nil {
				t.Fatal(err)
			}
			children := checkNeighbours(t, g, vs, rws, 2)
			for _, c := range children {
				checkNeighbours(t, c, vs, rws, 0)
			}
		})
	}
}

// checkNeighbours compares every neighbour of g as neighbours evaluates it
// with the built one, and returns up to keep neighbours that type-check.
func checkNeighbours(t *testing.T, g *Graph, vs []variant, rws []rewrite.Rewrite, keep int) []*Graph {
	t.Helper()
	cost := DefaultCPU()
	nb := newNeighbours(g, cost)
	var kept []*Graph
	checked, priced := 0, 0
	rewrite.Matches(&g.G, rws, func(rw *rewrite.Rewrite, m *rewrite.Match) bool {
		defer nb.undo()
		if !g.fitsRanks(&vs[rw.Rule], m) {
			return true
		}
		key, ok := nb.apply(rw, m)
		next, err := rewrite.Apply(&g.G, rw.From, rw.To, m)
		if ok != (err == nil) {
			t.Fatalf("rule %d: applied in place %v, Apply's error %v", rw.Rule, ok, err)
		}
		if !ok {
			return true
		}
		checked++
		if want := rewrite.CommutativeKey(next); key != want {
			t.Fatalf("rule %d: key %x, built graph's %x", rw.Rule, key, want)
		}
		built := g.with(next)
		inferErr := built.Infer()
		got, ok := nb.price()
		if ok != (inferErr == nil) {
			t.Fatalf("rule %d: type-checks in place %v, built graph's error %v", rw.Rule, ok, inferErr)
		}
		if !ok {
			return true
		}
		priced++
		if want := cost.Cost(built); got != want {
			t.Fatalf("rule %d: cost %v, built graph's %v", rw.Rule, got, want)
		}
		if len(kept) < keep {
			kept = append(kept, built)
		}
		return true
	})
	if checked == 0 || priced == 0 {
		t.Errorf("%d neighbours, %d of them type-check: nothing compared", checked, priced)
	}
	t.Logf("%d nodes: %d neighbours, %d type-check", len(g.G.Nodes), checked, priced)
	return kept
}
