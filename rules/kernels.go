package rules

// Kernels are written once against Ring and instantiated for Mod and Real in
// Default. Output tensors arrive allocated with their inferred shapes.

func ewaddKernel[T any, R Ring[T]](_ []int, in, out []*Tensor[T]) {
	var r R
	a, b, o := in[0].Data, in[1].Data, out[0].Data
	for i := range o {
		o[i] = r.Add(a[i], b[i])
	}
}

func ewmulKernel[T any, R Ring[T]](_ []int, in, out []*Tensor[T]) {
	var r R
	a, b, o := in[0].Data, in[1].Data, out[0].Data
	for i := range o {
		o[i] = r.Mul(a[i], b[i])
	}
}

func smulKernel[T any, R Ring[T]](_ []int, in, out []*Tensor[T]) {
	var r R
	a, s, o := in[0].Data, in[1].Data[0], out[0].Data
	for i := range o {
		o[i] = r.Mul(a[i], s)
	}
}

func reluKernel[T any, R Ring[T]](_ []int, in, out []*Tensor[T]) {
	var r R
	a, o := in[0].Data, out[0].Data
	for i := range o {
		o[i] = r.Relu(a[i])
	}
}

// matrixDims returns batch, rows and columns of a rank-2 or rank-3 shape.
func matrixDims(s Shape) (batch, rows, cols int) {
	if s.Rank == 3 {
		return s.Dims[0], s.Dims[1], s.Dims[2]
	}
	return 1, s.Dims[0], s.Dims[1]
}

func transposeKernel[T any](_ []int, in, out []*Tensor[T]) {
	batch, rows, cols := matrixDims(in[0].Shape)
	a, o := in[0].Data, out[0].Data
	for b := 0; b < batch; b++ {
		base := b * rows * cols
		for i := 0; i < rows; i++ {
			for j := 0; j < cols; j++ {
				o[base+j*rows+i] = a[base+i*cols+j]
			}
		}
	}
}

func matmulKernel[T any, R Ring[T]](_ []int, in, out []*Tensor[T]) {
	var r R
	batch, m, k := matrixDims(in[0].Shape)
	_, _, n := matrixDims(in[1].Shape)
	a, b, o := in[0].Data, in[1].Data, out[0].Data
	for bt := 0; bt < batch; bt++ {
		ab, bb, ob := bt*m*k, bt*k*n, bt*m*n
		for i := 0; i < m; i++ {
			for j := 0; j < n; j++ {
				acc := r.Zero()
				for t := 0; t < k; t++ {
					acc = r.Add(acc, r.Mul(a[ab+i*k+t], b[bb+t*n+j]))
				}
				o[ob+i*n+j] = acc
			}
		}
	}
}

// convKernel convolves over block l of blocks of the input channels (all
// of them at 0 of 1); blocks > 1 only without groups, as conv2d's layouts
// allow.
func convKernel[T any, R Ring[T]](p []int, in, out []*Tensor[T], l, blocks int) {
	var r R
	x, w, o := in[0], in[1], out[0]
	stride, padding, relu := p[0], p[1], p[2] == ActRelu
	n, c, h, wd := x.Shape.Dims[0], x.Shape.Dims[1], x.Shape.Dims[2], x.Shape.Dims[3]
	oc, cg, kh, kw := w.Shape.Dims[0], w.Shape.Dims[1], w.Shape.Dims[2], w.Shape.Dims[3]
	oh, ow := o.Shape.Dims[2], o.Shape.Dims[3]
	_, padT, _ := windowOut(h, kh, stride, padding)
	_, padL, _ := windowOut(wd, kw, stride, padding)
	perGroup := oc / (c / cg) // c / cg groups, whether explicit or depth-wise
	// One output cell is one dot product of the window's cells (zero where
	// it hangs over the edge) with a filter, which is contiguous in w: the
	// ring reduces once per cell, not once per row of the window.
	taps := cg * kh * kw
	block := cg / blocks // input channels of the block, from lo within the group
	lo := l * block
	patch := make([]T, block*kh*kw)
	for b := 0; b < n; b++ {
		for y := 0; y < oh; y++ {
			for xo := 0; xo < ow; xo++ {
				for f0 := 0; f0 < oc; f0 += perGroup {
					convPatch(r, patch, x, b, (f0/perGroup)*cg+lo, block, kh, kw, y*stride-padT, xo*stride-padL)
					for f := f0; f < f0+perGroup; f++ {
						from := f*taps + lo*kh*kw
						acc := r.Dot(r.Zero(), patch, w.Data[from:from+len(patch)])
						if relu {
							acc = r.Relu(acc)
						}
						o.Data[((b*oc+f)*oh+y)*ow+xo] = acc
					}
				}
			}
		}
	}
}

