// Package onnx decodes and encodes the parts of the ONNX protobuf format
// that the project needs: models and serialized tensors. It reads the wire
// format directly with protowire, without generated code. Malformed input
// yields a *DecodeError naming the field path and the byte offset, and the
// decoder never panics. docs/runtime.md ("The ONNX codec") tells the rest.
package onnx

import (
	"errors"
	"fmt"
	"strconv"

	"google.golang.org/protobuf/encoding/protowire"

	"rulebook/internal/infile"
)

// Model is an ONNX ModelProto.
type Model struct {
	IRVersion       int64
	OpsetImports    []OperatorSetID
	ProducerName    string
	ProducerVersion string
	Domain          string
	ModelVersion    int64
	DocString       string
	// Graph is nil when the model has no graph field.
	Graph *Graph
	// Configurations are the device configurations a multi-device model
	// is sharded over (IR version 11; written, not read).
	Configurations []DeviceConfiguration
}

// DeviceConfiguration is a DeviceConfigurationProto: a named group of
// devices.
type DeviceConfiguration struct {
	Name       string
	NumDevices int32
	Devices    []string
}

// NodeDeviceConfiguration is a NodeDeviceConfigurationProto: how one node
// is laid out on a model's device configuration.
type NodeDeviceConfiguration struct {
	ConfigurationID string
	Shardings       []ShardingSpec
	PipelineStage   int32
}

// ShardingSpec is a ShardingSpecProto: how one of a node's tensors is cut
// over devices (indices into the configuration's devices).
type ShardingSpec struct {
	TensorName string
	// Devices holds one entry per shard, row-major over ShardedDims: a
	// device index, or the key of a DeviceGroups entry when the shard is
	// replicated on several devices.
	Devices      []int64
	DeviceGroups []DeviceGroup
	ShardedDims  []ShardedDim
}

// DeviceGroup is an IntIntListEntryProto of index_to_device_group_map: the
// devices a key in ShardingSpec.Devices stands for.
type DeviceGroup struct {
	Key     int64
	Devices []int64
}

// ShardedDim is a ShardedDimProto: one axis cut into NumShards equal
// pieces of a dimension of size DimValue (or named DimParam).
type ShardedDim struct {
	Axis      int64
	DimValue  int64
	DimParam  string
	NumShards int64
	// Outer, where a reshape fused outer axes into this one, are their
	// levels, outermost first (one SimpleShardedDimProto each, before the
	// one DimValue and NumShards make): an axis of 3·64 whose 64 is cut
	// in two within each of the 3 blocks is Outer {3, 1}, then 64 in 2.
	Outer []SimpleShardedDim
}

// SimpleShardedDim is one level of a ShardedDim: DimValue blocks cut into
// NumShards shards (1: every shard holds all of them).
type SimpleShardedDim struct {
	DimValue  int64
	NumShards int64
}

// OperatorSetID is an OperatorSetIdProto: an empty domain is the default
// ai.onnx operator set.
type OperatorSetID struct {
	Domain  string
	Version int64
}

// Opset returns the imported version of a domain ("" or "ai.onnx" for the
// default domain) and whether the model imports it.
func (m *Model) Opset(domain string) (int64, bool) {
	norm := func(d string) string {
		if d == "ai.onnx" {
			return ""
		}
		return d
	}
	for _, o := range m.OpsetImports {
		if norm(o.Domain) == norm(domain) {
			return o.Version, true
		}
	}
	return 0, false
}

// Graph is an ONNX GraphProto.
type Graph struct {
	Name         string
	Nodes        []*Node
	Initializers []*Tensor
	Inputs       []*ValueInfo
	Outputs      []*ValueInfo
	ValueInfo    []*ValueInfo
}

// Initializer returns the initializer with the given name, or nil.
func (g *Graph) Initializer(name string) *Tensor {
	for _, t := range g.Initializers {
		if t.Name == name {
			return t
		}
	}
	return nil
}

// Node is an ONNX NodeProto. Inputs may contain empty names for omitted
// optional inputs.
type Node struct {
	Name       string
	OpType     string
	Domain     string
	Inputs     []string
	Outputs    []string
	Attributes []*Attribute
	// DeviceConfigurations lay the node out on the model's device
	// configurations (IR version 11; written, not read).
	DeviceConfigurations []NodeDeviceConfiguration
}

// Attr returns the attribute with the given name, or nil.
func (n *Node) Attr(name string) *Attribute {
	for _, a := range n.Attributes {
		if a.Name == name {
			return a
		}
	}
	return nil
}

