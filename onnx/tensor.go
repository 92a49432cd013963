package onnx

import (
	"encoding/binary"
	"fmt"
	"math"
	"path/filepath"
	"strconv"

	"rulebook/internal/infile"
)

// maxElements bounds the element count a tensor may claim; larger counts
// are reported as errors rather than overflowing.
const maxElements = 1 << 40

// NumElements is the product of the dimensions (1 for a scalar), or an
// error for negative or overflowing dimensions.
func (t *Tensor) NumElements() (int, error) {
	n := int64(1)
	for i, d := range t.Dims {
		if d < 0 {
			return 0, fmt.Errorf("onnx: tensor %q: dims[%d] is negative (%d)", t.Name, i, d)
		}
		if d != 0 && n > maxElements/d {
			return 0, fmt.Errorf("onnx: tensor %q: dims %v hold more than 2^40 elements", t.Name, t.Dims)
		}
		n *= d
	}
	return int(n), nil
}

// Shape returns the dimensions as ints.
func (t *Tensor) Shape() []int {
	s := make([]int, len(t.Dims))
	for i, d := range t.Dims {
		s[i] = int(d)
	}
	return s
}

// declaredBytes is the size of the tensor's raw data as its dims and type
// declare it; false when the type has no fixed width or the dims are bad.
func (t *Tensor) declaredBytes() (int64, bool) {
	n, err := t.NumElements()
	w := rawSize(t.DataType)
	if err != nil || w == 0 {
		return 0, false
	}
	return int64(n) * int64(w), true
}

// rawSize is the byte width of one element in raw_data.
func rawSize(d DataType) int {
	switch d {
	case Uint8, Int8, Bool:
		return 1
	case Uint16, Int16, Float16, BFloat16:
		return 2
	case Float, Int32, Uint32:
		return 4
	case Double, Int64, Uint64:
		return 8
	}
	return 0
}

