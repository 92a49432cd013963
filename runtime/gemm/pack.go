package gemm

// packTransposed fills panels of 32 columns of a kcur×ncols block of a
// matrix X stored transposed (X(p, j) = src[j·ss + p]), columns [j0,
// j0+ncols) and rows [p0, p0+kcur): panel q holds X(p0+p, j0+32q+c) at
// dst[q·kcur·32 + p·32 + c]; the lanes of a last, partial panel past
// ncols are zeroed.
func (ks *kernelSet) packTransposed(w *workspace, dst []float32, kcur int, src []float32, ss, j0, ncols, p0 int) {
	for q := 0; q*panelWidth < ncols; q++ {
		panel := dst[q*kcur*panelWidth : (q+1)*kcur*panelWidth]
		if cols := ncols - q*panelWidth; cols < panelWidth {
			for p := 0; p < kcur; p++ {
				clear(panel[p*panelWidth+cols : (p+1)*panelWidth])
			}
		}
		for h := 0; h < panelWidth; h += 16 {
			rows := min(16, ncols-q*panelWidth-h)
			if rows <= 0 {
				break
			}
			jb := j0 + q*panelWidth + h
			p := 0
			if rows == 16 && ks.transpose16 != nil {
				nb := kcur / 16
				if nb > 0 {
					ks.transpose16(&panel[h], panelWidth, &src[jb*ss+p0], ss, nb, 0xffff)
				}
				p = nb * 16
				if rest := kcur - p; rest > 0 {
					// The last rest < 16 columns: transpose a masked
					// block into w.tr and keep its first rest rows.
					_ = src[(jb+15)*ss+p0+kcur-1]
					ks.transpose16(&w.tr[0], 16, &src[jb*ss+p0+p], ss, 1, 1<<rest-1)
					for r := 0; r < rest; r++ {
						copy(panel[(p+r)*panelWidth+h:(p+r)*panelWidth+h+16], w.tr[r*16:r*16+16])
					}
					continue
				}
			}
			for r := 0; r < rows; r++ {
				row := src[(jb+r)*ss+p0 : (jb+r)*ss+p0+kcur]
				for pp := p; pp < kcur; pp++ {
					panel[pp*panelWidth+h+r] = row[pp]
				}
			}
		}
	}
}

// packPanels stores the k×n matrix X (X(p, j) = x[j·ld + p] if trans,
// x[p·ld + j] if not) in the panel format of packed, zero padded.
func packPanels(trans bool, k, n int, x []float32, ld int) packed {
	np := (n + panelWidth - 1) / panelWidth
	pk := packed{k: k, n: n, data: make([]float32, np*k*panelWidth)}
	if k == 0 || n == 0 {
		return pk
	}
	if trans {
		defaultKernels.packTransposed(new(workspace), pk.data, k, x, ld, 0, n, 0)
		return pk
	}
	for q := 0; q < np; q++ {
		j := q * panelWidth
		cols := min(panelWidth, n-j)
		panel := pk.data[q*k*panelWidth:]
		for p := 0; p < k; p++ {
			copy(panel[p*panelWidth:p*panelWidth+cols], x[p*ld+j:p*ld+j+cols])
		}
	}
	return pk
}

// transposeInto sets C(i, j) = T(j, i) + beta·C(i, j) for i in [i0, i1)
// and j in [j0, j1), where T(j, i) = t[j·ldt + i]; C is not read when
// beta is 0.
func (ks *kernelSet) transposeInto(w *workspace, c []float32, ldc int, t []float32, ldt int, beta float32, i0, i1, j0, j1 int) {
	buf := &w.tr
	for i := i0; i < i1; i += 16 {
		ni := min(16, i1-i)
		for j := j0; j < j1; j += 16 {
			nj := min(16, j1-j)
			if ni == 16 && nj == 16 && ks.transpose16 != nil {
				if beta == 0 {
					ks.transpose16(&c[i*ldc+j], ldc, &t[j*ldt+i], ldt, 1, 0xffff)
					continue
				}
				ks.transpose16(&buf[0], 16, &t[j*ldt+i], ldt, 1, 0xffff)
				for r := 0; r < 16; r++ {
					row := c[(i+r)*ldc+j : (i+r)*ldc+j+16]
					src := buf[r*16 : r*16+16]
					for x := range row {
						row[x] = src[x] + beta*row[x]
					}
				}
				continue
			}
			for r := i; r < i+ni; r++ {
				row := c[r*ldc+j : r*ldc+j+nj]
				for x := range row {
					v := t[(j+x)*ldt+r]
					if beta != 0 {
						v += beta * row[x]
					}
					row[x] = v
				}
			}
		}
	}
}
