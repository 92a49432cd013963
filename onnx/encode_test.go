package onnx

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"rulebook/internal/testfiles"
)

// ---- comparison ----

// diff returns "" when a and b are deeply equal, else the path of the first
// difference. It is reflect.DeepEqual (nil and empty slices differ) except
// that floats are compared by bit pattern, so NaNs equal themselves and -0
// differs from +0.
func diff(a, b any) string {
	return diffValue(reflect.ValueOf(a), reflect.ValueOf(b), "")
}

func diffValue(a, b reflect.Value, path string) string {
	if a.IsValid() != b.IsValid() || a.IsValid() && a.Type() != b.Type() {
		return path + ": different types"
	}
	if !a.IsValid() {
		return ""
	}
	switch a.Kind() {
	case reflect.Pointer:
		if a.IsNil() || b.IsNil() {
			if a.IsNil() != b.IsNil() {
				return fmt.Sprintf("%s: nil %v vs %v", path, a.IsNil(), b.IsNil())
			}
			return ""
		}
		return diffValue(a.Elem(), b.Elem(), path)
	case reflect.Struct:
		for i := range a.NumField() {
			if d := diffValue(a.Field(i), b.Field(i), path+"."+a.Type().Field(i).Name); d != "" {
				return d
			}
		}
		return ""
	case reflect.Slice:
		if a.IsNil() != b.IsNil() {
			return fmt.Sprintf("%s: nil %v vs %v", path, a.IsNil(), b.IsNil())
		}
		if a.Len() != b.Len() {
			return fmt.Sprintf("%s: length %d vs %d", path, a.Len(), b.Len())
		}
		if a.Type().Elem().Kind() == reflect.Uint8 {
			if !bytes.Equal(a.Bytes(), b.Bytes()) {
				return path + ": bytes differ"
			}
			return ""
		}
		for i := range a.Len() {
			if d := diffValue(a.Index(i), b.Index(i), fmt.Sprintf("%s[%d]", path, i)); d != "" {
				return d
			}
		}
		return ""
	case reflect.Float32:
		x, y := a.Interface().(float32), b.Interface().(float32)
		if math.Float32bits(x) != math.Float32bits(y) {
			return fmt.Sprintf("%s: %v vs %v", path, x, y)
		}
		return ""
	case reflect.Float64:
		x, y := a.Interface().(float64), b.Interface().(float64)
		if math.Float64bits(x) != math.Float64bits(y) {
			return fmt.Sprintf("%s: %v vs %v", path, x, y)
		}
		return ""
	case reflect.String, reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		if a.Interface() != b.Interface() {
			return fmt.Sprintf("%s: %v vs %v", path, a.Interface(), b.Interface())
		}
		return ""
	}
	return fmt.Sprintf("%s: unexpected kind %s", path, a.Kind())
}

func TestDiff(t *testing.T) {
	nan := float32(math.NaN())
	if d := diff(&Tensor{FloatData: []float32{nan}}, &Tensor{FloatData: []float32{nan}}); d != "" {
		t.Errorf("NaN: %s", d)
	}
	for _, c := range [][2]*Tensor{
		{{FloatData: []float32{0}}, {FloatData: []float32{float32(math.Copysign(0, -1))}}},
		{{RawData: []byte{}}, {}},
		{{Dims: []int64{1}}, {Dims: []int64{2}}},
		{{ExternalData: []StringStringEntry{{"a", "b"}}}, {ExternalData: []StringStringEntry{{"a", "c"}}}},
	} {
		if diff(c[0], c[1]) == "" {
			t.Errorf("%+v and %+v compare equal", c[0], c[1])
		}
	}
}

// ---- round trips ----

