package onnx

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"

	"google.golang.org/protobuf/encoding/protowire"
)

// field is one decoded field record. Exactly the value matching typ is set.
type field struct {
	num  protowire.Number
	typ  protowire.Type
	off  int // absolute offset of the value
	u64  uint64
	data []byte
}

func errAt(path string, off int, format string, args ...any) error {
	return &DecodeError{Path: path, Offset: off, Msg: fmt.Sprintf(format, args...)}
}

// consumeVarint wraps protowire.ConsumeVarint with a precise error.
func consumeVarint(b []byte, path string, off int) (uint64, int, error) {
	v, n := protowire.ConsumeVarint(b)
	if n >= 0 {
		return v, n, nil
	}
	if len(b) < binary.MaxVarintLen64 && (len(b) == 0 || b[len(b)-1] >= 0x80) {
		return 0, 0, errAt(path, off, "truncated varint")
	}
	return 0, 0, errAt(path, off, "varint overflows 64 bits")
}

// groupProblem describes a protowire error code from skipping a group. The
// text of protowire's other errors is deliberately unstable, so it is not
// quoted.
func groupProblem(code int) string {
	switch err := protowire.ParseError(code); err {
	case io.ErrUnexpectedEOF:
		return "truncated"
	case errMismatchedEndGroup:
		return "mismatched end-group marker"
	}
	return "invalid field inside"
}

// errMismatchedEndGroup is protowire's error for a group closed by another
// field's end-group marker.
var errMismatchedEndGroup = protowire.ParseError(protowire.ConsumeFieldValue(1, protowire.StartGroupType, []byte{0x14}))

func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

func index(path, name string, i int) string {
	return fmt.Sprintf("%s[%d]", join(path, name), i)
}

// eachField walks the field records of a message that starts at absolute
// offset base. Groups (deprecated, unused by ONNX) are skipped and the
// reserved wire types are errors; fn is called for every varint, fixed and
// length-delimited field. names maps field numbers to names for error paths.
func eachField(b []byte, base int, path string, names map[protowire.Number]string, fn func(f *field) error) error {
	pos := 0
	for pos < len(b) {
		tag, n, err := consumeVarint(b[pos:], path, base+pos)
		if err != nil {
			return err
		}
		num, typ := protowire.DecodeTag(tag)
		if num < protowire.MinValidNumber || num > protowire.MaxValidNumber {
			return errAt(path, base+pos, "invalid field number %d", int64(tag>>3))
		}
		tagOff := base + pos
		pos += n
		f := field{num: num, typ: typ, off: base + pos}
		fpath := path
		if name, ok := names[num]; ok && (typ <= protowire.BytesType || typ == protowire.Fixed32Type) {
			fpath = join(path, name)
		}
		rest := b[pos:]
		switch typ {
		case protowire.VarintType:
			if f.u64, n, err = consumeVarint(rest, fpath, f.off); err != nil {
				return err
			}
		case protowire.Fixed32Type:
			var v uint32
			if v, n = protowire.ConsumeFixed32(rest); n < 0 {
				return errAt(fpath, f.off, "truncated fixed32")
			}
			f.u64 = uint64(v)
		case protowire.Fixed64Type:
			if f.u64, n = protowire.ConsumeFixed64(rest); n < 0 {
				return errAt(fpath, f.off, "truncated fixed64")
			}
		case protowire.BytesType:
			length, m, err := consumeVarint(rest, fpath, f.off)
			if err != nil {
				return err
			}
			if length > uint64(len(rest)-m) {
				return errAt(fpath, f.off, "length %d exceeds the %d bytes left", length, len(rest)-m)
			}
			f.off += m
			f.data = rest[m : m+int(length)]
			n = m + int(length)
		case protowire.StartGroupType:
			// Groups are deprecated and never used by ONNX: skip them.
			if n = protowire.ConsumeFieldValue(num, typ, rest); n < 0 {
				return errAt(path, f.off, "field %d: malformed group: %s", num, groupProblem(n))
			}
			pos += n
			continue
		case protowire.EndGroupType:
			return errAt(path, tagOff, "field %d: end-group marker without a group", num)
		default:
			return errAt(path, tagOff, "field %d: reserved wire type %d", num, typ)
		}
		pos += n
		if err := fn(&f); err != nil {
			return err
		}
	}
	return nil
}