// AttrInts returns the ints of the attribute with the given name, as
// ints, or nil when the node has none.
func (n *Node) AttrInts(name string) []int {
	a := n.Attr(name)
	if a == nil {
		return nil
	}
	out := make([]int, len(a.Ints))
	for i, v := range a.Ints {
		out[i] = int(v)
	}
	return out
}

// AttrString returns the string attribute with the given name, or def.
func (n *Node) AttrString(name, def string) string {
	if a := n.Attr(name); a != nil {
		return a.S
	}
	return def
}

// AttributeType is AttributeProto.AttributeType.
type AttributeType int32

// Attribute types.
const (
	AttrUndefined     AttributeType = 0
	AttrFloat         AttributeType = 1
	AttrInt           AttributeType = 2
	AttrString        AttributeType = 3
	AttrTensor        AttributeType = 4
	AttrGraph         AttributeType = 5
	AttrFloats        AttributeType = 6
	AttrInts          AttributeType = 7
	AttrStrings       AttributeType = 8
	AttrTensors       AttributeType = 9
	AttrGraphs        AttributeType = 10
	AttrSparseTensor  AttributeType = 11
	AttrSparseTensors AttributeType = 12
)

var attrTypeNames = map[AttributeType]string{
	AttrUndefined: "UNDEFINED", AttrFloat: "FLOAT", AttrInt: "INT", AttrString: "STRING",
	AttrTensor: "TENSOR", AttrGraph: "GRAPH", AttrFloats: "FLOATS", AttrInts: "INTS",
	AttrStrings: "STRINGS", AttrTensors: "TENSORS", AttrGraphs: "GRAPHS",
	AttrSparseTensor: "SPARSE_TENSOR", AttrSparseTensors: "SPARSE_TENSORS",
}

func (t AttributeType) String() string {
	if s, ok := attrTypeNames[t]; ok {
		return s
	}
	return "AttributeType(" + strconv.Itoa(int(t)) + ")"
}

// Attribute is an ONNX AttributeProto. Only the field named by Type is
// meaningful; graph-valued attributes are recognised by Type but their
// subgraphs are not decoded.
type Attribute struct {
	Name    string
	Type    AttributeType
	F       float32
	I       int64
	S       string
	T       *Tensor
	Floats  []float32
	Ints    []int64
	Strings []string
}

// DataType is TensorProto.DataType.
type DataType int32

// Tensor element types.
const (
	Undefined  DataType = 0
	Float      DataType = 1
	Uint8      DataType = 2
	Int8       DataType = 3
	Uint16     DataType = 4
	Int16      DataType = 5
	Int32      DataType = 6
	Int64      DataType = 7
	String     DataType = 8
	Bool       DataType = 9
	Float16    DataType = 10
	Double     DataType = 11
	Uint32     DataType = 12
	Uint64     DataType = 13
	Complex64  DataType = 14
	Complex128 DataType = 15
	BFloat16   DataType = 16
)

var dataTypeNames = map[DataType]string{
	Undefined: "UNDEFINED", Float: "FLOAT", Uint8: "UINT8", Int8: "INT8", Uint16: "UINT16",
	Int16: "INT16", Int32: "INT32", Int64: "INT64", String: "STRING", Bool: "BOOL",
	Float16: "FLOAT16", Double: "DOUBLE", Uint32: "UINT32", Uint64: "UINT64",
	Complex64: "COMPLEX64", Complex128: "COMPLEX128", BFloat16: "BFLOAT16",
}

// String returns the upper-case name used in onnx.proto, e.g. "FLOAT".
func (d DataType) String() string {
	if s, ok := dataTypeNames[d]; ok {
		return s
	}
	return "DataType(" + strconv.Itoa(int(d)) + ")"
}

// Data locations.
const (
	LocationDefault  int32 = 0
	LocationExternal int32 = 1
)

// Tensor is an ONNX TensorProto. RawData may share memory with the buffer
// it was decoded from.
type Tensor struct {
	Name     string
	Dims     []int64
	DataType DataType
	// Exactly one of the data fields is normally set.
	FloatData  []float32
	Int32Data  []int32
	Int64Data  []int64
	DoubleData []float64
	Uint64Data []uint64
	RawData    []byte
	// HasRawData distinguishes an empty raw_data field from an absent one.
	HasRawData   bool
	ExternalData []StringStringEntry
	DataLocation int32
}

// StringStringEntry is a StringStringEntryProto.
type StringStringEntry struct {
	Key, Value string
}