// checkModelRoundTrip checks that decoding the encoding of a decoded model
// gives it back and that encoding is then a fixed point. It returns the
// encoding.
func checkModelRoundTrip(t testing.TB, m1 *Model) []byte {
	t.Helper()
	e1 := EncodeModel(m1)
	m2, err := DecodeModel(e1)
	if err != nil {
		t.Fatalf("decoding the encoding: %v", err)
	}
	if d := diff(m1, m2); d != "" {
		t.Fatalf("decode(encode(m)) differs from m at %s", d)
	}
	if e2 := EncodeModel(m2); !bytes.Equal(e1, e2) {
		t.Fatalf("encoding is not a fixed point: %d then %d bytes", len(e1), len(e2))
	}
	return e1
}

func checkTensorRoundTrip(t testing.TB, t1 *Tensor) []byte {
	t.Helper()
	e1 := EncodeTensor(t1)
	t2, err := DecodeTensor(e1)
	if err != nil {
		t.Fatalf("decoding the encoding: %v", err)
	}
	if d := diff(t1, t2); d != "" {
		t.Fatalf("decode(encode(t)) differs from t at %s", d)
	}
	if e2 := EncodeTensor(t2); !bytes.Equal(e1, e2) {
		t.Fatalf("encoding is not a fixed point: %d then %d bytes", len(e1), len(e2))
	}
	return e1
}

// handBuiltModel sets every field the decoder keeps, in the form the
// decoder produces (nil for absent repeated fields).
func handBuiltModel() *Model {
	nan := math.Float32frombits(0x7fc00001)
	return &Model{
		IRVersion:       9,
		OpsetImports:    []OperatorSetID{{Version: 18}, {Domain: "com.microsoft", Version: 1}, {}},
		ProducerName:    "rulebook",
		ProducerVersion: "0.1",
		Domain:          "test.domain",
		ModelVersion:    -3,
		DocString:       "doc \x00\xff not UTF-8",
		Graph: &Graph{
			Name: "g",
			Nodes: []*Node{
				{
					Name: "n0", OpType: "Conv", Domain: "",
					Inputs: []string{"x", "", "W"}, Outputs: []string{"y"},
					Attributes: []*Attribute{
						{Name: "f", Type: AttrFloat, F: nan},
						{Name: "negzero", Type: AttrFloat, F: float32(math.Copysign(0, -1))},
						{Name: "zero_f", Type: AttrFloat},
						{Name: "zero_i", Type: AttrInt},
						{Name: "i", Type: AttrInt, I: -1},
						{Name: "empty_s", Type: AttrString},
						{Name: "s", Type: AttrString, S: "NOTSET"},
						{Name: "t", Type: AttrTensor, T: &Tensor{DataType: Int64, Int64Data: []int64{math.MinInt64, math.MaxInt64}}},
						{Name: "empty_t", Type: AttrTensor, T: &Tensor{}},
						{Name: "g", Type: AttrGraph},
						{Name: "floats", Type: AttrFloats, Floats: []float32{1.5, float32(math.Inf(-1)), nan}},
						{Name: "ints", Type: AttrInts, Ints: []int64{0, -1, 1 << 62}},
						{Name: "strings", Type: AttrStrings, Strings: []string{"", "a"}},
						{Name: "odd", Type: AttributeType(-7), I: 3, S: "mixed", Floats: []float32{0}},
						{},
					},
				},
				{OpType: "Custom", Domain: "com.microsoft", Outputs: []string{""}},
				{},
			},
			Initializers: []*Tensor{
				{Name: "W", Dims: []int64{2, 2}, DataType: Float, FloatData: []float32{1, -2, nan, 0}},
				{Name: "raw", Dims: []int64{2}, DataType: Int16, RawData: []byte{1, 0, 0xff, 0xff}, HasRawData: true},
				{Name: "empty_raw", Dims: []int64{0}, DataType: Float, RawData: []byte{}, HasRawData: true},
				{Name: "i32", Dims: []int64{3}, DataType: Int8, Int32Data: []int32{-128, 0, 127}},
				{Name: "f64", Dims: []int64{1}, DataType: Double, DoubleData: []float64{math.Pi}},
				{Name: "u64", Dims: []int64{2}, DataType: Uint64, Uint64Data: []uint64{0, math.MaxUint64}},
				{Name: "scalar", DataType: Int32, Int32Data: []int32{math.MinInt32}},
				{
					Name: "ext", Dims: []int64{4}, DataType: Float, DataLocation: LocationExternal,
					ExternalData: []StringStringEntry{{"location", "w.bin"}, {"offset", "0"}, {"", ""}},
				},
				{DataType: DataType(99), DataLocation: -1, Dims: []int64{-1}},
				{},
			},
			Inputs: []*ValueInfo{
				{Name: "x", IsTensor: true, ElemType: Float, HasShape: true, Shape: []Dim{
					{Value: 1, HasValue: true}, {Param: "N"}, {}, {Value: 0, HasValue: true}, {Value: -1, HasValue: true},
				}},
				{Name: "scalar", IsTensor: true, ElemType: Int64, HasShape: true},
				{Name: "unknown_shape", IsTensor: true, ElemType: Bool},
				{Name: "untyped_tensor", IsTensor: true},
			},
			Outputs:   []*ValueInfo{{Name: "y"}, {}},
			ValueInfo: []*ValueInfo{{Name: "v", IsTensor: true, HasShape: true, Shape: []Dim{{}}}},
		},
	}
}

