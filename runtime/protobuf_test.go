package runtime

import (
	"encoding/binary"
	"math"
	"strconv"

	"google.golang.org/protobuf/encoding/protowire"
)

// A small writer for the ONNX messages the tests build by hand; field
// numbers follow onnx/onnx.proto.

func appendBytesField(b []byte, field protowire.Number, v []byte) []byte {
	b = protowire.AppendTag(b, field, protowire.BytesType)
	return protowire.AppendBytes(b, v)
}

func appendVarintField(b []byte, field protowire.Number, v uint64) []byte {
	b = protowire.AppendTag(b, field, protowire.VarintType)
	return protowire.AppendVarint(b, v)
}

// pbModel builds a ModelProto importing the default domain at opset.
func pbModel(opset int64, graph []byte) []byte {
	var opsetID []byte
	opsetID = appendVarintField(opsetID, 2, uint64(opset))
	var b []byte
	b = appendVarintField(b, 1, 8) // ir_version
	b = appendBytesField(b, 8, opsetID)
	return appendBytesField(b, 7, graph)
}

// pbGraph builds a GraphProto from encoded nodes, initializers, inputs and
// outputs.
func pbGraph(nodes, inits, inputs, outputs [][]byte) []byte {
	var b []byte
	for _, n := range nodes {
		b = appendBytesField(b, 1, n)
	}
	b = appendBytesField(b, 2, []byte("test"))
	for _, t := range inits {
		b = appendBytesField(b, 5, t)
	}
	for _, v := range inputs {
		b = appendBytesField(b, 11, v)
	}
	for _, v := range outputs {
		b = appendBytesField(b, 12, v)
	}
	return b
}

func pbNode(op string, in, out []string, attrs ...[]byte) []byte {
	var b []byte
	for _, s := range in {
		b = appendBytesField(b, 1, []byte(s))
	}
	for _, s := range out {
		b = appendBytesField(b, 2, []byte(s))
	}
	b = appendBytesField(b, 3, []byte(op+"_node"))
	b = appendBytesField(b, 4, []byte(op))
	for _, a := range attrs {
		b = appendBytesField(b, 5, a)
	}
	return b
}

func pbAttrInts(name string, v ...int64) []byte {
	var b []byte
	b = appendBytesField(b, 1, []byte(name))
	for _, x := range v {
		b = appendVarintField(b, 8, uint64(x))
	}
	return appendVarintField(b, 20, 7) // INTS
}

func pbAttrInt(name string, v int64) []byte {
	var b []byte
	b = appendBytesField(b, 1, []byte(name))
	b = appendVarintField(b, 3, uint64(v))
	return appendVarintField(b, 20, 2) // INT
}

// pbValueInfo describes a float tensor; a dimension is an int (a value) or
// a string (a symbolic name). Without dimensions the shape is left out
// (unknown), not a scalar.
func pbValueInfo(name string, dims ...any) []byte {
	return pbValueInfoDims(name, len(dims) > 0, dims)
}

// pbValueInfoShape describes a float tensor of a known shape, a scalar
// included.
func pbValueInfoShape(name string, shape []int) []byte {
	dims := make([]any, len(shape))
	for i, d := range shape {
		dims[i] = d
	}
	return pbValueInfoDims(name, true, dims)
}

func pbValueInfoDims(name string, hasShape bool, dims []any) []byte {
	var shape []byte
	for _, d := range dims {
		var dim []byte
		switch d := d.(type) {
		case int:
			dim = appendVarintField(dim, 1, uint64(d))
		case string:
			dim = appendBytesField(dim, 2, []byte(d))
		}
		shape = appendBytesField(shape, 1, dim)
	}
	var tensorType []byte
	tensorType = appendVarintField(tensorType, 1, 1) // FLOAT
	if hasShape {
		tensorType = appendBytesField(tensorType, 2, shape)
	}
	var typ []byte
	typ = appendBytesField(typ, 1, tensorType)
	var b []byte
	b = appendBytesField(b, 1, []byte(name))
	return appendBytesField(b, 2, typ)
}

// pbFloatTensor is a FLOAT TensorProto with raw_data.
func pbFloatTensor(name string, dims []int64, data []float32) []byte {
	raw := make([]byte, 4*len(data))
	for i, x := range data {
		binary.LittleEndian.PutUint32(raw[4*i:], math.Float32bits(x))
	}
	return pbTensor(name, dims, 1, raw)
}

// pbInt64Tensor is an INT64 TensorProto with raw_data.
func pbInt64Tensor(name string, dims []int64, data []int64) []byte {
	raw := make([]byte, 8*len(data))
	for i, x := range data {
		binary.LittleEndian.PutUint64(raw[8*i:], uint64(x))
	}
	return pbTensor(name, dims, 7, raw)
}

func pbTensor(name string, dims []int64, dataType uint64, raw []byte) []byte {
	var b []byte
	for _, d := range dims {
		b = appendVarintField(b, 1, uint64(d))
	}
	b = appendVarintField(b, 2, dataType)
	b = appendBytesField(b, 8, []byte(name))
	return appendBytesField(b, 9, raw)
}

// pbExternalTensor is a FLOAT TensorProto whose data lies in an external
// file.
func pbExternalTensor(name string, dims []int64, location string, offset, length int) []byte {
	var b []byte
	for _, d := range dims {
		b = appendVarintField(b, 1, uint64(d))
	}
	b = appendVarintField(b, 2, 1)
	b = appendBytesField(b, 8, []byte(name))
	for _, kv := range [][2]string{{"location", location}, {"offset", strconv.Itoa(offset)}, {"length", strconv.Itoa(length)}} {
		var e []byte
		e = appendBytesField(e, 1, []byte(kv[0]))
		e = appendBytesField(e, 2, []byte(kv[1]))
		b = appendBytesField(b, 13, e)
	}
	return appendVarintField(b, 14, 1) // data_location EXTERNAL
}

func pbAttrString(name, v string) []byte {
	var b []byte
	b = appendBytesField(b, 1, []byte(name))
	b = appendBytesField(b, 4, []byte(v))
	return appendVarintField(b, 20, 3) // STRING
}

func pbAttrFloat(name string, v float32) []byte {
	var b []byte
	b = appendBytesField(b, 1, []byte(name))
	b = protowire.AppendTag(b, 2, protowire.Fixed32Type)
	b = protowire.AppendFixed32(b, math.Float32bits(v))
	return appendVarintField(b, 20, 1) // FLOAT
}
