package runtime

import (
	"fmt"
	"slices"
	"strings"
)

// window is the geometry of a sliding window over the spatial dimensions
// (Conv and the pools), with auto_pad resolved into explicit pads.
type window struct {
	kernel    []int
	strides   []int
	dilations []int
	padBegin  []int
	padEnd    []int
	ceilMode  bool
	in, out   []int // spatial sizes
}

// resolveWindow reads strides, dilations, pads, auto_pad and (when
// allowed) ceil_mode for spatial input sizes in and kernel sizes kernel,
// and computes the output sizes.
func resolveWindow(a *attrReader, in, kernel []int, allowCeil bool) (window, error) {
	r := len(in)
	w := window{
		kernel:    kernel,
		strides:   toInts(a.ints("strides", nil)),
		dilations: toInts(a.ints("dilations", nil)),
		in:        in,
		ceilMode:  allowCeil && a.int("ceil_mode", 0) != 0,
	}
	if len(w.strides) == 0 {
		w.strides = filled(r, 1)
	}
	if len(w.dilations) == 0 {
		w.dilations = filled(r, 1)
	}
	if len(w.strides) != r || len(w.dilations) != r {
		return w, fmt.Errorf("strides %v and dilations %v must have one entry per spatial dimension (%d)", w.strides, w.dilations, r)
	}
	for i := range r {
		if w.strides[i] < 1 || w.dilations[i] < 1 || kernel[i] < 1 {
			return w, fmt.Errorf("kernel %v, strides %v and dilations %v must be positive", kernel, w.strides, w.dilations)
		}
	}
	autoPad := a.str("auto_pad", "NOTSET")
	var err error
	switch autoPad {
	case "NOTSET", "":
		err = w.explicitPads(a.ints("pads", nil))
	case "VALID":
		w.padBegin, w.padEnd = filled(r, 0), filled(r, 0)
	case "SAME_UPPER", "SAME_LOWER":
		w.samePads(autoPad == "SAME_UPPER")
	default:
		return w, fmt.Errorf("auto_pad %q is not NOTSET, SAME_UPPER, SAME_LOWER or VALID", autoPad)
	}
	if err != nil {
		return w, err
	}
	return w, w.outputSizes()
}

func (w *window) explicitPads(pads []int64) error {
	r := len(w.in)
	if pads == nil {
		pads = make([]int64, 2*r)
	}
	if len(pads) != 2*r {
		return fmt.Errorf("pads %v must have two entries per spatial dimension (%d)", pads, r)
	}
	p := toInts(pads)
	for _, x := range pads {
		if x < 0 || x > maxTensorElements {
			return fmt.Errorf("pads %v must be non-negative", pads)
		}
	}
	w.padBegin, w.padEnd = p[:r], p[r:]
	return nil
}

// samePads pads so that the output size is ceil(in/stride); an odd total
// puts the extra pad at the end (SAME_UPPER) or the beginning (SAME_LOWER).
func (w *window) samePads(upper bool) {
	r := len(w.in)
	w.padBegin, w.padEnd = make([]int, r), make([]int, r)
	for i := range r {
		out := (w.in[i] + w.strides[i] - 1) / w.strides[i]
		total := max(0, (out-1)*w.strides[i]+w.extent(i)-w.in[i])
		small, large := total/2, total-total/2
		if upper {
			w.padBegin[i], w.padEnd[i] = small, large
		} else {
			w.padBegin[i], w.padEnd[i] = large, small
		}
	}
}

// extent is the span of the dilated kernel along spatial dimension i.
func (w *window) extent(i int) int { return (w.kernel[i]-1)*w.dilations[i] + 1 }

// outputSizes computes floor((in + pads - extent) / stride) + 1, or the
// ceiling with ceil_mode, where a last window that would start past the
// input and its leading pad is dropped (it would see only padding).
func (w *window) outputSizes() error {
	w.out = make([]int, len(w.in))
	for i := range w.in {
		span := w.in[i] + w.padBegin[i] + w.padEnd[i] - w.extent(i)
		if span < 0 {
			return fmt.Errorf("the window (kernel %v, dilations %v) is larger than the padded input %v", w.kernel, w.dilations, w.in)
		}
		s := w.strides[i]
		if w.ceilMode {
			w.out[i] = (span+s-1)/s + 1
			if (w.out[i]-1)*s >= w.in[i]+w.padBegin[i] {
				w.out[i]--
			}
		} else {
			w.out[i] = span/s + 1
		}
	}
	return nil
}

// params renders the geometry for NodeInfo.Params, pads resolved.
func (w *window) params() []string {
	return []string{
		"dilations=" + joinInts(w.dilations, ","),
		"kernel=" + joinInts(w.kernel, "x"),
		"pads=" + joinInts(append(append([]int{}, w.padBegin...), w.padEnd...), ","),
		"strides=" + joinInts(w.strides, ","),
	}
}

// paramString renders key=value settings for NodeInfo.Params, sorted by
// key so that the rendering is canonical.
func paramString(parts ...string) string {
	parts = slices.Clone(parts)
	slices.Sort(parts)
	return strings.Join(parts, " ")
}
