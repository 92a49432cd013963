package cuda

import (
	"fmt"
	"math"
)

// Convolution is one 2-D convolution with cuDNN's semantics: cross-correlation
// (the filter is not flipped) of an NCHW float32 input with a KCRS filter
// in Groups groups, then, when Bias is set, a per-filter bias, then, when
// Relu is set, max(0, ·):
//
//	Y[n,k,p,q] = Σ_{c,r,s} X[n, g·C/G + c, p·StrideH − PadH + r·DilationH, q·StrideW − PadW + s·DilationW] · Filter[k,c,r,s]
//
// with g = k / (Filters/Groups), c < Channels/Groups, positions outside
// the input reading 0. Padding is the same on both sides of an axis, as
// cuDNN's legacy descriptors have it; Out is what cuDNN computes from
// the rest.
type Convolution struct {
	Batch, Channels, Height, Width int
	Filters, KernelH, KernelW      int
	Groups                         int
	PadH, PadW                     int
	StrideH, StrideW               int
	DilationH, DilationW           int
	OutH, OutW                     int
	X, Filter, Y                   Ptr
	Bias                           Ptr // Filters floats, or 0 for none
	Relu                           bool
	// Precision is how X and Filter are multiplied (FP32 by default).
	Precision Precision
}

// ConvOutput is cuDNN's output size along one axis.
func ConvOutput(in, kernel, pad, stride, dilation int) int {
	return (in+2*pad-dilation*(kernel-1)-1)/stride + 1
}

// Convolver is a Backend that also convolves (cuDNN on the GPU, a direct
// loop in the emulator). The runtime type-asserts it; ConvError says
// whether it can be used.
type Convolver interface {
	// ConvError is nil when Conv works, else why not (no cuDNN, a
	// wrong version of it).
	ConvError() error
	// PrepareConv chooses the algorithm for c's shape and sizes the
	// workspace; the choice is kept per shape and precision. It reads no
	// address of c (they may be 0). It runs convolutions to time them,
	// so it must come before a capture that replays c.
	PrepareConv(c *Convolution) error
	// Conv queues c, preparing it first if needed.
	Conv(c *Convolution) error
}

// shapeKey is the part of a Convolution that decides the algorithm: the
// sizes and the precision. A bias and a ReLU do not: the fused call
// takes the algorithm Find chose for the convolution alone.
type shapeKey [17]int

func (c *Convolution) key() shapeKey {
	return shapeKey{c.Batch, c.Channels, c.Height, c.Width, c.Filters, c.KernelH, c.KernelW,
		c.Groups, c.PadH, c.PadW, c.StrideH, c.StrideW, c.DilationH, c.DilationW, c.OutH, c.OutW, int(c.Precision)}
}

func (c *Convolution) String() string {
	return fmt.Sprintf("conv x %d×%d×%d×%d w %d×%d×%d×%d groups %d pad %d,%d stride %d,%d dilation %d,%d → %d×%d",
		c.Batch, c.Channels, c.Height, c.Width, c.Filters, c.Channels/max(c.Groups, 1), c.KernelH, c.KernelW,
		c.Groups, c.PadH, c.PadW, c.StrideH, c.StrideW, c.DilationH, c.DilationW, c.OutH, c.OutW)
}

// elems returns the element counts of X, Filter and Y.
func (c *Convolution) elems() (x, w, y int) {
	return c.Batch * c.Channels * c.Height * c.Width,
		c.Filters * (c.Channels / c.Groups) * c.KernelH * c.KernelW,
		c.Batch * c.Filters * c.OutH * c.OutW
}

// checkShape validates c's sizes the way cuDNN's descriptors would (it
// answers CUDNN_STATUS_BAD_PARAM).
func (c *Convolution) checkShape() error {
	dims := c.key()
	for _, v := range dims[:16] {
		if v < 0 || v > math.MaxInt32 {
			return fmt.Errorf("cuda: %s: a size is negative or exceeds a C int", c)
		}
	}
	switch {
	case c.Batch < 1 || c.Channels < 1 || c.Filters < 1 || c.Height < 1 || c.Width < 1 || c.KernelH < 1 || c.KernelW < 1:
		return fmt.Errorf("cuda: %s: empty operand", c)
	case c.Groups < 1 || c.Channels%c.Groups != 0 || c.Filters%c.Groups != 0:
		return fmt.Errorf("cuda: %s: channels and filters must divide into the groups", c)
	case c.StrideH < 1 || c.StrideW < 1 || c.DilationH < 1 || c.DilationW < 1:
		return fmt.Errorf("cuda: %s: strides and dilations must be positive", c)
	case c.OutH != ConvOutput(c.Height, c.KernelH, c.PadH, c.StrideH, c.DilationH) ||
		c.OutW != ConvOutput(c.Width, c.KernelW, c.PadW, c.StrideW, c.DilationW) || c.OutH < 1 || c.OutW < 1:
		return fmt.Errorf("cuda: %s: the output is not what the other sizes give", c)
	}
	return nil
}

// check validates c's sizes and that every operand lies in one
// allocation.
func (c *Convolution) check(allocs *allocTable) error {
	if err := c.checkShape(); err != nil {
		return err
	}
	x, w, y := c.elems()
	for _, op := range []struct {
		name  string
		p     Ptr
		elems int
	}{{"X", c.X, x}, {"Filter", c.Filter, w}, {"Y", c.Y, y}, {"Bias", c.Bias, c.Filters}} {
		if op.name == "Bias" && op.p == 0 {
			continue
		}
		if !allocs.contains(op.p, 4*op.elems) {
			return fmt.Errorf("cuda: %s: %s (%#x, %d floats) is not inside one allocation", c, op.name, uint64(op.p), op.elems)
		}
	}
	return nil
}

// convolve computes c by its definition, accumulating in float64, over
// host slices of X, Filter, Bias (nil for none) and Y, with X and Filter
// rounded to c's precision first.
func convolve(c *Convolution, x, w, bias, y []float32) {
	x, w = c.Precision.rounded(x), c.Precision.rounded(w)
	cg, kg := c.Channels/c.Groups, c.Filters/c.Groups
	for n := range c.Batch {
		for k := range c.Filters {
			g := k / kg
			for p := range c.OutH {
				for q := range c.OutW {
					acc := 0.0
					for ch := range cg {
						xc := x[((n*c.Channels+g*cg+ch)*c.Height)*c.Width:]
						wc := w[((k*cg+ch)*c.KernelH)*c.KernelW:]
						for r := range c.KernelH {
							i := p*c.StrideH - c.PadH + r*c.DilationH
							if i < 0 || i >= c.Height {
								continue
							}
							for s := range c.KernelW {
								j := q*c.StrideW - c.PadW + s*c.DilationW
								if j >= 0 && j < c.Width {
									acc += float64(xc[i*c.Width+j]) * float64(wc[r*c.KernelW+s])
								}
							}
						}
					}
					v := float32(acc)
					if bias != nil {
						v += bias[k]
					}
					if c.Relu {
						v = max(v, 0)
					}
					y[((n*c.Filters+k)*c.OutH+p)*c.OutW+q] = v
				}
			}
		}
	}
}
