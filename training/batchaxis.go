package training

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"rulebook/onnx"
	"rulebook/runtime"
)

// The batch axis is found, not assumed. An export of a module with
// batch_first=False takes [seq, batch, embed], so dimension 0 is not
// always the batch. The rule: the batch is the input axis along which
// the model treats rows as independent. Doubling it at the traced
// shapes doubles every graph output and grows no value by more than
// twice: each sample gives its own rows and meets no other. A sequence
// axis fails this, since attention's scores grow as its square and a
// pooled output does not grow with it. Where several axes pass (a model
// acting on each position alone, as an MLP on [seq, batch, features]),
// the work at a batch is the same whichever is scaled, and dimension 0
// is taken; else a dynamic dimension named "batch" (torch.onnx's
// dynamic_axes) decides. One axis is scaled in every data input that has
// it.

// BatchAxisError says that no input axis, or more than one, behaves as
// the batch.
type BatchAxisError struct {
	Candidates []int // the axes that passed; none when empty
}

func (e *BatchAxisError) Error() string {
	if len(e.Candidates) == 0 {
		return "no input axis behaves as the batch (doubling each axis at the traced shapes mixes rows or does not double the outputs); export with the batch as a dynamic axis named \"batch\" (torch.onnx dynamic_axes)"
	}
	return fmt.Sprintf("input axes %v all behave as the batch and none is named \"batch\"; export with the batch as a dynamic axis named \"batch\" (torch.onnx dynamic_axes)", e.Candidates)
}

// tracedInputs are the data inputs' declared shapes, a dynamic dimension
// taken as 1, and the names of their dynamic dimensions.
func tracedInputs(g *onnx.Graph) (map[string][]int, map[string][]string) {
	shapes, names := map[string][]int{}, map[string][]string{}
	for _, in := range g.Inputs {
		if g.Initializer(in.Name) != nil {
			continue
		}
		s := make([]int, len(in.Shape))
		n := make([]string, len(in.Shape))
		for i, d := range in.Shape {
			s[i], n[i] = int(d.Value), d.Param
			if !d.HasValue {
				s[i] = 1
			}
		}
		shapes[in.Name], names[in.Name] = s, n
	}
	return shapes, names
}

// findBatchAxis is the input axis that is the batch (see above), and
// where the batch lies in each value that carries it on one axis: the
// one axis that doubled with it. A model whose traced shapes do not infer
// gets axis 0, and the inference at the batch reports what is wrong with
// it.
func findBatchAxis(m *onnx.Model) (int, map[string]int, error) {
	traced, names := tracedInputs(m.Graph)
	base, err := runtime.InferShapes(m, runtime.ShapeOptions{Inputs: traced, Opset: assumedOpset})
	if err != nil {
		return 0, nil, nil
	}
	rank := 0
	for _, s := range traced {
		rank = max(rank, len(s))
	}
	var passed []int
	var retraced []error
	found := map[int]map[string]int{}
	for axis := range rank {
		ok, axes, err := rowsIndependent(m, base, traced, axis)
		if _, re := errors.AsType[*runtime.RetraceError](err); re {
			retraced = append(retraced, err)
		}
		if ok && axis == 0 {
			return 0, axes, nil
		}
		if ok {
			passed = append(passed, axis)
			found[axis] = axes
		}
	}
	switch {
	case len(passed) == 1:
		return passed[0], found[passed[0]], nil
	case len(passed) == 0 && len(retraced) == 1:
		// The one axis that could not be retraced is the batch, merged
		// with another dimension at a traced batch of 1.
		return 0, nil, retraced[0]
	}
	for _, axis := range passed {
		if namedBatch(names, axis) {
			return axis, found[axis], nil
		}
	}
	return 0, nil, &BatchAxisError{Candidates: passed}
}

// namedBatch reports whether some input's dynamic dimension at axis is
// named as the batch.
func namedBatch(names map[string][]string, axis int) bool {
	for _, n := range names {
		if axis < len(n) && strings.Contains(strings.ToLower(n[axis]), "batch") {
			return true
		}
	}
	return false
}

// rowsIndependent doubles axis in every data input that has it and
// reports whether every graph output doubled and no value grew more; if
// so, the axis that doubled in each value where one alone did.
func rowsIndependent(m *onnx.Model, base *runtime.Shapes, traced map[string][]int, axis int) (bool, map[string]int, error) {
	opt := runtime.ShapeOptions{Inputs: map[string][]int{}, Batched: map[string]bool{}, BatchAxis: map[string]int{},
		RetraceBatch: true, Traced: traced, Opset: assumedOpset}
	for in, s := range traced {
		s = slices.Clone(s)
		if axis < len(s) {
			s[axis] *= 2
			opt.Batched[in], opt.BatchAxis[in] = true, axis
		}
		opt.Inputs[in] = s
	}
	doubled, err := runtime.InferShapes(m, opt)
	if err != nil {
		return false, nil, err
	}
	grows := func(v string) (before, after int64) {
		b, _ := base.Shape(v)
		a, _ := doubled.Shape(v)
		return runtime.Elements(toInt64(b)), runtime.Elements(toInt64(a))
	}
	axes := map[string]int{}
	for in := range traced {
		axes[in] = axis
	}
	for _, n := range m.Graph.Nodes {
		for _, v := range n.Outputs {
			if before, after := grows(v); v != "" && after > 2*before {
				return false, nil, nil
			}
			if k, ok := doubledAxis(base, doubled, v); ok {
				axes[v] = k
			}
		}
	}
	for _, out := range m.Graph.Outputs {
		if before, after := grows(out.Name); after != 2*before {
			return false, nil, nil
		}
	}
	return true, axes, nil
}

// doubledAxis is the one axis of v that doubled between the two shapes.
func doubledAxis(base, doubled *runtime.Shapes, v string) (int, bool) {
	b, _ := base.Shape(v)
	a, _ := doubled.Shape(v)
	if len(a) != len(b) {
		return 0, false
	}
	k := -1
	for i := range a {
		if a[i] != b[i] {
			if k >= 0 || a[i] != 2*b[i] {
				return 0, false
			}
			k = i
		}
	}
	return k, k >= 0
}
