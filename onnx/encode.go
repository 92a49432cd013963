package onnx

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"

	"google.golang.org/protobuf/encoding/protowire"

	"rulebook/internal/outfile"
)

// The encoder is the inverse of the decoder: it writes every field the
// decoder keeps, with the field numbers of onnx/onnx.proto, so that
// DecodeModel(EncodeModel(m)) reproduces a decoded model exactly. Fields are
// written in field-number order, as the reference protobuf implementations
// do; scalars equal to their zero value are omitted (the decoder reads an
// absent scalar as zero), except an attribute's value field named by its
// type, which is written even when zero so that readers that check field
// presence find it. Repeated numeric fields are packed. The output depends
// only on the structure, so encoding is deterministic.

// EncodeModel serialises a model as an ONNX ModelProto.
func EncodeModel(m *Model) []byte {
	if m == nil {
		return nil
	}
	return appendModel(nil, m)
}

// EncodeTensor serialises a tensor as an ONNX TensorProto, the format of the
// input_N.pb / output_N.pb files of ONNX test data sets.
func EncodeTensor(t *Tensor) []byte {
	if t == nil {
		return nil
	}
	return appendTensor(nil, t)
}

// WriteModel encodes a model and writes it to path through
// outfile.Write: the bytes go to a temporary file in the same directory,
// which is synced and then renamed over path, so an existing file is
// either left as it was or replaced whole. Only a regular file or a new
// name is written; a new file gets mode 0644, a replaced file keeps its
// permissions.
func WriteModel(path string, m *Model) error {
	if m == nil {
		return fmt.Errorf("onnx: write %s: nil model", path)
	}
	b := EncodeModel(m)
	return outfile.Write(path, func(w io.Writer) error {
		_, err := w.Write(b)
		return err
	})
}

// ---- wire helpers ----

func appendVarintField(b []byte, num protowire.Number, v uint64) []byte {
	b = protowire.AppendTag(b, num, protowire.VarintType)
	return protowire.AppendVarint(b, v)
}

func appendStringField(b []byte, num protowire.Number, s string) []byte {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendString(b, s)
}

// appendMessage writes a length-delimited field whose value body appends.
// The length is not known in advance: one byte is reserved for it, which
// suffices for bodies under 128 bytes, and the body is shifted when the
// length needs more.
func appendMessage(b []byte, num protowire.Number, body func([]byte) []byte) []byte {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	start := len(b)
	b = append(b, 0)
	b = body(b)
	n := len(b) - start - 1
	size := protowire.SizeVarint(uint64(n))
	if size > 1 {
		b = append(b, make([]byte, size-1)...)
		copy(b[start+size:], b[start+1:start+1+n])
	}
	// Protobuf varints are the unsigned LEB128 of encoding/binary.
	binary.PutUvarint(b[start:start+size], uint64(n))
	return b
}

// appendPackedVarints writes a packed repeated varint field; nothing when vs
// is empty.
func appendPackedVarints[T any](b []byte, num protowire.Number, vs []T, conv func(T) uint64) []byte {
	if len(vs) == 0 {
		return b
	}
	n := 0
	for _, v := range vs {
		n += protowire.SizeVarint(conv(v))
	}
	b = protowire.AppendTag(b, num, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(n))
	for _, v := range vs {
		b = protowire.AppendVarint(b, conv(v))
	}
	return b
}

func appendPackedFloat32s(b []byte, num protowire.Number, vs []float32) []byte {
	if len(vs) == 0 {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(4*len(vs)))
	for _, v := range vs {
		b = protowire.AppendFixed32(b, math.Float32bits(v))
	}
	return b
}

func appendPackedFloat64s(b []byte, num protowire.Number, vs []float64) []byte {
	if len(vs) == 0 {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(8*len(vs)))
	for _, v := range vs {
		b = protowire.AppendFixed64(b, math.Float64bits(v))
	}
	return b
}

// Signed values are sign-extended to 64 bits, as protobuf encodes int32 and
// enum fields.
func fromInt64(v int64) uint64   { return uint64(v) }
func fromInt32(v int32) uint64   { return uint64(int64(v)) }
func fromUint64(v uint64) uint64 { return v }

// ---- messages ----

