package runtime

import (
	"slices"
	"strconv"
	"strings"

	"rulebook/internal/budget"
	"rulebook/onnx"
)

// WeightsMode says where initializer data stored in an external file comes
// from.
type WeightsMode string

// Weights modes.
const (
	// WeightsAuto reads the external file when it is present and otherwise
	// generates the data; LoadReport lists what was generated.
	WeightsAuto WeightsMode = "auto"
	// WeightsFile requires the external file: a missing one is an error.
	WeightsFile WeightsMode = "file"
	// WeightsRandom never reads external files: externally stored
	// initializers are generated. Data stored inside the model file is
	// always used, since it may carry structure (shapes, epsilons).
	WeightsRandom WeightsMode = "random"
)

// LoadOptions steers Load and FromONNX.
type LoadOptions struct {
	// Weights is WeightsAuto when empty.
	Weights WeightsMode
	// Seed seeds generated weights.
	Seed uint64
	// Dims gives values to symbolic input dimensions, e.g. {"batch": 1}.
	Dims map[string]int
	// Memory bounds what the model's declared sizes may allocate: its
	// constants and inputs at load, and a session's buffers. The zero
	// value is the machine's default (budget.Default).
	Memory budget.Budget
}

// LoadReport says how a model was loaded.
type LoadReport struct {
	// RandomWeights names the initializers whose data was generated, in
	// graph order; empty when none was.
	RandomWeights []string
	// WeightsFile is the external data file used, if any (several are
	// joined with ", ").
	WeightsFile string
	// Opset is the imported version of the default ONNX domain.
	Opset int64
	// UnusedDims are the names of LoadOptions.Dims that no input has as a
	// symbolic dimension, sorted: a command refuses them, since a value
	// the user gave for nothing is a mistake the user should hear of.
	UnusedDims []string
}

// ValueInfo names a model input or output and gives its shape.
type ValueInfo struct {
	Name  string
	Shape []int
}

// NodeInfo describes one operator application, for cost tables.
type NodeInfo struct {
	Index int
	// Op is the ONNX op type.
	Op   string
	Name string
	// Inputs are the input shapes; an omitted optional input is nil.
	Inputs  [][]int
	Outputs [][]int
	// Params is a canonical, deterministic rendering of the attributes
	// that affect cost, e.g. "group=1 kernel=3x3 pads=1,1,1,1 strides=1,1".
	Params string
}

// ShapeKey renders the input and output shapes as cost tables key them:
// "1x3x224x224,64x3x7x7 -> 1x64x112x112"; an omitted optional input is
// "-" and a scalar "scalar".
func (n NodeInfo) ShapeKey() string {
	return shapeList(n.Inputs) + " -> " + shapeList(n.Outputs)
}

func shapeList(shapes [][]int) string {
	parts := make([]string, len(shapes))
	for i, s := range shapes {
		switch {
		case s == nil:
			parts[i] = "-"
		case len(s) == 0:
			parts[i] = "scalar"
		default:
			dims := make([]string, len(s))
			for k, d := range s {
				dims[k] = strconv.Itoa(d)
			}
			parts[i] = strings.Join(dims, "x")
		}
	}
	return strings.Join(parts, ",")
}

// Model is a validated, shape-inferred graph in topological order. It is
// immutable and may be shared by any number of sessions.
type Model struct {
	opset   int64
	values  []*value
	nodes   []*node
	inputs  []int // value ids of the graph inputs
	outputs []int // value ids of the graph outputs
	// outputNames are the graph output names, parallel to outputs: an
	// output may be an alias of another value (through Identity).
	outputNames []string
	// src is the structure of the decoded model this one was built from
	// (see structure): ONNX and NodeModel hand it, or one node of it, to
	// another runtime.
	src *onnx.Model
	// memory is the budget the model was loaded under, and held the bytes
	// its constants and inputs take from it; a session's buffers must fit
	// in what is left.
	memory budget.Budget
	held   uint64
}

// value is one tensor of the graph: a graph input, an initializer or
// folded constant, or a node output.
type value struct {
	name  string
	shape []int
	// konst holds the data of an initializer or folded constant.
	konst *Tensor
	// ints holds the exact elements of an integer-typed constant; such
	// constants steer shapes (Reshape's shape, Split's sizes, Pad's pads).
	ints []int64
}

func (v *value) isConst() bool { return v.konst != nil }

// node is one operator application that remains after folding.
type node struct {
	op     string
	name   string
	in     []int // value ids; -1 for an omitted optional input
	out    []int
	kernel kernel
	params string
	// src indexes the node in the file, attributes and input names
	// included, in Model.src's nodes (see Model.NodeModel).
	src int
}

// Inputs returns the graph inputs a Run needs, in graph order.
func (m *Model) Inputs() []ValueInfo {
	return m.valueInfos(m.inputs, nil)
}

// Outputs returns the graph outputs a Run produces, in graph order.
func (m *Model) Outputs() []ValueInfo {
	return m.valueInfos(m.outputs, m.outputNames)
}

func (m *Model) valueInfos(ids []int, names []string) []ValueInfo {
	out := make([]ValueInfo, len(ids))
	for i, id := range ids {
		name := m.values[id].name
		if names != nil {
			name = names[i]
		}
		out[i] = ValueInfo{Name: name, Shape: slices.Clone(m.values[id].shape)}
	}
	return out
}

// Nodes describes the nodes that remain after folding, in execution order.
func (m *Model) Nodes() []NodeInfo {
	out := make([]NodeInfo, len(m.nodes))
	for i, n := range m.nodes {
		out[i] = NodeInfo{Index: i, Op: n.op, Name: n.name, Params: n.params,
			Inputs: m.shapesOf(n.in), Outputs: m.shapesOf(n.out)}
	}
	return out
}

func (m *Model) shapesOf(ids []int) [][]int {
	shapes := make([][]int, len(ids))
	for i, id := range ids {
		if id >= 0 {
			shapes[i] = slices.Clone(m.values[id].shape)
		}
	}
	return shapes
}

// RandomInputs returns a tensor for every graph input, filled with values
// uniform in [-1, 1) drawn from seed (each input from its own stream, so
// the values do not depend on the order of the inputs).
func (m *Model) RandomInputs(seed uint64) map[string]*Tensor {
	out := make(map[string]*Tensor, len(m.inputs))
	for _, id := range m.inputs {
		v := m.values[id]
		t := NewTensor(v.shape...)
		fillUniform(t.Data, streamSeed(seed, v.name), 1)
		out[v.name] = t
	}
	return out
}
