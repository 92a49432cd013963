package rules

import "math"

// Attention over heads, as PyTorch's scaled_dot_product_attention runs
// it, in two operators so that each takes two operands:
//   - attn_softmax(q, k): queries (B, H, S, E) and keys (B, H, T, E) give
//     the weights (B, H, S, T), each row the softmax of the query's
//     scaled dot products with every key;
//   - attn_mix(w, v): weights (B, H, S, T) and values (B, H, T, F) give
//     (B, H, S, F), each row the weighted sum of the value rows: a product
//     batched over B and H.
//
// Megatron's tensor parallelism cuts the heads, data parallelism the
// batch; the query rows may be cut too. The softmax takes neither a cut
// of the keys' rows (each row normalises over all of them) nor of the
// features E (the scores feed the softmax, which is not linear), nor
// partial sums. attn_mix is a product batched over batch and heads; it
// takes cuts of the rows and columns, not of the keys, its contraction
// (its operands' Alone checks).
//
// The float softmax is the softmax. The exact arithmetic has no
// exponential, so its kernel normalises the squared scores instead
// (weight s_j² / Σ s_k²): a row-wise normalisation that, like the
// softmax, is neither additive nor separable over a cut of the keys.
// attn_softmax is marked piecewise, so every check of a rule with it
// draws floats too, and the softmax itself is held to what the exact
// kernel agreed to.

// attnSoftmaxShape: queries (B, H, S, E) and keys (B, H, T, E) give
// (B, H, S, T).
func attnSoftmaxShape(_ []int, in []Shape) ([]Shape, error) {
	q, k := in[0], in[1]
	if q.Rank != 4 || k.Rank != 4 || q.Dims[0] != k.Dims[0] || q.Dims[1] != k.Dims[1] || q.Dims[3] != k.Dims[3] {
		return nil, shapeErrorf("expected queries (B, H, S, E) and keys (B, H, T, E), got %s and %s", q, k)
	}
	out := NewShape(q.Dims[0], q.Dims[1], q.Dims[2], k.Dims[2])
	out.Split = [MaxRank]*SplitTree{q.Split[0], q.Split[1], q.Split[2], k.Split[2]}
	if !q.Parallel() && !k.Parallel() {
		return []Shape{out}, nil
	}
	if err := cutAlike(q, k); err != nil {
		return nil, err
	}
	// Each query piece meets every key piece of its batch and heads.
	rows := q.Degree(2)
	if k.CopyDegree() != rows*q.CopyDegree() {
		return nil, shapeErrorf("pieces do not pair up: keys %s need %d copies per query-row piece of %s", k, rows, q)
	}
	out.Degrees = [MaxRank]int{q.Degree(0), q.Degree(1), rows, 1}
	out.Copy = q.CopyDegree()
	out.normalizeLayout()
	return []Shape{out}, out.CheckLayout()
}

// attnMixShape: weights (B, H, S, T) and values (B, H, T, F) give
// (B, H, S, F).
func attnMixShape(_ []int, in []Shape) ([]Shape, error) {
	w, v := in[0], in[1]
	if w.Rank != 4 || v.Rank != 4 || w.Dims[0] != v.Dims[0] || w.Dims[1] != v.Dims[1] || w.Dims[3] != v.Dims[2] {
		return nil, shapeErrorf("expected weights (B, H, S, T) and values (B, H, T, F), got %s and %s", w, v)
	}
	out := NewShape(w.Dims[0], w.Dims[1], w.Dims[2], v.Dims[3])
	out.Split = [MaxRank]*SplitTree{w.Split[0], w.Split[1], w.Split[2], v.Split[3]}
	if !w.Parallel() && !v.Parallel() {
		return []Shape{out}, nil
	}
	out, err := attnMixLayout(w, v, out)
	if err != nil {
		return nil, err
	}
	return []Shape{out}, nil
}