// convPatch fills patch with the cg channels from c0 of image b under the
// kh×kw window whose top left cell is (iy0, ix0), zeros outside the image.
func convPatch[T any, R Ring[T]](r R, patch []T, x *Tensor[T], b, c0, cg, kh, kw, iy0, ix0 int) {
	c, h, wd := x.Shape.Dims[1], x.Shape.Dims[2], x.Shape.Dims[3]
	k := 0
	for ci := 0; ci < cg; ci++ {
		plane := (b*c + c0 + ci) * h * wd
		for dy := 0; dy < kh; dy++ {
			iy := iy0 + dy
			for dx := 0; dx < kw; dx++ {
				ix := ix0 + dx
				if iy < 0 || iy >= h || ix < 0 || ix >= wd {
					patch[k] = r.Zero()
				} else {
					patch[k] = x.Data[plane+iy*wd+ix]
				}
				k++
			}
		}
	}
}

func enlargeKernel[T any, R Ring[T]](_ []int, in, out []*Tensor[T]) {
	var r R
	w, o := in[0], out[0]
	kh, kw := w.Shape.Dims[2], w.Shape.Dims[3]
	K, L := o.Shape.Dims[2], o.Shape.Dims[3]
	offH, offW := (K-kh)/2, (L-kw)/2
	for i := range o.Data {
		o.Data[i] = r.Zero()
	}
	planes := w.Shape.Dims[0] * w.Shape.Dims[1]
	for pl := 0; pl < planes; pl++ {
		for y := 0; y < kh; y++ {
			for x := 0; x < kw; x++ {
				o.Data[pl*K*L+(y+offH)*L+x+offW] = w.Data[pl*kh*kw+y*kw+x]
			}
		}
	}
}

// poolWindows calls visit for each output cell with the input cells of its
// window that lie inside the tensor (padding excluded): base+cells[i] in
// x's data.
func poolWindows(p []int, in, out Shape, visit func(outIdx, base int, cells []int)) {
	k, stride, padding := p[0], p[1], p[2]
	h, w := in.Dims[2], in.Dims[3]
	oh, ow := out.Dims[2], out.Dims[3]
	_, padT, _ := windowOut(h, k, stride, padding)
	_, padL, _ := windowOut(w, k, stride, padding)
	// Every plane has the same windows: their cells, relative to the
	// plane, are listed once, window after window (window j is
	// cells[ends[j-1]:ends[j]]).
	cells := make([]int, 0, oh*ow*k*k)
	ends := make([]int, 0, oh*ow)
	for y := 0; y < oh; y++ {
		for x := 0; x < ow; x++ {
			for dy := 0; dy < k; dy++ {
				iy := y*stride - padT + dy
				if iy < 0 || iy >= h {
					continue
				}
				for dx := 0; dx < k; dx++ {
					ix := x*stride - padL + dx
					if ix >= 0 && ix < w {
						cells = append(cells, iy*w+ix)
					}
				}
			}
			ends = append(ends, len(cells))
		}
	}
	idx := 0
	for plane := 0; plane < in.Dims[0]*in.Dims[1]; plane++ {
		start := 0
		for _, end := range ends {
			visit(idx, plane*h*w, cells[start:end])
			start = end
			idx++
		}
	}
}

