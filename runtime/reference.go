package runtime

import (
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"rulebook/internal/safetext"
	"rulebook/onnx"
)

// ReadInputs reads one serialized TensorProto per graph input, in graph
// order (ONNX's test_data_set_N/input_K.pb), checking each one's shape.
// Values of any numeric data type are converted to float32.
func (m *Model) ReadInputs(paths []string) (map[string]*Tensor, error) {
	want := m.Inputs()
	if len(paths) != len(want) {
		return nil, fmt.Errorf("the model has %d inputs, got %d files", len(want), len(paths))
	}
	feeds := map[string]*Tensor{}
	for i, p := range paths {
		t, dt, err := readFloat32s(p)
		if err != nil {
			return nil, err
		}
		if dt != onnx.Float {
			return nil, fmt.Errorf("%s: input %q holds %s, but the model takes FLOAT: convert the file, rulebook does not round its values silently: %w",
				p, want[i].Name, dt, ErrInputType)
		}
		if !slices.Equal(t.Shape, want[i].Shape) {
			return nil, fmt.Errorf("%s: input %q has shape %v, but the model expects %v", p, want[i].Name, t.Shape, want[i].Shape)
		}
		feeds[want[i].Name] = t
	}
	return feeds, nil
}

// ErrInputType is a tensor file whose data type is not the type of the
// model input it is given for.
var ErrInputType = errors.New("the input file's data type is not the model input's")

// readFloat32s reads a serialized TensorProto as a float32 tensor and
// says which data type the file holds.
func readFloat32s(path string) (*Tensor, onnx.DataType, error) {
	pt, err := onnx.ReadTensor(path)
	if err != nil {
		return nil, 0, err
	}
	values, err := pt.Float64s()
	if err != nil {
		return nil, 0, fmt.Errorf("%s: %w", path, err)
	}
	t := NewTensor(pt.Shape()...)
	for k, v := range values {
		t.Data[k] = float32(v)
	}
	return t, pt.DataType, nil
}

// Tolerance bounds how far an output element may be from its reference:
// |got − want| ≤ ATol + RTol·|want|, as numpy's allclose and ONNX's
// backend tests check. A NaN matches a NaN, an infinity only itself.
type Tolerance struct {
	RTol, ATol float64
}

// The default tolerance is what the runtime is held to on ONNX's node
// tests: their references come from numpy in float32 or float64, ours
// from float32 arithmetic that sums in another order.
const (
	DefaultRTol = 1e-3
	DefaultATol = 1e-5
)

func (tol Tolerance) allows(got, want float32) bool {
	g, w := float64(got), float64(want)
	if math.IsNaN(g) || math.IsNaN(w) {
		return math.IsNaN(g) && math.IsNaN(w)
	}
	if math.IsInf(g, 0) || math.IsInf(w, 0) {
		return g == w // an infinity matches only itself
	}
	return math.Abs(g-w) <= tol.ATol+tol.RTol*math.Abs(w)
}

// Mismatch is the first element, in row-major order, at which an output
// is further from its reference than the tolerance allows.
type Mismatch struct {
	Output    string
	Index     int   // flat, row-major
	At        []int // the same element by dimension
	Got, Want float32
	Tolerance Tolerance
	// Differ of Total elements are out of tolerance.
	Differ, Total int
	// RelErr is the whole output's relative error, ‖got − want‖ / ‖want‖
	// (Euclidean norms): near-zero elements can miss an element-wise
	// tolerance while the output as a whole agrees closely.
	RelErr float64
}

func (e *Mismatch) Error() string {
	return fmt.Sprintf("output %q differs from its reference at flat index %d, index %v: got %.8g, want %.8g (rtol %g, atol %g); %d of %d elements differ; relative error of the output %.2g",
		e.Output, e.Index, e.At, e.Got, e.Want, e.Tolerance.RTol, e.Tolerance.ATol, e.Differ, e.Total, e.RelErr)
}