func TestEncodeHandBuilt(t *testing.T) {
	tests := []struct {
		name string
		m    *Model
	}{
		{"full", handBuiltModel()},
		{"empty", &Model{}},
		{"empty graph", &Model{Graph: &Graph{}}},
		{"header only", &Model{IRVersion: 3, OpsetImports: []OperatorSetID{{Version: 7}}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			checkModelRoundTrip(t, tc.m)
		})
	}
	for i, tensor := range handBuiltModel().Graph.Initializers {
		t.Run(fmt.Sprintf("tensor %d", i), func(t *testing.T) {
			checkTensorRoundTrip(t, tensor)
		})
	}
	if b := EncodeModel(&Model{}); len(b) != 0 {
		t.Errorf("empty model encodes to %x", b)
	}
	if EncodeModel(nil) != nil || EncodeTensor(nil) != nil {
		t.Error("nil input encodes to bytes")
	}
}

// The decoder must read back the handcrafted model (packed and unpacked
// fields, unknown fields, a group) the same way after re-encoding.
func TestEncodeHandcraftedWire(t *testing.T) {
	m, err := DecodeModel(handcraftedModel())
	if err != nil {
		t.Fatal(err)
	}
	checkModelRoundTrip(t, m)
}

// The bytes are those protobuf writes: field-number order, packed repeated
// numbers, zero scalars omitted.
func TestEncodeWireFormat(t *testing.T) {
	floats := func(vs ...float32) []byte {
		var b []byte
		for _, v := range vs {
			b = binary.LittleEndian.AppendUint32(b, math.Float32bits(v))
		}
		return b
	}
	tests := []struct {
		name string
		got  []byte
		want msg
	}{
		{
			"float tensor",
			EncodeTensor(&Tensor{Name: "w", Dims: []int64{2, 3}, DataType: Float, FloatData: []float32{1, 2, 3, 4, 5, 6}}),
			msg(nil).bytes(1, packedVarints(2, 3)).varint(2, uint64(Float)).bytes(4, floats(1, 2, 3, 4, 5, 6)).str(8, "w"),
		},
		{
			"empty raw data",
			EncodeTensor(&Tensor{Dims: []int64{0}, DataType: Float, RawData: []byte{}, HasRawData: true}),
			msg(nil).bytes(1, packedVarints(0)).varint(2, uint64(Float)).bytes(9, nil),
		},
		{
			"negative int32 data",
			EncodeTensor(&Tensor{DataType: Int32, Int32Data: []int32{-1}}),
			msg(nil).varint(2, uint64(Int32)).bytes(5, packedVarints(-1)),
		},
		{
			"external",
			EncodeTensor(&Tensor{DataLocation: LocationExternal, ExternalData: []StringStringEntry{{"location", "x"}}}),
			msg(nil).bytes(13, msg(nil).str(1, "location").str(2, "x")).varint(14, 1),
		},
		{
			"model",
			EncodeModel(&Model{
				IRVersion: 8, ProducerName: "p", OpsetImports: []OperatorSetID{{Version: 17}},
				Graph: &Graph{
					Name: "g",
					Nodes: []*Node{{OpType: "Relu", Inputs: []string{"x"}, Outputs: []string{"y"}, Attributes: []*Attribute{
						{Name: "alpha", Type: AttrFloat},
						{Name: "perm", Type: AttrInts, Ints: []int64{1, 0}},
					}}},
					Inputs:  []*ValueInfo{{Name: "x", IsTensor: true, ElemType: Float, HasShape: true, Shape: []Dim{{Value: 1, HasValue: true}, {Param: "N"}, {}}}},
					Outputs: []*ValueInfo{{Name: "y", IsTensor: true, ElemType: Float}},
				},
			}),
			msg(nil).varint(1, 8).str(2, "p").bytes(7, msg(nil).
				bytes(1, msg(nil).str(1, "x").str(2, "y").str(4, "Relu").
					bytes(5, msg(nil).str(1, "alpha").fixed32(2, 0).varint(20, uint64(AttrFloat))).
					bytes(5, msg(nil).str(1, "perm").bytes(8, packedVarints(1, 0)).varint(20, uint64(AttrInts)))).
				str(2, "g").
				bytes(11, msg(nil).str(1, "x").bytes(2, msg(nil).bytes(1, msg(nil).varint(1, uint64(Float)).
					bytes(2, msg(nil).bytes(1, msg(nil).varint(1, 1)).bytes(1, msg(nil).str(2, "N")).bytes(1, nil))))).
				bytes(12, msg(nil).str(1, "y").bytes(2, msg(nil).bytes(1, msg(nil).varint(1, uint64(Float)))))).
				bytes(8, msg(nil).varint(2, 17)),
		},
	}
	for _, tc := range tests {
		if !bytes.Equal(tc.got, tc.want) {
			t.Errorf("%s:\n got %x\nwant %x", tc.name, tc.got, []byte(tc.want))
		}
	}
}