func appendModel(b []byte, m *Model) []byte {
	if m.IRVersion != 0 {
		b = appendVarintField(b, 1, fromInt64(m.IRVersion))
	}
	if m.ProducerName != "" {
		b = appendStringField(b, 2, m.ProducerName)
	}
	if m.ProducerVersion != "" {
		b = appendStringField(b, 3, m.ProducerVersion)
	}
	if m.Domain != "" {
		b = appendStringField(b, 4, m.Domain)
	}
	if m.ModelVersion != 0 {
		b = appendVarintField(b, 5, fromInt64(m.ModelVersion))
	}
	if m.DocString != "" {
		b = appendStringField(b, 6, m.DocString)
	}
	if m.Graph != nil {
		b = appendMessage(b, 7, func(b []byte) []byte { return appendGraph(b, m.Graph) })
	}
	for i := range m.OpsetImports {
		o := &m.OpsetImports[i]
		b = appendMessage(b, 8, func(b []byte) []byte {
			if o.Domain != "" {
				b = appendStringField(b, 1, o.Domain)
			}
			if o.Version != 0 {
				b = appendVarintField(b, 2, fromInt64(o.Version))
			}
			return b
		})
	}
	for _, c := range m.Configurations {
		b = appendMessage(b, 26, func(b []byte) []byte {
			b = appendStringField(b, 1, c.Name)
			b = appendVarintField(b, 2, fromInt32(c.NumDevices))
			for _, d := range c.Devices {
				b = appendStringField(b, 3, d)
			}
			return b
		})
	}
	return b
}

// appendNodeDeviceConfiguration writes a NodeDeviceConfigurationProto with
// its ShardingSpecProtos (ShardedDimProto holding one
// SimpleShardedDimProto per axis).
func appendNodeDeviceConfiguration(b []byte, c NodeDeviceConfiguration) []byte {
	b = appendStringField(b, 1, c.ConfigurationID)
	for _, s := range c.Shardings {
		b = appendMessage(b, 2, func(b []byte) []byte {
			b = appendStringField(b, 1, s.TensorName)
			b = appendPackedVarints(b, 2, s.Devices, fromInt64)
			for _, g := range s.DeviceGroups {
				b = appendMessage(b, 3, func(b []byte) []byte {
					b = appendVarintField(b, 1, fromInt64(g.Key))
					return appendPackedVarints(b, 2, g.Devices, fromInt64)
				})
			}
			for _, d := range s.ShardedDims {
				b = appendMessage(b, 4, func(b []byte) []byte {
					b = appendVarintField(b, 1, fromInt64(d.Axis))
					for _, o := range d.Outer {
						b = appendMessage(b, 2, func(b []byte) []byte {
							b = appendVarintField(b, 1, fromInt64(o.DimValue))
							return appendVarintField(b, 3, fromInt64(o.NumShards))
						})
					}
					return appendMessage(b, 2, func(b []byte) []byte {
						if d.DimParam != "" {
							b = appendStringField(b, 2, d.DimParam)
						} else {
							b = appendVarintField(b, 1, fromInt64(d.DimValue))
						}
						return appendVarintField(b, 3, fromInt64(d.NumShards))
					})
				})
			}
			return b
		})
	}
	if c.PipelineStage != 0 {
		b = appendVarintField(b, 3, fromInt32(c.PipelineStage))
	}
	return b
}

func appendGraph(b []byte, g *Graph) []byte {
	for _, n := range g.Nodes {
		b = appendMessage(b, 1, func(b []byte) []byte { return appendNode(b, n) })
	}
	if g.Name != "" {
		b = appendStringField(b, 2, g.Name)
	}
	for _, t := range g.Initializers {
		b = appendMessage(b, 5, func(b []byte) []byte { return appendTensor(b, t) })
	}
	for _, list := range []struct {
		num protowire.Number
		vis []*ValueInfo
	}{{11, g.Inputs}, {12, g.Outputs}, {13, g.ValueInfo}} {
		for _, v := range list.vis {
			b = appendMessage(b, list.num, func(b []byte) []byte { return appendValueInfo(b, v) })
		}
	}
	return b
}

func appendNode(b []byte, n *Node) []byte {
	// Empty input names mark omitted optional inputs and are kept.
	for _, s := range n.Inputs {
		b = appendStringField(b, 1, s)
	}
	for _, s := range n.Outputs {
		b = appendStringField(b, 2, s)
	}
	if n.Name != "" {
		b = appendStringField(b, 3, n.Name)
	}
	if n.OpType != "" {
		b = appendStringField(b, 4, n.OpType)
	}
	for _, a := range n.Attributes {
		b = appendMessage(b, 5, func(b []byte) []byte { return appendAttribute(b, a) })
	}
	if n.Domain != "" {
		b = appendStringField(b, 7, n.Domain)
	}
	for _, c := range n.DeviceConfigurations {
		b = appendMessage(b, 10, func(b []byte) []byte { return appendNodeDeviceConfiguration(b, c) })
	}
	return b
}

