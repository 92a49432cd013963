package rules

import (
	"slices"
	"testing"
)

// TestEveryOperatorHasEveryFact walks every registry and fails on a row
// that lacks a fact its consumers read.
func TestEveryOperatorHasEveryFact(t *testing.T) {
	for _, reg := range []*Registry{All(), FlexFlowReading()} {
		for _, op := range reg.Ops() {
			if m := op.MissingFacts(); len(m) > 0 {
				t.Errorf("%s lacks %v: set them in its row", op.Name, m)
			}
		}
	}
}

// TestMissingFactsNamesEachFact strips one fact at a time from a real row
// and expects exactly that fact to be named.
func TestMissingFactsNamesEachFact(t *testing.T) {
	conv, _ := All().Lookup(NameConv2D)
	for _, c := range []struct {
		fact  string
		strip func(op *Op)
	}{
		{"doc", func(op *Op) { op.Doc = "" }},
		{"Z3 symbols", func(op *Op) { op.Z3 = nil }},
		{"typed parameters (Attrs)", func(op *Op) { op.Attrs = nil }},
		{"shape rule", func(op *Op) { op.Shape = nil }},
		{"kernels", func(op *Op) { op.FloatKernel = nil }},
		{"pointwise class", func(op *Op) { op.Pointwise = PointwiseUnset }},
		{"cost", func(op *Op) { op.Cost = CostUnset }},
		{"layout rule", func(op *Op) { op.Layout = nil }},
		{"ONNX form", func(op *Op) { op.ONNX = ONNXForm{} }},
		{"TASO form", func(op *Op) { op.TASO.Name = "" }},
		{"FlexFlow form", func(op *Op) { op.FlexFlow.Type = "" }},
		{"TASO/FlexFlow key encoding", func(op *Op) { op.Keys = KeyEncoding{} }},
	} {
		op := *conv
		c.strip(&op)
		if got := op.MissingFacts(); !slices.Equal(got, []string{c.fact}) {
			t.Errorf("conv2d without its %s: MissingFacts = %v", c.fact, got)
		}
	}
}