// Messages over 127 bytes need a multi-byte length, which appendMessage
// makes room for by shifting the body.
func TestEncodeLongLengths(t *testing.T) {
	for _, n := range []int{0, 1, 127, 128, 16383, 16384, 1 << 21} {
		m := &Model{Graph: &Graph{Name: strings.Repeat("g", n), Initializers: []*Tensor{
			{Name: "r", RawData: bytes.Repeat([]byte{7}, n), HasRawData: true},
		}}}
		checkModelRoundTrip(t, m)
	}
}

// Hand-built values whose flags disagree with their contents keep the
// contents rather than drop them.
func TestEncodeInconsistent(t *testing.T) {
	m := &Model{Graph: &Graph{
		Inputs:       []*ValueInfo{{Name: "a", ElemType: Float}, {Name: "b", Shape: []Dim{{Value: 4}}}},
		Initializers: []*Tensor{{RawData: []byte{1}}},
	}}
	got, err := DecodeModel(EncodeModel(m))
	if err != nil {
		t.Fatal(err)
	}
	g := got.Graph
	if a := g.Inputs[0]; !a.IsTensor || a.ElemType != Float || a.HasShape {
		t.Errorf("input a %+v", a)
	}
	if b := g.Inputs[1]; !b.IsTensor || !b.HasShape || !slices.Equal(b.Shape, []Dim{{Value: 4, HasValue: true}}) {
		t.Errorf("input b %+v", b)
	}
	if r := g.Initializers[0]; !r.HasRawData || !bytes.Equal(r.RawData, []byte{1}) {
		t.Errorf("initializer %+v", r)
	}
}

