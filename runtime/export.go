package runtime

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"

	"rulebook/onnx"
)

// ONNX returns the model this one was built from with the data of every
// externally stored initializer embedded, as this model holds it: read
// from the weights file or generated from the seed. Another runtime given
// it therefore computes with exactly the weights this one does, which a
// model whose weights file is absent could not otherwise share. The
// result shares everything but the graph's initializer list with the
// source; the caller must not modify it.
func (m *Model) ONNX() (*onnx.Model, error) {
	if m.src == nil || m.src.Graph == nil {
		return nil, fmt.Errorf("runtime: ONNX: the model was not built from a decoded ONNX model")
	}
	byName := make(map[string]*value, len(m.values))
	for _, v := range m.values {
		byName[v.name] = v
	}
	out := *m.src
	g := *m.src.Graph
	g.Initializers = slices.Clone(g.Initializers)
	for i, t := range g.Initializers {
		if t.DataLocation != onnx.LocationExternal {
			continue
		}
		v, ok := byName[t.Name]
		if !ok || !v.isConst() {
			return nil, fmt.Errorf("runtime: ONNX: initializer %q has no data in the model", t.Name)
		}
		embedded, err := embedTensor(t.Name, t.DataType, v)
		if err != nil {
			return nil, fmt.Errorf("runtime: ONNX: %w", err)
		}
		g.Initializers[i] = embedded
	}
	out.Graph = &g
	return &out, nil
}

// embedTensor writes a constant value as an inline tensor of element type
// dt. Integer data comes from the exact elements, float data from what
// the runtime computes with (float32, whatever the file's precision).
func embedTensor(name string, dt onnx.DataType, v *value) (*onnx.Tensor, error) {
	dims := make([]int64, len(v.shape))
	for i, d := range v.shape {
		dims[i] = int64(d)
	}
	t := &onnx.Tensor{Name: name, Dims: dims, DataType: dt}
	switch {
	case dt == onnx.Float:
		t.RawData, t.HasRawData = float32Bytes(v.konst.Data), true
	case dt == onnx.Double:
		t.DoubleData = make([]float64, len(v.konst.Data))
		for i, x := range v.konst.Data {
			t.DoubleData[i] = float64(x)
		}
	case dt == onnx.Int64 && v.ints != nil:
		t.Int64Data = slices.Clone(v.ints)
	case dt == onnx.Int32 && v.ints != nil:
		t.Int32Data = make([]int32, len(v.ints))
		for i, x := range v.ints {
			t.Int32Data[i] = int32(x)
		}
	case dt == onnx.Bool:
		// TensorProto keeps booleans in int32_data.
		t.Int32Data = make([]int32, len(v.konst.Data))
		for i, x := range v.konst.Data {
			if x != 0 {
				t.Int32Data[i] = 1
			}
		}
	default:
		return nil, fmt.Errorf("initializer %q: %s data cannot be embedded", name, dt)
	}
	return t, nil
}

func float32Bytes(data []float32) []byte {
	raw := make([]byte, 4*len(data))
	for i, x := range data {
		binary.LittleEndian.PutUint32(raw[4*i:], math.Float32bits(x))
	}
	return raw
}

// boolInputs are the inputs that ONNX types as booleans, by operator: the
// runtime holds them as 0 and 1 (see NodeModel).
var boolInputs = map[string][]int{"Where": {0}, "Not": {0}, "And": {0, 1}, "Or": {0, 1}, "Xor": {0, 1}}

// NodeModel returns node i of Nodes alone as an ONNX model, with the
// attributes, opset and input names of the file, and the inputs TimeNode
// runs it on: constant inputs become initializers, the others graph inputs
// whose feeds the map holds by name. Another runtime timing the model
// thus times the same configuration on the same data. Inputs are float32,
// integer constants int64, except the boolean inputs of Where, Not, And,
// Or and Xor; output types are left to the other runtime to infer.
func (m *Model) NodeModel(i int) (*onnx.Model, map[string]*Tensor, error) {
	if err := m.checkNode(i); err != nil {
		return nil, nil, err
	}
	n := m.nodes[i]
	if n.src == nil || m.src == nil {
		return nil, nil, fmt.Errorf("runtime: NodeModel: the model was not built from a decoded ONNX model")
	}
	g := &onnx.Graph{Name: n.op, Nodes: []*onnx.Node{n.src}}
	feeds := map[string]*Tensor{}
	in := m.nodeInputs(i)
	for j, id := range n.in {
		name := n.src.Inputs[j]
		if id < 0 || feeds[name] != nil || g.Initializer(name) != nil {
			continue
		}
		v := m.values[id]
		dt := nodeInputType(n.op, j, v)
		if v.isConst() {
			t, err := embedTensor(name, dt, v)
			if err != nil {
				return nil, nil, fmt.Errorf("runtime: NodeModel: node %d (%s %q): %w", i, n.op, n.name, err)
			}
			g.Initializers = append(g.Initializers, t)
			continue
		}
		g.Inputs = append(g.Inputs, &onnx.ValueInfo{Name: name, IsTensor: true, ElemType: dt, HasShape: true, Shape: onnxDims(v.shape)})
		feeds[name] = in[j]
	}
	for _, name := range n.src.Outputs {
		if name != "" {
			g.Outputs = append(g.Outputs, &onnx.ValueInfo{Name: name})
		}
	}
	out := &onnx.Model{IRVersion: m.src.IRVersion, OpsetImports: m.src.OpsetImports, ProducerName: "rulebook", Graph: g}
	return out, feeds, nil
}

// nodeInputType is the ONNX element type of input j of an op node.
func nodeInputType(op string, j int, v *value) onnx.DataType {
	switch {
	case slices.Contains(boolInputs[op], j):
		return onnx.Bool
	case v.ints != nil:
		return onnx.Int64
	}
	return onnx.Float
}

func onnxDims(shape []int) []onnx.Dim {
	dims := make([]onnx.Dim, len(shape))
	for i, d := range shape {
		dims[i] = onnx.Dim{Value: int64(d), HasValue: true}
	}
	return dims
}
