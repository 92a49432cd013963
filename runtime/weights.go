package runtime

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"rulebook/internal/budget"
	"rulebook/onnx"
)

// constantFromTensor turns inline tensor data (an initializer or a Constant
// node's value) into a constant value. Integer and boolean tensors keep
// their exact elements as well, for the operators that read them as shapes
// or axes.
func constantFromTensor(name string, t *onnx.Tensor) (*value, error) {
	shape, err := tensorShape(t)
	if err != nil {
		return nil, err
	}
	v := &value{name: name, shape: shape}
	if isIntegerType(t.DataType) {
		if v.ints, err = tensorInts(t); err != nil {
			return nil, err
		}
		data := make([]float32, len(v.ints))
		for i, x := range v.ints {
			data[i] = float32(x)
		}
		v.konst = &Tensor{Shape: shape, Data: data}
		return v, nil
	}
	data, err := tensorFloats(t)
	if err != nil {
		return nil, err
	}
	v.konst = &Tensor{Shape: shape, Data: data}
	return v, nil
}

func tensorShape(t *onnx.Tensor) ([]int, error) {
	shape := make([]int, len(t.Dims))
	for i, d := range t.Dims {
		if d < 0 || d > maxTensorElements {
			return nil, fmt.Errorf("tensor %q: dims %v are out of range", t.Name, t.Dims)
		}
		shape[i] = int(d)
	}
	if _, err := checkedElements(shape); err != nil {
		return nil, fmt.Errorf("tensor %q: %w", t.Name, err)
	}
	return shape, nil
}

func isIntegerType(d onnx.DataType) bool {
	switch d {
	case onnx.Int8, onnx.Int16, onnx.Int32, onnx.Int64, onnx.Uint8, onnx.Uint16, onnx.Uint32, onnx.Uint64, onnx.Bool:
		return true
	}
	return false
}

// tensorFloats decodes a tensor's elements as float32, reading FLOAT raw
// data directly (the common case for weights) and everything else through
// onnx's float64 conversion.
func tensorFloats(t *onnx.Tensor) ([]float32, error) {
	if t.DataType == onnx.Float && t.HasRawData && t.DataLocation != onnx.LocationExternal {
		n, err := t.NumElements()
		if err != nil {
			return nil, err
		}
		if len(t.RawData) != 4*n {
			return nil, fmt.Errorf("tensor %q: raw_data has %d bytes, want %d for dims %v", t.Name, len(t.RawData), 4*n, t.Dims)
		}
		out := make([]float32, n)
		for i := range out {
			out[i] = math.Float32frombits(binary.LittleEndian.Uint32(t.RawData[4*i:]))
		}
		return out, nil
	}
	if t.DataType == onnx.Float && !t.HasRawData && len(t.FloatData) > 0 {
		n, err := t.NumElements()
		if err != nil {
			return nil, err
		}
		if len(t.FloatData) != n {
			return nil, fmt.Errorf("tensor %q: float_data has %d values, want %d for dims %v", t.Name, len(t.FloatData), n, t.Dims)
		}
		return slices.Clone(t.FloatData), nil
	}
	f64, err := t.Float64s()
	if err != nil {
		return nil, err
	}
	out := make([]float32, len(f64))
	for i, x := range f64 {
		out[i] = float32(x)
	}
	return out, nil
}

// tensorInts decodes an integer tensor exactly: INT64 values past 2^53
// (INT64_MAX as "to the end", say) would not survive float64.
func tensorInts(t *onnx.Tensor) ([]int64, error) {
	n, err := t.NumElements()
	if err != nil {
		return nil, err
	}
	if t.DataType == onnx.Int64 {
		switch {
		case t.HasRawData && len(t.RawData) == 8*n:
			out := make([]int64, n)
			for i := range out {
				out[i] = int64(binary.LittleEndian.Uint64(t.RawData[8*i:]))
			}
			return out, nil
		case !t.HasRawData && len(t.Int64Data) == n:
			return slices.Clone(t.Int64Data), nil
		}
	}
	f64, err := t.Float64s()
	if err != nil {
		return nil, err
	}
	out := make([]int64, len(f64))
	for i, x := range f64 {
		out[i] = int64(x)
	}
	return out, nil
}

// weightLoader materialises initializers, reading or generating the data
// of those stored in external files according to the weights mode.
type weightLoader struct {
	dir    string
	mode   WeightsMode
	seed   uint64
	report *LoadReport
	// bounds are the ranges generated weights are drawn from, by
	// initializer name (see randomBounds).
	bounds map[string]float32
	// present caches whether an external file exists, by location.
	present map[string]bool
	// mem counts every initializer against the memory budget before its
	// data is read, converted or generated.
	mem *budget.Meter
}

// load returns the initializer as a constant value.
func (w *weightLoader) load(t *onnx.Tensor) (*value, error) {
	shape, err := tensorShape(t)
	if err != nil {
		return nil, err
	}
	if err := reserve(w.mem, fmt.Sprintf("initializer %q", t.Name), shape, isIntegerType(t.DataType), false); err != nil {
		return nil, err
	}
	if t.DataLocation != onnx.LocationExternal {
		return constantFromTensor(t.Name, t)
	}
	loc, _ := t.ExternalLocation("location")
	generate, err := w.shouldGenerate(loc)
	if err != nil {
		return nil, fmt.Errorf("initializer %q: %w", t.Name, err)
	}
	if generate {
		return w.generate(t, loc)
	}
	// LoadExternal stores the data in the tensor; work on a copy so that
	// the caller's model is left as it was.
	local := *t
	if err := local.LoadExternal(w.dir); err != nil {
		return nil, err
	}
	w.noteFile(filepath.Join(w.dir, loc))
	return constantFromTensor(t.Name, &local)
}