// roundTripFile round-trips one model (.onnx) or tensor (.pb) file. It
// returns whether the file decoded at all and whether our encoding equals
// the original bytes.
func roundTripFile(t *testing.T, path string) (decoded, identical bool) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var e []byte
	if strings.HasSuffix(path, ".onnx") {
		m, err := DecodeModel(b)
		if err != nil {
			t.Errorf("%s: %v", path, err)
			return false, false
		}
		e = checkModelRoundTrip(t, m)
	} else {
		tensor, err := DecodeTensor(b)
		if err != nil {
			// Some test data files hold a SequenceProto or an
			// OptionalProto, which need not decode as a tensor.
			return false, false
		}
		e = checkTensorRoundTrip(t, tensor)
	}
	return true, bytes.Equal(e, b)
}

func TestEncodeRoundTripSharedModels(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join(sharedModels, "*.onnx"))
	data, _ := filepath.Glob(filepath.Join(sharedModels, "*", "*.pb"))
	if len(files) == 0 {
		missing(t, "no models in %s", sharedModels)
	}
	for _, f := range append(files, data...) {
		rel, _ := filepath.Rel(sharedModels, f)
		t.Run(rel, func(t *testing.T) {
			if decoded, _ := roundTripFile(t, f); !decoded && !t.Failed() {
				t.Errorf("%s does not decode", f)
			}
		})
	}
}

func TestEncodeRoundTripNodeTests(t *testing.T) {
	var dirs []string
	for _, d := range nodeTestDirs() {
		ds, _ := filepath.Glob(filepath.Join(d, "test_*"))
		dirs = append(dirs, ds...)
	}
	if len(dirs) == 0 {
		testfiles.ONNXNodeTests(t) // skips, or fails in CI
	}
	var files, decoded, identical int
	for _, dir := range dirs {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			model := filepath.Join(dir, "model.onnx")
			if _, err := os.Stat(model); err != nil {
				t.Fatal(err)
			}
			data, _ := filepath.Glob(filepath.Join(dir, "test_data_set_*", "*.pb"))
			for _, f := range append([]string{model}, data...) {
				d, same := roundTripFile(t, f)
				files++
				if d {
					decoded++
				}
				if same {
					identical++
				}
			}
		})
	}
	t.Logf("%d directories, %d files: %d decoded and round-tripped, %d re-encoded byte for byte",
		len(dirs), files, decoded, identical)
}

// The encoding of a real model carries the same weights.
func TestEncodeSqueezenetInitializers(t *testing.T) {
	path := filepath.Join(sharedModels, "squeezenet1_1-full.onnx")
	readOrSkip(t, path)
	m1, err := ReadModel(path)
	if err != nil {
		t.Fatal(err)
	}
	m2, err := DecodeModel(EncodeModel(m1))
	if err != nil {
		t.Fatal(err)
	}
	if len(m1.Graph.Initializers) == 0 || len(m2.Graph.Initializers) != len(m1.Graph.Initializers) {
		t.Fatalf("%d initializers, then %d", len(m1.Graph.Initializers), len(m2.Graph.Initializers))
	}
	total := 0
	for i, w1 := range m1.Graph.Initializers {
		w2 := m2.Graph.Initializers[i]
		if w1.Name != w2.Name || w1.DataType != w2.DataType || !slices.Equal(w1.Dims, w2.Dims) {
			t.Fatalf("initializer %d: %s %s %v, then %s %s %v", i, w1.Name, w1.DataType, w1.Dims, w2.Name, w2.DataType, w2.Dims)
		}
		v1, err := w1.Float64s()
		if err != nil {
			t.Fatal(err)
		}
		v2, err := w2.Float64s()
		if err != nil {
			t.Fatal(err)
		}
		if d := diff(v1, v2); d != "" {
			t.Fatalf("initializer %s: values differ at %s", w1.Name, d)
		}
		total += len(v1)
	}
	if total < 1_000_000 {
		t.Errorf("only %d weights compared", total)
	}
}

// ---- WriteModel ----

func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