// attnMixLayout: batch and heads cut alike in both operands, the
// weights' rows the rows, the values' columns the columns. Each weight
// piece meets every value-column piece, each value piece every weight-row
// piece.
func attnMixLayout(w, v Shape, out Shape) (Shape, error) {
	if err := cutAlike(w, v); err != nil {
		return Shape{}, err
	}
	rows, cols := w.Degree(2), v.Degree(3)
	if w.CopyDegree()%cols != 0 || v.CopyDegree()%rows != 0 || w.CopyDegree()/cols != v.CopyDegree()/rows {
		return Shape{}, shapeErrorf("pieces do not pair up: weights %s need %d copies per %d value-column pieces, values %s %d per %d weight-row pieces",
			w, cols, cols, v, rows, rows)
	}
	out.Degrees = [MaxRank]int{w.Degree(0), w.Degree(1), rows, cols}
	out.Copy = w.CopyDegree() / cols
	out.normalizeLayout()
	return out, out.CheckLayout()
}

// cutAlike checks that two operands' batch and heads are cut alike.
func cutAlike(a, b Shape) error {
	for d := 0; d < 2; d++ {
		if a.Degree(d) != b.Degree(d) {
			return shapeErrorf("dimension %d of %s and %s is cut differently", d, a, b)
		}
	}
	return nil
}

// attnSoftmaxKernel computes the weights head by head; weigh turns a row
// of scores of features-long rows into weights in place.
func attnSoftmaxKernel[T any, R Ring[T]](weigh func(scores []T, features int)) func(p []int, in, out []*Tensor[T]) {
	return func(_ []int, in, out []*Tensor[T]) {
		var r R
		q, k, y := in[0], in[1], out[0]
		heads := q.Shape.Dims[0] * q.Shape.Dims[1]
		rows, e, keys := q.Shape.Dims[2], q.Shape.Dims[3], k.Shape.Dims[2]
		for h := range heads {
			qh, kh := q.Data[h*rows*e:(h+1)*rows*e], k.Data[h*keys*e:(h+1)*keys*e]
			for i := range rows {
				scores := y.Data[(h*rows+i)*keys : (h*rows+i+1)*keys]
				for j := range keys {
					scores[j] = r.Dot(r.Zero(), qh[i*e:(i+1)*e], kh[j*e:(j+1)*e])
				}
				weigh(scores, e)
			}
		}
	}
}

// attnMixKernel is the product batched over batch and heads.
func attnMixKernel[T any, R Ring[T]](_ []int, in, out []*Tensor[T]) {
	var r R
	w, v, y := in[0], in[1], out[0]
	heads := w.Shape.Dims[0] * w.Shape.Dims[1]
	rows, keys, f := w.Shape.Dims[2], w.Shape.Dims[3], v.Shape.Dims[3]
	for h := range heads {
		wh, vh, yh := w.Data[h*rows*keys:(h+1)*rows*keys], v.Data[h*keys*f:(h+1)*keys*f], y.Data[h*rows*f:(h+1)*rows*f]
		for i := range rows {
			for j := range keys {
				a := wh[i*keys+j]
				for c := range f {
					yh[i*f+c] = r.Add(yh[i*f+c], r.Mul(a, vh[j*f+c]))
				}
			}
		}
	}
}

// squaresWeights is the exact stand-in for the softmax: s_j² / Σ s_k²,
// all zero where the sum is. A scale of the scores cancels.
func squaresWeights(s []uint32, _ int) {
	var r Mod
	sum := uint32(0)
	for j, x := range s {
		s[j] = r.Mul(x, x)
		sum = r.Add(sum, s[j])
	}
	inv := uint32(0)
	if sum != 0 {
		inv = modInverse(uint64(sum))
	}
	for j := range s {
		s[j] = r.Mul(s[j], inv)
	}
}

// softmaxWeights is the softmax of the scores scaled by 1/√features,
// shifted by the largest.
func softmaxWeights(s []float64, features int) {
	scale := 1 / math.Sqrt(float64(features))
	top := math.Inf(-1)
	for _, x := range s {
		top = max(top, x)
	}
	sum := 0.0
	for j, x := range s {
		s[j] = math.Exp((x - top) * scale)
		sum += s[j]
	}
	for j := range s {
		s[j] /= sum
	}
}
