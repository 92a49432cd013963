package runtime

import (
	"fmt"

	"rulebook/runtime/gemm"
)

type padMode int

const (
	padConstant padMode = iota
	padReflect
	padEdge
)

var padModes = map[string]padMode{"constant": padConstant, "reflect": padReflect, "edge": padEdge}

// preparePad reads pads (an attribute before opset 11, a constant input
// from 11, optionally for selected axes from 18) and the pad value (an
// attribute before 11, an optional input from 11, which may vary per Run).
// Negative pads crop.
func preparePad(c *nodeContext) (prepared, error) {
	in := c.shape(0)
	a := &c.attrs
	modeName := a.str("mode", "constant")
	mode, ok := padModes[modeName]
	if !ok {
		return prepared{}, fmt.Errorf("mode %q is not supported (constant, reflect and edge are)", modeName)
	}
	k := &padKernel{mode: mode, valueInput: -1}
	pads, axes, err := padSpec(c, k)
	if err != nil {
		return prepared{}, err
	}
	r := len(in)
	if len(pads) != 2*len(axes) {
		return prepared{}, fmt.Errorf("pads %v must have two entries per padded axis (%d)", pads, len(axes))
	}
	k.in, k.begin = in, make([]int, r)
	k.out = append([]int{}, in...)
	for i, axis := range axes {
		b, e := pads[i], pads[i+len(axes)]
		size := int64(in[axis]) + b + e
		if b < -maxTensorElements || b > maxTensorElements || e < -maxTensorElements || e > maxTensorElements || size < 0 {
			return prepared{}, fmt.Errorf("pads %v do not fit input %s", pads, formatShape(in))
		}
		if mode != padConstant && in[axis] == 0 && size > 0 {
			return prepared{}, fmt.Errorf("mode %q cannot pad the empty axis %d", modeName, axis)
		}
		k.begin[axis] = int(b)
		k.out[axis] = int(size)
	}
	ends := make([]int, r)
	for d := range r {
		ends[d] = k.out[d] - k.in[d] - k.begin[d]
	}
	params := fmt.Sprintf("mode=%s pads=%s", modeName, joinInts(append(append([]int{}, k.begin...), ends...), ","))
	return prepared{kernel: k, outputs: [][]int{k.out}, params: params}, nil
}

// padSpec reads the pads and the axes they apply to, and the pad value
// into k.
func padSpec(c *nodeContext, k *padKernel) (pads []int64, axes []int, err error) {
	r := len(c.shape(0))
	axes = make([]int, r)
	for i := range axes {
		axes[i] = i
	}
	if c.opset < 11 {
		k.value = c.attrs.float("value", 0)
		return c.attrs.ints("pads", nil), axes, nil
	}
	if !c.has(1) {
		return nil, nil, fmt.Errorf("the pads input is required")
	}
	if pads, err = c.constInts(1, "pads"); err != nil {
		return nil, nil, err
	}
	if c.has(2) {
		v := c.inputs[2]
		if numElements(v.shape) != 1 {
			return nil, nil, fmt.Errorf("constant_value %s must hold one element", formatShape(v.shape))
		}
		if v.isConst() {
			k.value = v.konst.Data[0]
		} else {
			k.valueInput = 2
		}
	}
	if c.has(3) {
		spec, err := c.constInts(3, "axes")
		if err != nil {
			return nil, nil, err
		}
		axes = axes[:0]
		for _, x := range spec {
			a, err := normalizeAxis(x, r)
			if err != nil {
				return nil, nil, err
			}
			axes = append(axes, a)
		}
	}
	return pads, axes, nil
}

type padKernel struct {
	mode       padMode
	value      float32
	valueInput int // input holding the pad value when it is not constant; -1 if none
	in, out    []int
	begin      []int
}

func (k *padKernel) bind(in, out []*Tensor, e *env) func() {
	if len(k.out) == 0 {
		return func() { copy(out[0].Data, in[0].Data) }
	}
	if k.zeroBorder() {
		return k.bindPlanes(in, out, e)
	}
	inner := len(k.out) - 1
	width := k.out[inner]
	rows := numElements(k.out[:inner])
	inStrides := stridesOf(k.in)
	body := func(lo, hi int) {
		value := k.value
		if k.valueInput >= 0 {
			value = in[k.valueInput].Data[0]
		}
		for r := lo; r < hi; r++ {
			k.row(out[0].Data[r*width:(r+1)*width], in[0].Data, r, inStrides, value)
		}
	}
	return func() { e.workers.parallelFor(rows, max(1, elementGrain/max(width, 1)), body) }
}

// row fills output row r (an index over all but the last dimension).
func (k *padKernel) row(dst, src []float32, r int, inStrides []int, value float32) {
	inner := len(k.out) - 1
	off := 0
	for d := inner - 1; d >= 0; d-- {
		i := k.source(r%k.out[d]-k.begin[d], k.in[d])
		r /= k.out[d]
		if i < 0 {
			fillValue(dst, value)
			return
		}
		off += i * inStrides[d]
	}
	n, b := k.in[inner], k.begin[inner]
	line := src[off : off+n]
	if k.mode == padConstant {
		// Output j shows input j-b where that exists.
		lo := min(max(b, 0), len(dst))
		hi := min(max(n+b, lo), len(dst))
		fillValue(dst[:lo], value)
		copy(dst[lo:hi], line[lo-b:hi-b])
		fillValue(dst[hi:], value)
		return
	}
	for j := range dst {
		dst[j] = line[k.source(j-b, n)]
	}
}

// source maps an index along an axis of size n, possibly outside it, to
// the input index whose value it shows, or -1 for the constant.
func (k *padKernel) source(i, n int) int {
	if i >= 0 && i < n {
		return i
	}
	switch k.mode {
	case padEdge:
		return min(max(i, 0), n-1)
	case padReflect:
		if n == 1 {
			return 0
		}
		period := 2 * (n - 1)
		i %= period
		if i < 0 {
			i += period
		}
		if i >= n {
			i = period - i
		}
		return i
	}
	return -1
}

// zeroBorder reports whether the pad adds zeros around the last two
// dimensions only (what PyTorch exports before inception_v3's average
// pools), which bindPlanes does a plane at a time.
func (k *padKernel) zeroBorder() bool {
	r := len(k.out)
	if k.mode != padConstant || k.valueInput >= 0 || k.value != 0 || r < 2 {
		return false
	}
	for d := range r {
		grows := k.begin[d] >= 0 && k.out[d] >= k.in[d]+k.begin[d]
		if !grows || (d < r-2 && k.out[d] != k.in[d]) {
			return false
		}
	}
	return true
}

// bindPlanes pads plane by plane: whole zero rows above and below, and
// the input's rows with their zero margins in one gemm.PadRows call,
// where the row-at-a-time path made three calls a row.
func (k *padKernel) bindPlanes(in, out []*Tensor, e *env) func() {
	r := len(k.out)
	h, w, ho, wo := k.in[r-2], k.in[r-1], k.out[r-2], k.out[r-1]
	top, left := k.begin[r-2], k.begin[r-1]
	planes := numElements(k.out[:r-2])
	body := func(lo, hi int) {
		for p := lo; p < hi; p++ {
			dst, src := out[0].Data[p*ho*wo:(p+1)*ho*wo], in[0].Data[p*h*w:(p+1)*h*w]
			clear(dst[:top*wo])
			gemm.PadRows(dst[top*wo:], wo, src, w, h, left, left+w, wo)
			clear(dst[(top+h)*wo:])
		}
	}
	return func() { e.workers.parallelFor(planes, max(1, elementGrain/max(ho*wo, 1)), body) }
}