// ---- scalar helpers ----

func (f *field) isVarint() bool  { return f.typ == protowire.VarintType }
func (f *field) isBytes() bool   { return f.typ == protowire.BytesType }
func (f *field) isFixed32() bool { return f.typ == protowire.Fixed32Type }
func (f *field) isFixed64() bool { return f.typ == protowire.Fixed64Type }

// appendVarints decodes a repeated varint field, packed or not, converting
// each value with conv.
func appendVarints[T any](dst []T, f *field, path string, conv func(uint64) T) ([]T, error) {
	switch {
	case f.isVarint():
		return append(dst, conv(f.u64)), nil
	case f.isBytes():
		b := f.data
		for pos := 0; pos < len(b); {
			v, n, err := consumeVarint(b[pos:], path, f.off+pos)
			if err != nil {
				return dst, err
			}
			dst = append(dst, conv(v))
			pos += n
		}
	}
	return dst, nil
}

// appendFixed32s decodes a repeated fixed32 field, packed or not.
func appendFixed32s[T any](dst []T, f *field, path string, conv func(uint32) T) ([]T, error) {
	switch {
	case f.isFixed32():
		return append(dst, conv(uint32(f.u64))), nil
	case f.isBytes():
		if len(f.data)%4 != 0 {
			return dst, errAt(path, f.off, "packed fixed32 data of %d bytes is not a multiple of 4", len(f.data))
		}
		for i := 0; i < len(f.data); i += 4 {
			dst = append(dst, conv(binary.LittleEndian.Uint32(f.data[i:])))
		}
	}
	return dst, nil
}

// appendFixed64s decodes a repeated fixed64 field, packed or not.
func appendFixed64s[T any](dst []T, f *field, path string, conv func(uint64) T) ([]T, error) {
	switch {
	case f.isFixed64():
		return append(dst, conv(f.u64)), nil
	case f.isBytes():
		if len(f.data)%8 != 0 {
			return dst, errAt(path, f.off, "packed fixed64 data of %d bytes is not a multiple of 8", len(f.data))
		}
		for i := 0; i < len(f.data); i += 8 {
			dst = append(dst, conv(binary.LittleEndian.Uint64(f.data[i:])))
		}
	}
	return dst, nil
}

func toInt64(v uint64) int64     { return int64(v) }
func toInt32(v uint64) int32     { return int32(v) }
func toUint64(v uint64) uint64   { return v }
func toFloat32(v uint32) float32 { return math.Float32frombits(v) }
func toFloat64(v uint64) float64 { return math.Float64frombits(v) }

// ---- messages ----

var modelFields = map[protowire.Number]string{
	1: "ir_version", 2: "producer_name", 3: "producer_version", 4: "domain",
	5: "model_version", 6: "doc_string", 7: "graph", 8: "opset_import",
}

func decodeModel(b []byte, m *Model) error {
	return eachField(b, 0, "", modelFields, func(f *field) error {
		switch {
		case f.num == 1 && f.isVarint():
			m.IRVersion = int64(f.u64)
		case f.num == 2 && f.isBytes():
			m.ProducerName = string(f.data)
		case f.num == 3 && f.isBytes():
			m.ProducerVersion = string(f.data)
		case f.num == 4 && f.isBytes():
			m.Domain = string(f.data)
		case f.num == 5 && f.isVarint():
			m.ModelVersion = int64(f.u64)
		case f.num == 6 && f.isBytes():
			m.DocString = string(f.data)
		case f.num == 7 && f.isBytes():
			if m.Graph == nil {
				m.Graph = &Graph{}
			}
			// Repeated occurrences of a message field merge.
			return decodeGraph(f.data, f.off, "graph", m.Graph)
		case f.num == 8 && f.isBytes():
			var o OperatorSetID
			path := index("", "opset_import", len(m.OpsetImports))
			err := eachField(f.data, f.off, path, opsetFields, func(g *field) error {
				switch {
				case g.num == 1 && g.isBytes():
					o.Domain = string(g.data)
				case g.num == 2 && g.isVarint():
					o.Version = int64(g.u64)
				}
				return nil
			})
			if err != nil {
				return err
			}
			m.OpsetImports = append(m.OpsetImports, o)
		}
		return nil
	})
}