// Float64s returns the elements converted to float64, in row-major order.
// It supports FLOAT, DOUBLE, INT64 and INT32 as well as the narrower
// integer types, BOOL, FLOAT16 and BFLOAT16, read from raw_data
// (little-endian) or from the typed field that onnx.proto assigns to the
// type. The element count must match the dimensions.
func (t *Tensor) Float64s() ([]float64, error) {
	fail := func(format string, args ...any) ([]float64, error) {
		return nil, fmt.Errorf("onnx: tensor %q (%s, dims %v): %s", t.Name, t.DataType, t.Dims, fmt.Sprintf(format, args...))
	}
	n, err := t.NumElements()
	if err != nil {
		return nil, err
	}
	if t.DataLocation == LocationExternal {
		loc, _ := t.ExternalLocation("location")
		return fail("data is stored externally in %q; call LoadExternal first", loc)
	}
	size := rawSize(t.DataType)
	if size == 0 {
		return fail("unsupported data type")
	}
	if t.HasRawData {
		if len(t.RawData) != n*size {
			return fail("raw_data has %d bytes, want %d (%d elements of %d bytes)", len(t.RawData), n*size, n, size)
		}
		return decodeRaw(t.DataType, t.RawData, n), nil
	}
	// The typed field onnx.proto assigns to the type, and its length.
	var field string
	var have int
	switch t.DataType {
	case Float:
		field, have = "float_data", len(t.FloatData)
	case Double:
		field, have = "double_data", len(t.DoubleData)
	case Int64:
		field, have = "int64_data", len(t.Int64Data)
	case Uint32, Uint64:
		field, have = "uint64_data", len(t.Uint64Data)
	default: // INT32 and the narrower types share int32_data.
		field, have = "int32_data", len(t.Int32Data)
	}
	if have != n {
		return fail("%s has %d values, want %d", field, have, n)
	}
	out := make([]float64, n)
	for i := range out {
		switch t.DataType {
		case Float:
			out[i] = float64(t.FloatData[i])
		case Double:
			out[i] = t.DoubleData[i]
		case Int64:
			out[i] = float64(t.Int64Data[i])
		case Uint32, Uint64:
			out[i] = float64(t.Uint64Data[i])
		case Uint8:
			out[i] = float64(uint8(t.Int32Data[i]))
		case Int8:
			out[i] = float64(int8(t.Int32Data[i]))
		case Uint16:
			out[i] = float64(uint16(t.Int32Data[i]))
		case Int16:
			out[i] = float64(int16(t.Int32Data[i]))
		case Bool:
			out[i] = b2f(t.Int32Data[i] != 0)
		case Float16:
			out[i] = halfToFloat64(uint16(t.Int32Data[i]))
		case BFloat16:
			out[i] = float64(math.Float32frombits(uint32(uint16(t.Int32Data[i])) << 16))
		default:
			out[i] = float64(t.Int32Data[i])
		}
	}
	return out, nil
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

func decodeRaw(d DataType, raw []byte, n int) []float64 {
	le := binary.LittleEndian
	out := make([]float64, n)
	for i := range out {
		switch d {
		case Float:
			out[i] = float64(math.Float32frombits(le.Uint32(raw[4*i:])))
		case Double:
			out[i] = math.Float64frombits(le.Uint64(raw[8*i:]))
		case Int32:
			out[i] = float64(int32(le.Uint32(raw[4*i:])))
		case Uint32:
			out[i] = float64(le.Uint32(raw[4*i:]))
		case Int64:
			out[i] = float64(int64(le.Uint64(raw[8*i:])))
		case Uint64:
			out[i] = float64(le.Uint64(raw[8*i:]))
		case Uint8:
			out[i] = float64(raw[i])
		case Int8:
			out[i] = float64(int8(raw[i]))
		case Bool:
			out[i] = b2f(raw[i] != 0)
		case Uint16:
			out[i] = float64(le.Uint16(raw[2*i:]))
		case Int16:
			out[i] = float64(int16(le.Uint16(raw[2*i:])))
		case Float16:
			out[i] = halfToFloat64(le.Uint16(raw[2*i:]))
		case BFloat16:
			out[i] = float64(math.Float32frombits(uint32(le.Uint16(raw[2*i:])) << 16))
		}
	}
	return out
}

// halfToFloat64 converts an IEEE 754 binary16 bit pattern.
func halfToFloat64(h uint16) float64 {
	sign := 1.0
	if h&0x8000 != 0 {
		sign = -1
	}
	exp := int(h>>10) & 0x1f
	frac := float64(h & 0x3ff)
	switch exp {
	case 0:
		return sign * math.Ldexp(frac, -24)
	case 0x1f:
		if frac != 0 {
			return math.NaN()
		}
		return math.Inf(int(sign))
	}
	return sign * math.Ldexp(1+frac/1024, exp-15)
}

// ExternalLocation returns the external_data entry with the given key
// ("location", "offset", "length", "checksum").
func (t *Tensor) ExternalLocation(key string) (string, bool) {
	for _, e := range t.ExternalData {
		if e.Key == key {
			return e.Value, true
		}
	}
	return "", false
}

// ExternalLocations counts the initializers whose data is stored in
// external files, by the file's location (relative to the model's folder).
func (g *Graph) ExternalLocations() map[string]int {
	out := map[string]int{}
	for _, t := range g.Initializers {
		if t.DataLocation == LocationExternal {
			loc, _ := t.ExternalLocation("location")
			out[loc]++
		}
	}
	return out
}

// LoadExternal reads the data of a tensor stored externally (data_location
// EXTERNAL) from the file named by its "location" entry, relative to dir
// (the model's directory), honouring "offset" and "length", and stores it as
// raw_data. It does nothing for a tensor stored inline.
func (t *Tensor) LoadExternal(dir string) error {
	if t.DataLocation != LocationExternal {
		return nil
	}
	fail := func(format string, args ...any) error {
		return fmt.Errorf("onnx: tensor %q: external data: %s", t.Name, fmt.Sprintf(format, args...))
	}
	loc, ok := t.ExternalLocation("location")
	if !ok || loc == "" {
		return fail("no location")
	}
	if !filepath.IsLocal(loc) {
		return fail("location %q is not a relative path inside the model directory", loc)
	}
	num := func(key string) (int64, bool, error) {
		s, ok := t.ExternalLocation(key)
		if !ok {
			return 0, false, nil
		}
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil || v < 0 {
			return 0, false, fail("%s %q is not a non-negative integer", key, s)
		}
		return v, true, nil
	}
	offset, _, err := num("offset")
	if err != nil {
		return err
	}
	length, hasLength, err := num("length")
	if err != nil {
		return err
	}
	// The location may not leave the model's folder, through ".." or
	// through a symbolic link (ONNX's checker refuses both).
	path, err := infile.Inside(dir, loc, infile.ExternalData)
	if err != nil {
		return fmt.Errorf("onnx: tensor %q: external data: %w", t.Name, err)
	}
	f, size, err := infile.Open(path, infile.ExternalData)
	if err != nil {
		return fmt.Errorf("onnx: tensor %q: external data: %w", t.Name, err)
	}
	defer f.Close()
	if offset > size {
		return fail("offset %d is past the end of %s (%d bytes)", offset, loc, size)
	}
	if !hasLength {
		length = size - offset
	}
	if length > size-offset {
		return fail("range [%d, %d+%d) exceeds %s of %d bytes", offset, offset, length, loc, size)
	}
	// Check the range against the tensor's own size before allocating: a
	// sparse file of 100 GB must not be read whole for a small tensor.
	if want, ok := t.declaredBytes(); ok && length != want {
		return fail("%s holds %d bytes from offset %d, but %v %s elements take %d", loc, length, offset, t.Dims, t.DataType, want)
	}
	raw := make([]byte, length)
	if _, err := f.ReadAt(raw, offset); err != nil {
		return fail("%v", err)
	}
	t.RawData, t.HasRawData, t.DataLocation = raw, true, LocationDefault
	return nil
}
