package rules

import (
	"slices"
	"testing"
)

// TestEmbedding: a lookup takes each index modulo the table's rows, in
// both arithmetics; a table cut by rows gives partial sums that add up to
// the lookup, each holding the rows of its block and zeros elsewhere; a
// cut of the indices or of the table's columns leaves the values as they
// are.
func TestEmbedding(t *testing.T) {
	op, _ := All().Lookup(NameEmbedding)
	table := &IntTensor{Shape: NewShape(4, 2), Data: []uint32{10, 11, 20, 21, 30, 31, 40, 41}}
	indices := &IntTensor{Shape: NewShape(3), Data: []uint32{5, 2, 3}}
	out, err := Eval(op, op.IntKernel, nil, []*IntTensor{indices, table}, Shape{})
	if err != nil {
		t.Fatal(err)
	}
	if want := []uint32{20, 21, 30, 31, 40, 41}; !slices.Equal(out[0].Data, want) {
		t.Errorf("lookup of 5, 2, 3 in 4 rows: %v, want %v", out[0].Data, want)
	}
	floats := &FloatTensor{Shape: NewShape(3), Data: []float64{-1, 2.5, 7}}
	ftable := &FloatTensor{Shape: NewShape(4, 1), Data: []float64{1, 2, 3, 4}}
	fout, err := Eval(op, op.FloatKernel, nil, []*FloatTensor{floats, ftable}, Shape{})
	if err != nil {
		t.Fatal(err)
	}
	if want := []float64{4, 3, 4}; !slices.Equal(fout[0].Data, want) {
		t.Errorf("float lookup of -1, 2.5, 7 in 4 rows: %v, want %v", fout[0].Data, want)
	}

	rowCut, copied := table.Shape, indices.Shape
	rowCut.Degrees[0], copied.Copy = 2, 2
	sums, err := Eval(op, op.IntKernel, nil, []*IntTensor{{Shape: copied, Data: indices.Data}, {Shape: rowCut, Data: table.Data}}, Shape{})
	if err != nil {
		t.Fatal(err)
	}
	if got := sums[0].Shape.String(); got != "3x2+sum2" {
		t.Fatalf("rows cut in 2: output %s, want 3x2+sum2", got)
	}
	// Index 5 is row 1, in the first block; 2 and 3 are in the second.
	first, second := sums[0].Data[:6], sums[0].Data[6:]
	if want := []uint32{20, 21, 0, 0, 0, 0}; !slices.Equal(first, want) {
		t.Errorf("rows 0–1: %v, want %v", first, want)
	}
	if want := []uint32{0, 0, 30, 31, 40, 41}; !slices.Equal(second, want) {
		t.Errorf("rows 2–3: %v, want %v", second, want)
	}

	for _, cut := range []struct{ indices, table Shape }{
		{withDegree(indices.Shape, 0, 3), withCopy(table.Shape, 3)},
		{withCopy(indices.Shape, 2), withDegree(table.Shape, 1, 2)},
	} {
		got, err := Eval(op, op.IntKernel, nil, []*IntTensor{{Shape: cut.indices, Data: indices.Data}, {Shape: cut.table, Data: table.Data}}, Shape{})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got[0].Data, out[0].Data) {
			t.Errorf("%s into %s: %v, want %v", cut.indices, cut.table, got[0].Data, out[0].Data)
		}
	}

	summed := indices.Shape
	summed.Sum = 2
	if _, err := op.InferShapes(nil, []Shape{summed, withCopy(table.Shape, 2)}); err == nil {
		t.Error("indices holding partial sums were taken")
	}
}

func withDegree(s Shape, dim, d int) Shape { s.Degrees[dim] = d; return s }
func withCopy(s Shape, c int) Shape        { s.Copy = c; return s }