// shouldGenerate decides, for one external location, whether its data is
// generated.
func (w *weightLoader) shouldGenerate(loc string) (bool, error) {
	switch w.mode {
	case WeightsRandom:
		return true, nil
	case WeightsFile:
		return false, nil
	}
	if present, ok := w.present[loc]; ok {
		return !present, nil
	}
	_, err := os.Stat(filepath.Join(w.dir, loc))
	switch {
	case err == nil:
		w.present[loc] = true
	case errors.Is(err, fs.ErrNotExist):
		w.present[loc] = false
	default:
		return false, fmt.Errorf("external data %q: %w", loc, err)
	}
	return !w.present[loc], nil
}

// generate fills a float initializer from the seed. Integer initializers
// (shapes, axes) cannot be made up.
func (w *weightLoader) generate(t *onnx.Tensor, loc string) (*value, error) {
	if isIntegerType(t.DataType) || t.DataType == onnx.String {
		return nil, fmt.Errorf("initializer %q (%s) is stored in %q, which is not read in weights mode %q, and %s data cannot be generated",
			t.Name, t.DataType, loc, w.mode, t.DataType)
	}
	shape, err := tensorShape(t)
	if err != nil {
		return nil, err
	}
	bound, ok := w.bounds[t.Name]
	if !ok {
		bound = defaultRandomBound
	}
	v := &value{name: t.Name, shape: shape, konst: NewTensor(shape...)}
	fillUniform(v.konst.Data, streamSeed(w.seed, t.Name), bound)
	w.report.RandomWeights = append(w.report.RandomWeights, t.Name)
	return v, nil
}

func (w *weightLoader) noteFile(path string) {
	for _, f := range strings.Split(w.report.WeightsFile, ", ") {
		if f == path {
			return
		}
	}
	if w.report.WeightsFile != "" {
		w.report.WeightsFile += ", "
	}
	w.report.WeightsFile += path
}

// defaultRandomBound is the range of generated tensors that are not the
// weights of a Conv, Gemm or MatMul: biases, normalisation scales and
// shifts. Small, so that they perturb without dominating.
const defaultRandomBound = 0.1

// randomBounds picks, for each initializer that is the weight operand of a
// Conv, Gemm or MatMul, the bound sqrt(6/fan_in) of He's uniform
// initialisation. Its variance 2/fan_in keeps activations at a steady
// scale through ReLU layers, which matters because the exported networks
// have their batch normalisation folded into the convolutions: smaller
// ranges shrink activations towards denormals over 50 layers, larger ones
// overflow. Initializers reached through Identity count as used directly.
func randomBounds(g *onnx.Graph) map[string]float32 {
	dims := map[string][]int64{}
	for _, t := range g.Initializers {
		dims[t.Name] = t.Dims
	}
	source := map[string]string{} // Identity output -> initializer
	for _, n := range g.Nodes {
		if n.OpType == "Identity" && len(n.Inputs) == 1 && len(n.Outputs) == 1 {
			if _, ok := dims[n.Inputs[0]]; ok {
				source[n.Outputs[0]] = n.Inputs[0]
			}
		}
	}
	bounds := map[string]float32{}
	for _, n := range g.Nodes {
		if len(n.Inputs) < 2 {
			continue
		}
		name := n.Inputs[1]
		if s, ok := source[name]; ok {
			name = s
		}
		d, ok := dims[name]
		if !ok {
			continue
		}
		if fanIn := weightFanIn(n, d); fanIn > 0 {
			bounds[name] = float32(math.Sqrt(6 / float64(fanIn)))
		}
	}
	return bounds
}

// weightFanIn is the number of inputs that each output of a Conv, Gemm or
// MatMul sums over, given the shape of its second operand; 0 when the node
// is none of these.
func weightFanIn(n *onnx.Node, d []int64) int64 {
	switch {
	case n.OpType == "Conv" && len(d) >= 2:
		fan := int64(1)
		for _, x := range d[1:] {
			fan *= x
		}
		return fan
	case n.OpType == "Gemm" && len(d) == 2:
		if a := n.Attr("transB"); a != nil && a.I != 0 {
			return d[1]
		}
		return d[0]
	case n.OpType == "MatMul" && len(d) >= 2:
		return d[len(d)-2]
	case n.OpType == "MatMul" && len(d) == 1:
		return d[0]
	}
	return 0
}

// EmbedRandomWeights replaces the data of every float initializer that m
// stores in an external file with the values Load generates for it in
// WeightsRandom mode with the same seed, stored inline. Another runtime
// (ONNX Runtime, for the side-by-side latency of BENCHMARKS.md) then runs
// the model with exactly the weights this one does, without the file.
func EmbedRandomWeights(m *onnx.Model, seed uint64) error {
	if m.Graph == nil {
		return fmt.Errorf("runtime: the model has no graph")
	}
	w := &weightLoader{mode: WeightsRandom, seed: seed, report: &LoadReport{},
		bounds: randomBounds(m.Graph), present: map[string]bool{}}
	for _, t := range m.Graph.Initializers {
		if t.DataLocation != onnx.LocationExternal {
			continue
		}
		loc, _ := t.ExternalLocation("location")
		v, err := w.generate(t, loc)
		if err != nil {
			return fmt.Errorf("runtime: %w", err)
		}
		raw := make([]byte, 4*len(v.konst.Data))
		for i, x := range v.konst.Data {
			binary.LittleEndian.PutUint32(raw[4*i:], math.Float32bits(x))
		}
		t.DataType = onnx.Float
		t.RawData, t.HasRawData = raw, true
		t.ExternalData, t.DataLocation = nil, onnx.LocationDefault
	}
	return nil
}