var opsetFields = map[protowire.Number]string{1: "domain", 2: "version"}

var graphFields = map[protowire.Number]string{
	1: "node", 2: "name", 5: "initializer", 10: "doc_string", 11: "input", 12: "output", 13: "value_info",
}

func decodeGraph(b []byte, base int, path string, g *Graph) error {
	return eachField(b, base, path, graphFields, func(f *field) error {
		if !f.isBytes() {
			return nil
		}
		switch f.num {
		case 1:
			n := &Node{}
			if err := decodeNode(f.data, f.off, index(path, "node", len(g.Nodes)), n); err != nil {
				return err
			}
			g.Nodes = append(g.Nodes, n)
		case 2:
			g.Name = string(f.data)
		case 5:
			t := &Tensor{}
			if err := decodeTensor(f.data, f.off, index(path, "initializer", len(g.Initializers)), t); err != nil {
				return err
			}
			g.Initializers = append(g.Initializers, t)
		case 11, 12, 13:
			list := map[protowire.Number]*[]*ValueInfo{11: &g.Inputs, 12: &g.Outputs, 13: &g.ValueInfo}[f.num]
			v := &ValueInfo{}
			if err := decodeValueInfo(f.data, f.off, index(path, graphFields[f.num], len(*list)), v); err != nil {
				return err
			}
			*list = append(*list, v)
		}
		return nil
	})
}

var nodeFields = map[protowire.Number]string{
	1: "input", 2: "output", 3: "name", 4: "op_type", 5: "attribute", 6: "doc_string", 7: "domain",
}

func decodeNode(b []byte, base int, path string, n *Node) error {
	return eachField(b, base, path, nodeFields, func(f *field) error {
		if !f.isBytes() {
			return nil
		}
		switch f.num {
		case 1:
			n.Inputs = append(n.Inputs, string(f.data))
		case 2:
			n.Outputs = append(n.Outputs, string(f.data))
		case 3:
			n.Name = string(f.data)
		case 4:
			n.OpType = string(f.data)
		case 5:
			a := &Attribute{}
			if err := decodeAttribute(f.data, f.off, index(path, "attribute", len(n.Attributes)), a); err != nil {
				return err
			}
			n.Attributes = append(n.Attributes, a)
		case 7:
			n.Domain = string(f.data)
		}
		return nil
	})
}

var attributeFields = map[protowire.Number]string{
	1: "name", 2: "f", 3: "i", 4: "s", 5: "t", 6: "g", 7: "floats", 8: "ints", 9: "strings",
	10: "tensors", 11: "graphs", 13: "doc_string", 20: "type", 21: "ref_attr_name",
}

func decodeAttribute(b []byte, base int, path string, a *Attribute) error {
	return eachField(b, base, path, attributeFields, func(f *field) error {
		fpath := join(path, attributeFields[f.num])
		var err error
		switch {
		case f.num == 1 && f.isBytes():
			a.Name = string(f.data)
		case f.num == 2 && f.isFixed32():
			a.F = math.Float32frombits(uint32(f.u64))
		case f.num == 3 && f.isVarint():
			a.I = int64(f.u64)
		case f.num == 4 && f.isBytes():
			a.S = string(f.data)
		case f.num == 5 && f.isBytes():
			if a.T == nil {
				a.T = &Tensor{}
			}
			err = decodeTensor(f.data, f.off, fpath, a.T)
		case f.num == 7:
			a.Floats, err = appendFixed32s(a.Floats, f, fpath, toFloat32)
		case f.num == 8:
			a.Ints, err = appendVarints(a.Ints, f, fpath, toInt64)
		case f.num == 9 && f.isBytes():
			a.Strings = append(a.Strings, string(f.data))
		case f.num == 20 && f.isVarint():
			a.Type = AttributeType(int32(f.u64))
		}
		return err
	})
}

var tensorFields = map[protowire.Number]string{
	1: "dims", 2: "data_type", 3: "segment", 4: "float_data", 5: "int32_data", 6: "string_data",
	7: "int64_data", 8: "name", 9: "raw_data", 10: "double_data", 11: "uint64_data",
	12: "doc_string", 13: "external_data", 14: "data_location",
}