func TestWriteModel(t *testing.T) {
	m := handBuiltModel()
	want := EncodeModel(m)

	t.Run("creates", func(t *testing.T) {
		dir := t.TempDir()
		path := filepath.Join(dir, "model.onnx")
		if err := WriteModel(path, m); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Error("file differs from EncodeModel")
		}
		back, err := ReadModel(path)
		if err != nil {
			t.Fatal(err)
		}
		if d := diff(m, back); d != "" {
			t.Errorf("read back differs at %s", d)
		}
		if names := dirNames(t, dir); !slices.Equal(names, []string{"model.onnx"}) {
			t.Errorf("directory holds %v", names)
		}
		if st, _ := os.Stat(path); st.Mode().Perm() != 0o644 {
			t.Errorf("mode %v", st.Mode())
		}
	})

	t.Run("relative path", func(t *testing.T) {
		t.Chdir(t.TempDir())
		if err := WriteModel("m.onnx", m); err != nil {
			t.Fatal(err)
		}
		if names := dirNames(t, "."); !slices.Equal(names, []string{"m.onnx"}) {
			t.Errorf("directory holds %v", names)
		}
	})

	t.Run("missing directory", func(t *testing.T) {
		dir := t.TempDir()
		path := filepath.Join(dir, "no", "such", "model.onnx")
		err := WriteModel(path, m)
		if err == nil {
			t.Fatal("no error")
		}
		if !strings.Contains(err.Error(), path) || !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("error %q does not name %s as missing", err, path)
		}
		if names := dirNames(t, dir); len(names) != 0 {
			t.Errorf("left behind %v", names)
		}
	})

	t.Run("replaces", func(t *testing.T) {
		dir := t.TempDir()
		path := filepath.Join(dir, "model.onnx")
		if err := os.WriteFile(path, []byte("old contents"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := WriteModel(path, m); err != nil {
			t.Fatal(err)
		}
		if got, _ := os.ReadFile(path); !bytes.Equal(got, want) {
			t.Error("file not replaced")
		}
		if st, _ := os.Stat(path); st.Mode().Perm() != 0o600 {
			t.Errorf("mode %v, want the replaced file's 0600", st.Mode())
		}
		if names := dirNames(t, dir); !slices.Equal(names, []string{"model.onnx"}) {
			t.Errorf("directory holds %v", names)
		}
	})

	// A rename onto a directory fails at the last step: nothing may be
	// left behind.
	t.Run("onto a directory", func(t *testing.T) {
		dir := t.TempDir()
		path := filepath.Join(dir, "sub")
		if err := os.Mkdir(path, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := WriteModel(path, m); err == nil || !strings.Contains(err.Error(), path) {
			t.Errorf("error %v", err)
		}
		if names := dirNames(t, dir); !slices.Equal(names, []string{"sub"}) {
			t.Errorf("directory holds %v", names)
		}
	})

	t.Run("nil model", func(t *testing.T) {
		dir := t.TempDir()
		if err := WriteModel(filepath.Join(dir, "m.onnx"), nil); err == nil {
			t.Error("no error")
		}
		if names := dirNames(t, dir); len(names) != 0 {
			t.Errorf("directory holds %v", names)
		}
	})
}

// ---- fuzzing ----

func FuzzEncodeRoundTrip(f *testing.F) {
	f.Add(handcraftedModel())
	f.Add(EncodeModel(handBuiltModel()))
	f.Add([]byte{})
	f.Add([]byte{0x3a, 0x04, 0x0a, 0x02, 0x22, 0x00}) // graph { node { op_type "" } }
	for _, s := range fuzzSeedFiles(8, shrinkModel, nodeTestPatterns("model.onnx")...) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := DecodeModel(b)
		if err != nil {
			return
		}
		checkModelRoundTrip(t, m)
		// The same bytes read as a tensor must round-trip too.
		if tensor, err := DecodeTensor(b); err == nil {
			checkTensorRoundTrip(t, tensor)
		}
	})
}