// ValueInfo is an ONNX ValueInfoProto. Only tensor types are described:
// for other types (sequence, map) IsTensor is false.
type ValueInfo struct {
	Name     string
	IsTensor bool
	ElemType DataType
	// HasShape distinguishes a scalar (known, empty shape) from an unknown
	// shape.
	HasShape bool
	Shape    []Dim
}

// Dim is one TensorShapeProto.Dimension: a concrete Value, a symbolic Param,
// or neither (unknown).
type Dim struct {
	Value    int64
	Param    string
	HasValue bool
}

func (d Dim) String() string {
	switch {
	case d.HasValue:
		return strconv.FormatInt(d.Value, 10)
	case d.Param != "":
		return d.Param
	}
	return "?"
}

// DecodeError reports malformed input: the file (when known), the field
// path within the message (e.g. "graph.node[3].attribute[1]") and the
// absolute byte offset where decoding failed.
type DecodeError struct {
	File   string
	Path   string
	Offset int
	Msg    string
}

func (e *DecodeError) Error() string {
	s := "onnx: "
	if e.File != "" {
		s += e.File + ": "
	}
	if e.Path != "" {
		s += e.Path + ": "
	}
	return s + fmt.Sprintf("%s at byte %d", e.Msg, e.Offset)
}

// DecodeModel decodes a serialized ModelProto. The model may share memory
// with b.
func DecodeModel(b []byte) (*Model, error) {
	m := &Model{}
	if err := decodeModel(b, m); err != nil {
		return nil, err
	}
	return m, nil
}

// DecodeTensor decodes a serialized TensorProto, the format of ONNX test
// data files. The tensor may share memory with b.
func DecodeTensor(b []byte) (*Tensor, error) {
	t := &Tensor{}
	if err := decodeTensor(b, 0, "", t); err != nil {
		return nil, err
	}
	return t, nil
}

// ErrNotModel is matched (errors.Is) by ReadModel's error for a file that
// is not an ONNX model at all, such as a text file.
var ErrNotModel = errors.New("not an ONNX model")

// NotModelError names a file that is not an ONNX model and says why.
type NotModelError struct{ File, Why string }

func (e *NotModelError) Error() string {
	return fmt.Sprintf("onnx: %s is not an ONNX model: %s", e.File, e.Why)
}

func (e *NotModelError) Unwrap() error { return ErrNotModel }

// ReadModel reads and decodes a model file, through the input layer (a
// regular file of at most 2 GiB, protobuf's own limit). A file that does
// not even begin like a model is reported as not an ONNX model rather
// than with the first protobuf field it breaks.
func ReadModel(path string) (*Model, error) {
	b, err := infile.ReadFile(path, infile.Model)
	if err != nil {
		return nil, fmt.Errorf("onnx: %w", err)
	}
	if why := notModel(b); why != "" {
		return nil, &NotModelError{path, why}
	}
	m, err := DecodeModel(b)
	if err != nil {
		return nil, withFile(err, path)
	}
	if m.Graph == nil {
		return nil, &NotModelError{path, "it has no graph"}
	}
	return m, nil
}

// notModel says why b cannot be a serialized ModelProto, judging by its
// first field, or "" when it may be one. Every writer puts ir_version
// (field 1) first; a model's fields are varints and length-delimited
// bytes only, so a text file (whose first byte reads as some other field
// or wire type) fails here.
func notModel(b []byte) string {
	if len(b) == 0 {
		return "the file is empty"
	}
	tag, n := protowire.ConsumeVarint(b)
	if n < 0 {
		return "its first bytes are not a protobuf field"
	}
	num, typ := protowire.DecodeTag(tag)
	name, known := modelFields[num]
	switch {
	case !known:
		return fmt.Sprintf("its first bytes are not a ModelProto field (field %d)", num)
	case typ != protowire.VarintType && typ != protowire.BytesType:
		return fmt.Sprintf("its first bytes are not a ModelProto field (%s with wire type %d)", name, typ)
	}
	return ""
}

// ReadTensor reads and decodes a serialized tensor file, through the
// input layer (a regular file of at most 2 GiB).
func ReadTensor(path string) (*Tensor, error) {
	b, err := infile.ReadFile(path, infile.Tensor)
	if err != nil {
		return nil, fmt.Errorf("onnx: %w", err)
	}
	t, err := DecodeTensor(b)
	if err != nil {
		return nil, withFile(err, path)
	}
	return t, nil
}

func withFile(err error, path string) error {
	if de, ok := err.(*DecodeError); ok {
		de.File = path
		return de
	}
	return fmt.Errorf("onnx: %s: %w", path, err)
}