// ReadReferences reads the expected outputs of a run from serialized
// TensorProtos, one per graph output in graph order (ONNX's
// test_data_set_N/output_K.pb), checking that each holds float32 data of
// its output's shape.
func (m *Model) ReadReferences(paths []string) ([]*Tensor, error) {
	want := m.Outputs()
	if len(paths) != len(want) {
		return nil, fmt.Errorf("the model has %d outputs, got %d files", len(want), len(paths))
	}
	refs := make([]*Tensor, len(paths))
	for i, p := range paths {
		ref, dtype, err := readFloat32s(p)
		if err != nil {
			return nil, err
		}
		switch {
		case dtype != onnx.Float:
			return nil, fmt.Errorf("%s: output %q is float32, but the reference holds %s data", p, want[i].Name, dtype)
		case !slices.Equal(ref.Shape, want[i].Shape):
			return nil, fmt.Errorf("%s: output %q has shape %v, but the reference has shape %v", p, want[i].Name, want[i].Shape, ref.Shape)
		}
		refs[i] = ref
	}
	return refs, nil
}

// CheckOutputs compares a run's outputs with their references (see
// ReadReferences) and returns a *Mismatch for the first element out of
// tolerance, in graph order.
func (m *Model) CheckOutputs(outs map[string]*Tensor, refs []*Tensor, tol Tolerance) error {
	for i, o := range m.Outputs() {
		if err := firstMismatch(o.Name, outs[o.Name], refs[i], tol); err != nil {
			return err
		}
	}
	return nil
}

// firstMismatch finds the first element of got out of tolerance of want,
// which has the same shape, and counts them all.
func firstMismatch(name string, got, want *Tensor, tol Tolerance) error {
	var e *Mismatch
	for i, w := range want.Data {
		if tol.allows(got.Data[i], w) {
			continue
		}
		if e == nil {
			e = &Mismatch{Output: name, Index: i, At: multiIndex(i, got.Shape), Got: got.Data[i], Want: w, Tolerance: tol, Total: len(want.Data)}
		}
		e.Differ++
	}
	if e == nil {
		return nil
	}
	e.RelErr = relativeError(got, want)
	return e
}

// RelativeError is the largest relative error of the outputs against
// their references, ‖got − want‖ / ‖want‖ in Euclidean norms.
func (m *Model) RelativeError(outs map[string]*Tensor, refs []*Tensor) float64 {
	worst := 0.0
	for i, o := range m.Outputs() {
		worst = max(worst, relativeError(outs[o.Name], refs[i]))
	}
	return worst
}

func relativeError(got, want *Tensor) float64 {
	var diff, norm float64
	for i, w := range want.Data {
		d := float64(got.Data[i]) - float64(w)
		diff += d * d
		norm += float64(w) * float64(w)
	}
	if norm == 0 {
		return math.Sqrt(diff)
	}
	return math.Sqrt(diff / norm)
}

// multiIndex turns a row-major flat index into one index per dimension.
func multiIndex(flat int, shape []int) []int {
	at := make([]int, len(shape))
	for d := len(shape) - 1; d >= 0; d-- {
		if shape[d] > 0 {
			at[d] = flat % shape[d]
			flat /= shape[d]
		}
	}
	return at
}

// WriteOutputSummary prints a table of the outputs: shape, smallest,
// largest and mean value, and the first few values.
func (m *Model) WriteOutputSummary(w io.Writer, outs map[string]*Tensor) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "OUTPUT\tSHAPE\tMIN\tMAX\tMEAN\tFIRST VALUES")
	for _, o := range m.Outputs() {
		t := outs[o.Name]
		lo, hi, sum := math.Inf(1), math.Inf(-1), 0.0
		for _, v := range t.Data {
			lo, hi, sum = math.Min(lo, float64(v)), math.Max(hi, float64(v)), sum+float64(v)
		}
		first := make([]string, min(4, len(t.Data)))
		for i := range first {
			first[i] = strconv.FormatFloat(float64(t.Data[i]), 'g', 5, 32)
		}
		fmt.Fprintf(tw, "%s\t%v\t%.5g\t%.5g\t%.5g\t%s\n", safetext.Name(o.Name), t.Shape, lo, hi, sum/float64(max(1, len(t.Data))), strings.Join(first, " "))
	}
	tw.Flush()
}