func decodeTensor(b []byte, base int, path string, t *Tensor) error {
	return eachField(b, base, path, tensorFields, func(f *field) error {
		fpath := join(path, tensorFields[f.num])
		var err error
		switch {
		case f.num == 1:
			t.Dims, err = appendVarints(t.Dims, f, fpath, toInt64)
		case f.num == 2 && f.isVarint():
			t.DataType = DataType(int32(f.u64))
		case f.num == 4:
			t.FloatData, err = appendFixed32s(t.FloatData, f, fpath, toFloat32)
		case f.num == 5:
			t.Int32Data, err = appendVarints(t.Int32Data, f, fpath, toInt32)
		case f.num == 7:
			t.Int64Data, err = appendVarints(t.Int64Data, f, fpath, toInt64)
		case f.num == 8 && f.isBytes():
			t.Name = string(f.data)
		case f.num == 9 && f.isBytes():
			t.RawData, t.HasRawData = f.data, true
		case f.num == 10:
			t.DoubleData, err = appendFixed64s(t.DoubleData, f, fpath, toFloat64)
		case f.num == 11:
			t.Uint64Data, err = appendVarints(t.Uint64Data, f, fpath, toUint64)
		case f.num == 13 && f.isBytes():
			var e StringStringEntry
			err = eachField(f.data, f.off, index(path, "external_data", len(t.ExternalData)), entryFields, func(g *field) error {
				switch {
				case g.num == 1 && g.isBytes():
					e.Key = string(g.data)
				case g.num == 2 && g.isBytes():
					e.Value = string(g.data)
				}
				return nil
			})
			t.ExternalData = append(t.ExternalData, e)
		case f.num == 14 && f.isVarint():
			t.DataLocation = int32(f.u64)
		}
		return err
	})
}

var entryFields = map[protowire.Number]string{1: "key", 2: "value"}

var valueInfoFields = map[protowire.Number]string{1: "name", 2: "type", 3: "doc_string"}

func decodeValueInfo(b []byte, base int, path string, v *ValueInfo) error {
	return eachField(b, base, path, valueInfoFields, func(f *field) error {
		switch {
		case f.num == 1 && f.isBytes():
			v.Name = string(f.data)
		case f.num == 2 && f.isBytes():
			return decodeType(f.data, f.off, join(path, "type"), v)
		}
		return nil
	})
}

var typeFields = map[protowire.Number]string{1: "tensor_type", 4: "sequence_type", 5: "map_type", 6: "denotation"}
var tensorTypeFields = map[protowire.Number]string{1: "elem_type", 2: "shape"}
var shapeFields = map[protowire.Number]string{1: "dim"}
var dimFields = map[protowire.Number]string{1: "dim_value", 2: "dim_param", 3: "denotation"}

func decodeType(b []byte, base int, path string, v *ValueInfo) error {
	return eachField(b, base, path, typeFields, func(f *field) error {
		if f.num != 1 || !f.isBytes() {
			return nil
		}
		v.IsTensor = true
		tpath := join(path, "tensor_type")
		return eachField(f.data, f.off, tpath, tensorTypeFields, func(g *field) error {
			switch {
			case g.num == 1 && g.isVarint():
				v.ElemType = DataType(int32(g.u64))
			case g.num == 2 && g.isBytes():
				v.HasShape = true
				spath := join(tpath, "shape")
				return eachField(g.data, g.off, spath, shapeFields, func(h *field) error {
					if h.num != 1 || !h.isBytes() {
						return nil
					}
					var d Dim
					err := eachField(h.data, h.off, index(spath, "dim", len(v.Shape)), dimFields, func(k *field) error {
						switch {
						case k.num == 1 && k.isVarint():
							d.Value, d.HasValue, d.Param = int64(k.u64), true, ""
						case k.num == 2 && k.isBytes():
							d.Param, d.HasValue, d.Value = string(k.data), false, 0
						}
						return nil
					})
					v.Shape = append(v.Shape, d)
					return err
				})
			}
			return nil
		})
	})
}