func poolAvgKernel[T any, R Ring[T]](p []int, in, out []*Tensor[T]) {
	var r R
	x, o := in[0], out[0]
	scale := r.Recip(p[0] * p[0])
	poolWindows(p, x.Shape, o.Shape, func(i, base int, cells []int) {
		acc := r.Zero()
		for _, c := range cells {
			acc = r.Add(acc, x.Data[base+c])
		}
		o.Data[i] = r.Mul(acc, scale)
	})
}

func poolMaxKernel[T any, R Ring[T]](p []int, in, out []*Tensor[T]) {
	var r R
	x, o := in[0], out[0]
	poolWindows(p, x.Shape, o.Shape, func(i, base int, cells []int) {
		acc := x.Data[base+cells[0]]
		for _, c := range cells[1:] {
			acc = r.Max(acc, x.Data[base+c])
		}
		o.Data[i] = acc
	})
}

// axisBlocks returns how many outer blocks precede an axis and how many
// elements one index of the axis spans.
func axisBlocks(s Shape, axis int) (outer, inner int) {
	outer, inner = 1, 1
	for i := 0; i < axis; i++ {
		outer *= s.Dims[i]
	}
	for i := axis + 1; i < s.Rank; i++ {
		inner *= s.Dims[i]
	}
	return outer, inner
}

func concatKernel[T any](p []int, in, out []*Tensor[T]) {
	axis := p[0]
	outer, inner := axisBlocks(out[0].Shape, axis)
	na, nb := in[0].Shape.Dims[axis]*inner, in[1].Shape.Dims[axis]*inner
	o := out[0].Data
	for b := 0; b < outer; b++ {
		copy(o[b*(na+nb):], in[0].Data[b*na:(b+1)*na])
		copy(o[b*(na+nb)+na:], in[1].Data[b*nb:(b+1)*nb])
	}
}

func splitKernel[T any](p []int, in, out []*Tensor[T]) {
	axis := p[0]
	outer, inner := axisBlocks(in[0].Shape, axis)
	na, nb := out[0].Shape.Dims[axis]*inner, out[1].Shape.Dims[axis]*inner
	x := in[0].Data
	for b := 0; b < outer; b++ {
		copy(out[0].Data[b*na:], x[b*(na+nb):b*(na+nb)+na])
		copy(out[1].Data[b*nb:], x[b*(na+nb)+na:(b+1)*(na+nb)])
	}
}

func cPoolKernel[T any, R Ring[T]](p []int, _, out []*Tensor[T]) {
	var r R
	v := r.Recip(p[0] * p[0])
	for i := range out[0].Data {
		out[0].Data[i] = v
	}
}

func iConvKernel[T any, R Ring[T]](_ []int, _, out []*Tensor[T]) {
	var r R
	o := out[0]
	c, k := o.Shape.Dims[0], o.Shape.Dims[2]
	for i := range o.Data {
		o.Data[i] = r.Zero()
	}
	for ch := 0; ch < c; ch++ {
		o.Data[((ch*c+ch)*k+k/2)*k+k/2] = r.One()
	}
}

func iMatmulKernel[T any, R Ring[T]](_ []int, _, out []*Tensor[T]) {
	var r R
	o := out[0]
	n := o.Shape.Dims[0]
	for i := range o.Data {
		o.Data[i] = r.Zero()
	}
	for i := 0; i < n; i++ {
		o.Data[i*n+i] = r.One()
	}
}

func onesKernel[T any, R Ring[T]](_ []int, _, out []*Tensor[T]) {
	var r R
	for i := range out[0].Data {
		out[0].Data[i] = r.One()
	}
}
