package rules

import "math"

// The embedding lookup, as DLRM and a transformer's token embedding run
// it, with the cuts model-parallel embeddings use (plan/embedding.go):
// the indices by batch (data parallel), the table by columns (each piece
// looks every index up in its columns) or by rows (each piece looks up
// the indices that fall in its rows and leaves zeros elsewhere: partial
// sums, which a reduce adds, as Megatron's vocabulary-parallel embedding
// does).

// embeddingShape: indices (n) and a table (rows, columns) give (n,
// columns).
func embeddingShape(_ []int, in []Shape) ([]Shape, error) {
	x, w := in[0], in[1]
	if x.Rank != 1 || w.Rank != 2 {
		return nil, shapeErrorf("expected indices of rank 1 and a table of rank 2, got %s and %s", x, w)
	}
	out := NewShape(x.Dims[0], w.Dims[1])
	out.Split[0], out.Split[1] = x.Split[0], w.Split[1]
	if !x.Parallel() && !w.Parallel() {
		return []Shape{out}, nil
	}
	out, err := embeddingLayout(x, w, out)
	if err != nil {
		return nil, err
	}
	return []Shape{out}, nil
}

// embeddingLayout pairs pieces as a product does (productLayout): the
// indices' pieces are the rows, the table's column pieces the columns,
// and its row pieces (with its partial sums) the contraction, which gives
// partial sums. Each index piece meets every column, row and sum piece of
// the table, and each table piece every index piece.
func embeddingLayout(x, w Shape, out Shape) (Shape, error) {
	rows, cols, blocks := x.Degree(0), w.Degree(1), w.Degree(0)
	needX, needW := cols*blocks*w.SumDegree(), rows
	if x.CopyDegree()%needX != 0 || w.CopyDegree()%needW != 0 || x.CopyDegree()/needX != w.CopyDegree()/needW {
		return Shape{}, shapeErrorf("pieces do not pair up: indices %s need %d copies per %d column, row and sum pieces of table %s, which needs %d per %d index pieces",
			x, needX, needX, w, needW, needW)
	}
	out.Degrees = [MaxRank]int{rows, cols}
	out.Sum = blocks * w.SumDegree()
	out.Copy = x.CopyDegree() / needX
	out.normalizeLayout()
	return out, out.CheckLayout()
}

// embeddingKernel looks the indices up: partial sum i·r + l of the result
// holds the table's partial sum i at the indices that fall in its row
// block l of r, and zeros at the others.
func embeddingKernel[T any](index func(v T, rows int) int) func(p []int, in, out []*Tensor[T]) {
	return func(_ []int, in, out []*Tensor[T]) {
		x, w, y := in[0], in[1], out[0]
		rows, cols := w.Shape.Dims[0], w.Shape.Dims[1]
		r := w.Shape.Degree(0)
		block := rows / r
		n := x.Shape.Dims[0]
		for i := range w.Shape.SumDegree() {
			wi := piece(w, i)
			for l := range r {
				yi := piece(y, i*r+l)
				for j, v := range x.Data[:n] {
					row := index(v, rows)
					if row/block == l {
						copy(yi.Data[j*cols:(j+1)*cols], wi.Data[row*cols:(row+1)*cols])
					}
				}
			}
		}
	}
}

// modIndex reads an exact value as an index: its residue modulo rows.
func modIndex(v uint32, rows int) int { return int(v % uint32(rows)) }

// realIndex reads a float as an index: its floor modulo rows, so that an
// integer index in [−rows, rows) reads as ONNX's Gather reads it.
func realIndex(v float64, rows int) int {
	i := int(math.Floor(v)) % rows
	if i < 0 {
		i += rows
	}
	return i
}
