package runtime

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"

	"rulebook/onnx"
)

// ONNX returns the model this one was built from with the data of every
// initializer embedded, as this model holds it: read from the file or the
// weights file, or generated from the seed. Another runtime given it
// therefore computes with exactly the weights this one does, which a
// model whose weights file is absent could not otherwise share. The
// result shares its nodes with the model; the caller must not modify it.
func (m *Model) ONNX() (*onnx.Model, error) {
	if m.src == nil {
		return nil, fmt.Errorf("runtime: ONNX: the model was not built from a decoded ONNX model")
	}
	byName := make(map[string]*value, len(m.values))
	for _, v := range m.values {
		byName[v.name] = v
	}
	out := *m.src
	g := *m.src.Graph
	g.Initializers = make([]*onnx.Tensor, len(m.src.Graph.Initializers))
	for i, t := range m.src.Graph.Initializers {
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

// structure copies what ONNX and NodeModel need of a decoded model: the
// graph, its initializers without their data (the model's values hold
// it), and node attributes' tensors copied out of the buffer the model was
// decoded from, whose raw data may alias it. The file's buffer is thus not
// kept alive as long as the model, nor its weights held twice.
func structure(m *onnx.Model) *onnx.Model {
	out := *m
	g := *m.Graph
	g.Initializers = make([]*onnx.Tensor, len(m.Graph.Initializers))
	for i, t := range m.Graph.Initializers {
		g.Initializers[i] = &onnx.Tensor{Name: t.Name, Dims: t.Dims, DataType: t.DataType}
	}
	g.Nodes = make([]*onnx.Node, len(m.Graph.Nodes))
	for i, n := range m.Graph.Nodes {
		c := *n
		c.Attributes = make([]*onnx.Attribute, len(n.Attributes))
		for k, a := range n.Attributes {
			ca := *a
			if a.T != nil {
				t := *a.T
				t.RawData = slices.Clone(a.T.RawData)
				ca.T = &t
			}
			c.Attributes[k] = &ca
		}
		g.Nodes[i] = &c
	}
	out.Graph = &g
	return &out
}

// embedTensor writes a constant value as an inline tensor of element type
// dt. Integer data comes from the exact elements, float data from what
// the runtime computes with (float32, whatever the file's precision);
// float16 and strings cannot be written back.
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
		t.DoubleData = convertAll(v.konst.Data, func(x float32) float64 { return float64(x) })
	case dt == onnx.Bool:
		// TensorProto keeps booleans, and the integers narrower than 64
		// bits, in int32_data.
		t.Int32Data = convertAll(v.konst.Data, func(x float32) int32 {
			if x != 0 {
				return 1
			}
			return 0
		})
	case v.ints == nil:
		return nil, fmt.Errorf("initializer %q: %s data cannot be embedded", name, dt)
	case dt == onnx.Int64:
		t.Int64Data = slices.Clone(v.ints)
	case dt == onnx.Uint32 || dt == onnx.Uint64:
		t.Uint64Data = convertAll(v.ints, func(x int64) uint64 { return uint64(x) })
	case isIntegerType(dt):
		t.Int32Data = convertAll(v.ints, func(x int64) int32 { return int32(x) })
	default:
		return nil, fmt.Errorf("initializer %q: %s data cannot be embedded", name, dt)
	}
	return t, nil
}

func convertAll[From, To any](xs []From, f func(From) To) []To {
	out := make([]To, len(xs))
	for i, x := range xs {
		out[i] = f(x)
	}
	return out
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
	if m.src == nil {
		return nil, nil, fmt.Errorf("runtime: NodeModel: the model was not built from a decoded ONNX model")
	}
	src := m.src.Graph.Nodes[n.src]
	g := &onnx.Graph{Name: n.op, Nodes: []*onnx.Node{src}}
	feeds := map[string]*Tensor{}
	in := m.nodeInputs(i)
	for j, id := range n.in {
		name := src.Inputs[j]
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
	for _, name := range src.Outputs {
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
