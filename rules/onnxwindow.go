package rules

import (
	"fmt"
	"slices"
)

// ONNXWindow is a 2-D ONNX window as a node writes it (Conv's, a pool's)
// over an NCHW input whose spatial extents are In: its attributes, nil or
// empty where the node leaves one out (ONNX's defaults apply).
type ONNXWindow struct {
	Kernel, In               []int
	Strides, Dilations, Pads []int
	AutoPad                  string
}

// Registry gives the window's stride and padding in the registry's terms;
// why says what the registry cannot express (unequal strides, dilation,
// padding that is neither SAME_UPPER, none nor symmetric), and is empty
// when it can. The optimizer maps a node with it and the planner matches a
// convolution to the rules of its parameters, so both read a window alike.
func (w ONNXWindow) Registry() (stride, padding int, why string) {
	if len(w.Kernel) != 2 || len(w.In) != 2 {
		return 0, 0, fmt.Sprintf("kernel %v over %d spatial axes (the registry's windows are 2-D)", w.Kernel, len(w.In))
	}
	strides := orDefault(w.Strides, []int{1, 1})
	switch {
	case len(strides) != 2 || strides[0] != strides[1]:
		return 0, 0, fmt.Sprintf("strides %v (the registry's are equal on both axes)", strides)
	case !slices.Equal(orDefault(w.Dilations, []int{1, 1}), []int{1, 1}):
		return 0, 0, fmt.Sprintf("dilations %v (the registry's windows are not dilated)", w.Dilations)
	}
	stride = strides[0]
	same := ONNXPads(w.In, w.Kernel, stride, PadSame)
	pads := orDefault(w.Pads, []int{0, 0, 0, 0})
	switch w.AutoPad {
	case "SAME_UPPER":
		pads = same
	case "VALID":
		pads = []int{0, 0, 0, 0}
	case "NOTSET", "":
	default:
		return 0, 0, fmt.Sprintf("auto_pad %s (the registry pads as SAME_UPPER or not at all)", w.AutoPad)
	}
	// Where paddings coincide (1×1 windows, stride 1), same is the
	// canonical choice: it is the padding rules are generated with.
	switch {
	case slices.Equal(pads, same):
		return stride, PadSame, ""
	case slices.Equal(pads, []int{0, 0, 0, 0}):
		return stride, PadValid, ""
	case w.Kernel[0]%2 == 1 && w.Kernel[1]%2 == 1 && slices.Equal(pads, symPads(w.Kernel)):
		return stride, PadSym, ""
	}
	return 0, 0, fmt.Sprintf("stride %d with pads %v, neither none, SAME_UPPER's %v nor symmetric %v", stride, pads, same, symPads(w.Kernel))
}

// ONNXPads are ONNX's pads [top, left, bottom, right] for the registry's
// padding of a kernel over spatial extents in at stride.
func ONNXPads(in, kernel []int, stride, padding int) []int {
	switch padding {
	case PadValid:
		return []int{0, 0, 0, 0}
	case PadSym:
		return symPads(kernel)
	}
	// SAME_UPPER: as many cells as the output needs, the odd one at the end.
	pads := make([]int, 4)
	for d, extent := range in {
		out := (extent + stride - 1) / stride
		total := max(0, (out-1)*stride+kernel[d]-extent)
		pads[d], pads[d+2] = total/2, total-total/2
	}
	return pads
}

// symPads are symmetric padding's pads: half the (odd) window on every
// side.
func symPads(kernel []int) []int {
	return []int{kernel[0] / 2, kernel[1] / 2, kernel[0] / 2, kernel[1] / 2}
}

func orDefault(v, def []int) []int {
	if v == nil {
		return def
	}
	return v
}