func appendAttribute(b []byte, a *Attribute) []byte {
	if a.Name != "" {
		b = appendStringField(b, 1, a.Name)
	}
	// Compare bits so that -0 is kept.
	if math.Float32bits(a.F) != 0 || a.Type == AttrFloat {
		b = protowire.AppendTag(b, 2, protowire.Fixed32Type)
		b = protowire.AppendFixed32(b, math.Float32bits(a.F))
	}
	if a.I != 0 || a.Type == AttrInt {
		b = appendVarintField(b, 3, fromInt64(a.I))
	}
	if a.S != "" || a.Type == AttrString {
		b = appendStringField(b, 4, a.S)
	}
	if a.T != nil {
		b = appendMessage(b, 5, func(b []byte) []byte { return appendTensor(b, a.T) })
	}
	b = appendPackedFloat32s(b, 7, a.Floats)
	b = appendPackedVarints(b, 8, a.Ints, fromInt64)
	for _, s := range a.Strings {
		b = appendStringField(b, 9, s)
	}
	if a.Type != AttrUndefined {
		b = appendVarintField(b, 20, fromInt32(int32(a.Type)))
	}
	return b
}

func appendTensor(b []byte, t *Tensor) []byte {
	b = appendPackedVarints(b, 1, t.Dims, fromInt64)
	if t.DataType != Undefined {
		b = appendVarintField(b, 2, fromInt32(int32(t.DataType)))
	}
	b = appendPackedFloat32s(b, 4, t.FloatData)
	b = appendPackedVarints(b, 5, t.Int32Data, fromInt32)
	b = appendPackedVarints(b, 7, t.Int64Data, fromInt64)
	if t.Name != "" {
		b = appendStringField(b, 8, t.Name)
	}
	// An empty raw_data that is present is kept: it says the tensor has
	// no elements, where an absent one sends readers to the typed fields.
	if t.HasRawData || len(t.RawData) > 0 {
		b = protowire.AppendTag(b, 9, protowire.BytesType)
		b = protowire.AppendBytes(b, t.RawData)
	}
	b = appendPackedFloat64s(b, 10, t.DoubleData)
	b = appendPackedVarints(b, 11, t.Uint64Data, fromUint64)
	for i := range t.ExternalData {
		e := &t.ExternalData[i]
		b = appendMessage(b, 13, func(b []byte) []byte {
			if e.Key != "" {
				b = appendStringField(b, 1, e.Key)
			}
			if e.Value != "" {
				b = appendStringField(b, 2, e.Value)
			}
			return b
		})
	}
	if t.DataLocation != LocationDefault {
		b = appendVarintField(b, 14, fromInt32(t.DataLocation))
	}
	return b
}

// appendValueInfo writes a ValueInfoProto. The decoder describes tensor
// types only, so a value that is not a tensor gets no type field. A tensor
// type is written when IsTensor is set or when any tensor-type detail is,
// so that hand-built values do not lose their element type or shape.
func appendValueInfo(b []byte, v *ValueInfo) []byte {
	if v.Name != "" {
		b = appendStringField(b, 1, v.Name)
	}
	hasShape := v.HasShape || len(v.Shape) > 0
	if !v.IsTensor && v.ElemType == Undefined && !hasShape {
		return b
	}
	// TypeProto { tensor_type { elem_type, shape { dim... } } }
	return appendMessage(b, 2, func(b []byte) []byte {
		return appendMessage(b, 1, func(b []byte) []byte {
			if v.ElemType != Undefined {
				b = appendVarintField(b, 1, fromInt32(int32(v.ElemType)))
			}
			if !hasShape {
				return b
			}
			// A present but empty shape is a scalar; an absent one is
			// unknown.
			return appendMessage(b, 2, func(b []byte) []byte {
				for _, d := range v.Shape {
					b = appendMessage(b, 1, func(b []byte) []byte { return appendDim(b, d) })
				}
				return b
			})
		})
	})
}

// appendDim writes a TensorShapeProto.Dimension: dim_value, dim_param, or
// neither for an unknown dimension.
func appendDim(b []byte, d Dim) []byte {
	switch {
	case d.HasValue:
		return appendVarintField(b, 1, fromInt64(d.Value))
	case d.Param != "":
		return appendStringField(b, 2, d.Param)
	case d.Value != 0:
		// Inconsistent hand-built Dim: keep the value rather than drop it.
		return appendVarintField(b, 1, fromInt64(d.Value))
	}
	return b
}
