package onnx

import (
	"encoding/binary"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"

	"rulebook/internal/infile"
	"rulebook/internal/testfiles"
)

// sharedModels holds real torchvision / PyTorch ONNX exports (see
// testfiles.SharedDir).
var sharedModels = filepath.Join(testfiles.SharedDir(), "models")

// missing skips outside CI; in CI a missing shared file is a failure.
func missing(t *testing.T, format string, args ...any) {
	t.Helper()
	testfiles.Missing(t, format, args...)
}

// nodeTestDirs lists where ONNX's node tests are, if installed.
func nodeTestDirs() []string {
	if d, _ := testfiles.FindONNXNodeTests(); d != "" {
		return []string{d}
	}
	return nil
}

func readOrSkip(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		missing(t, "%s not present", path)
	}
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestDecodeModelFiles(t *testing.T) {
	tests := []struct {
		file      string
		minNodes  int
		ops       []string // op types that must appear
		input     string
		inputDims []int64
	}{
		{"squeezenet1_1.onnx", 50, []string{"Conv", "Relu", "MaxPool", "Concat"}, "input", []int64{1, 3, 224, 224}},
		{"squeezenet1_1-full.onnx", 50, []string{"Conv", "Relu", "MaxPool", "Concat"}, "input", []int64{1, 3, 224, 224}},
		{"resnet50.onnx", 100, []string{"Conv", "Relu", "MaxPool", "Add", "Gemm"}, "input", []int64{1, 3, 224, 224}},
		{"inception_v3.onnx", 200, []string{"Conv", "Relu", "MaxPool", "AveragePool", "Concat"}, "input", []int64{1, 3, 299, 299}},
		{"bert_base.onnx", 500, []string{"MatMul", "Add", "Mul", "Transpose", "Softmax"}, "input", []int64{1, 64, 768}},
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			path := filepath.Join(sharedModels, tc.file)
			readOrSkip(t, path)
			m, err := ReadModel(path)
			if err != nil {
				t.Fatal(err)
			}
			if m.IRVersion <= 0 {
				t.Errorf("ir_version %d", m.IRVersion)
			}
			if v, ok := m.Opset(""); !ok || v <= 0 {
				t.Errorf("default opset missing: %+v", m.OpsetImports)
			}
			g := m.Graph
			if g == nil {
				t.Fatal("no graph")
			}
			if len(g.Nodes) < tc.minNodes {
				t.Errorf("%d nodes, want at least %d", len(g.Nodes), tc.minNodes)
			}
			seen := map[string]bool{}
			for i, n := range g.Nodes {
				if n.OpType == "" {
					t.Errorf("node %d has no op_type", i)
				}
				if len(n.Outputs) == 0 {
					t.Errorf("node %d (%s) has no outputs", i, n.OpType)
				}
				seen[n.OpType] = true
			}
			for _, op := range tc.ops {
				if !seen[op] {
					t.Errorf("op %s not seen", op)
				}
			}
			if len(g.Inputs) == 0 || g.Inputs[0].Name != tc.input {
				t.Fatalf("inputs %+v, want first %q", g.Inputs, tc.input)
			}
			in := g.Inputs[0]
			var dims []int64
			for _, d := range in.Shape {
				dims = append(dims, d.Value)
			}
			if !in.IsTensor || in.ElemType != Float || !in.HasShape || !slices.Equal(dims, tc.inputDims) {
				t.Errorf("input %+v, want FLOAT %v", in, tc.inputDims)
			}
			if len(g.Outputs) == 0 {
				t.Error("no graph outputs")
			}
			// Every initializer either decodes to the element count its
			// dimensions promise or is stored externally.
			for _, init := range g.Initializers {
				if init.DataLocation == LocationExternal {
					if _, ok := init.ExternalLocation("location"); !ok {
						t.Errorf("initializer %s: external without location", init.Name)
					}
					continue
				}
				v, err := init.Float64s()
				if err != nil && init.DataType != String {
					t.Errorf("initializer %s: %v", init.Name, err)
					continue
				}
				n, _ := init.NumElements()
				if err == nil && len(v) != n {
					t.Errorf("initializer %s: %d values for dims %v", init.Name, len(v), init.Dims)
				}
			}
		})
	}
}

func TestDecodeTensorFiles(t *testing.T) {
	dir := filepath.Join(sharedModels, "squeezenet1_1-full_test_data_set_0")
	tests := []struct {
		file string
		name string
		dims []int64
	}{
		{"input_0.pb", "input", []int64{1, 3, 224, 224}},
		{"output_0.pb", "output", []int64{1, 1000}},
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			path := filepath.Join(dir, tc.file)
			readOrSkip(t, path)
			tensor, err := ReadTensor(path)
			if err != nil {
				t.Fatal(err)
			}
			if tensor.Name != tc.name || tensor.DataType != Float || !slices.Equal(tensor.Dims, tc.dims) {
				t.Fatalf("got %q %s %v, want %q FLOAT %v", tensor.Name, tensor.DataType, tensor.Dims, tc.name, tc.dims)
			}
			v, err := tensor.Float64s()
			if err != nil {
				t.Fatal(err)
			}
			n, _ := tensor.NumElements()
			if len(v) != n {
				t.Fatalf("%d values, want %d", len(v), n)
			}
			for i, x := range v {
				if math.IsNaN(x) || math.IsInf(x, 0) || math.Abs(x) > 1e6 {
					t.Fatalf("value %d is %g", i, x)
				}
			}
		})
	}
}

// checkDecodeError requires err to be a well-formed *DecodeError with an
// offset inside the input.
func checkDecodeError(t *testing.T, err error, size int) {
	t.Helper()
	var de *DecodeError
	if !errors.As(err, &de) {
		t.Fatalf("error %v (%T) is not a *DecodeError", err, err)
	}
	if de.Offset < 0 || de.Offset > size {
		t.Fatalf("error %v: offset %d outside the %d-byte input", err, de.Offset, size)
	}
	if s := err.Error(); !strings.HasPrefix(s, "onnx: ") || !strings.Contains(s, " at byte ") {
		t.Fatalf("error %q lacks the onnx: prefix or the byte offset", s)
	}
}

// truncationPoints are the prefix lengths tried on an input of size n:
// every length for small inputs, a spread plus the last bytes otherwise.
func truncationPoints(n int) []int {
	if n <= 4096 {
		pts := make([]int, n)
		for i := range pts {
			pts[i] = i
		}
		return pts
	}
	var pts []int
	for i := 0; i < n; i += n/997 + 1 {
		pts = append(pts, i)
	}
	for i := max(0, n-64); i < n; i++ {
		pts = append(pts, i)
	}
	return pts
}

func TestDecodeTruncated(t *testing.T) {
	tests := []struct {
		path   string
		decode func([]byte) error
	}{
		{filepath.Join(sharedModels, "squeezenet1_1.onnx"), func(b []byte) error { _, err := DecodeModel(b); return err }},
		{filepath.Join(sharedModels, "resnet50.onnx"), func(b []byte) error { _, err := DecodeModel(b); return err }},
		{filepath.Join(sharedModels, "squeezenet1_1-full_test_data_set_0", "output_0.pb"), func(b []byte) error { _, err := DecodeTensor(b); return err }},
		{filepath.Join(sharedModels, "squeezenet1_1-full_test_data_set_0", "input_0.pb"), func(b []byte) error { _, err := DecodeTensor(b); return err }},
	}
	for _, tc := range tests {
		t.Run(filepath.Base(tc.path), func(t *testing.T) {
			b := readOrSkip(t, tc.path)
			if err := tc.decode(b); err != nil {
				t.Fatalf("full input: %v", err)
			}
			errs := 0
			for _, n := range truncationPoints(len(b)) {
				// A fresh copy, so that reads past the prefix would be
				// caught by the race detector or bounds checks.
				prefix := slices.Clone(b[:n])
				err := tc.decode(prefix)
				if n == len(b)-1 && err == nil {
					t.Fatalf("dropping the last byte was not detected")
				}
				if err != nil {
					errs++
					checkDecodeError(t, err, n)
				}
			}
			if errs == 0 {
				t.Fatal("no truncation was detected")
			}
		})
	}
}

// ---- a tiny encoder for handcrafted inputs ----

type msg []byte

func (m msg) varint(num protowire.Number, v uint64) msg {
	return protowire.AppendVarint(protowire.AppendTag(m, num, protowire.VarintType), v)
}
func (m msg) bytes(num protowire.Number, v []byte) msg {
	return protowire.AppendBytes(protowire.AppendTag(m, num, protowire.BytesType), v)
}
func (m msg) str(num protowire.Number, s string) msg { return m.bytes(num, []byte(s)) }
func (m msg) fixed32(num protowire.Number, v uint32) msg {
	return protowire.AppendFixed32(protowire.AppendTag(m, num, protowire.Fixed32Type), v)
}
func (m msg) fixed64(num protowire.Number, v uint64) msg {
	return protowire.AppendFixed64(protowire.AppendTag(m, num, protowire.Fixed64Type), v)
}
func packedVarints(vs ...int64) []byte {
	var b []byte
	for _, v := range vs {
		b = protowire.AppendVarint(b, uint64(v))
	}
	return b
}

// handcraftedModel is a model with one Conv node, exercising packed and
// unpacked repeated fields, unknown fields, a group and a wrong wire type.
func handcraftedModel() []byte {
	weights := msg(nil).varint(1, 1).varint(1, 1).bytes(1, packedVarints(3, 3)).
		varint(2, uint64(Float)).str(8, "W")
	raw := make([]byte, 9*4)
	for i := range 9 {
		binary.LittleEndian.PutUint32(raw[4*i:], math.Float32bits(float32(i)))
	}
	weights = weights.bytes(9, raw)
	node := msg(nil).str(1, "x").str(1, "W").str(2, "y").str(3, "conv0").str(4, "Conv").
		bytes(5, msg(nil).str(1, "strides").varint(8, 2).varint(8, 2).varint(20, uint64(AttrInts))).
		bytes(5, msg(nil).str(1, "pads").bytes(8, packedVarints(1, 1, 1, 1)).varint(20, uint64(AttrInts))).
		bytes(5, msg(nil).str(1, "auto_pad").str(4, "NOTSET").varint(20, uint64(AttrString))).
		bytes(5, msg(nil).str(1, "alpha").fixed32(2, math.Float32bits(0.5)).varint(20, uint64(AttrFloat))).
		bytes(5, msg(nil).str(1, "scales").fixed32(7, math.Float32bits(1.5)).
				bytes(7, binary.LittleEndian.AppendUint32(nil, math.Float32bits(2.5))).varint(20, uint64(AttrFloats))).
		varint(99, 7) // unknown field
	dims := msg(nil).bytes(1, msg(nil).varint(1, 1)).bytes(1, msg(nil).str(2, "N")).bytes(1, nil)
	input := msg(nil).str(1, "x").bytes(2, msg(nil).bytes(1, msg(nil).varint(1, uint64(Float)).bytes(2, dims)))
	graph := msg(nil).bytes(1, node).str(2, "g").bytes(5, weights).bytes(11, input).
		bytes(12, msg(nil).str(1, "y"))
	m := msg(nil).varint(1, 8).bytes(8, msg(nil).varint(2, 17)).str(2, "handcrafted").
		fixed64(30, 1) // unknown fixed64 field
	// A group (field 40) with a nested varint, skipped as unknown.
	m = protowire.AppendTag(m, 40, protowire.StartGroupType)
	m = m.varint(1, 5)
	m = protowire.AppendTag(m, 40, protowire.EndGroupType)
	m = m.fixed32(1, 3) // ir_version with the wrong wire type: skipped
	return m.bytes(7, graph)
}

func TestDecodeHandcraftedModel(t *testing.T) {
	m, err := DecodeModel(handcraftedModel())
	if err != nil {
		t.Fatal(err)
	}
	if m.IRVersion != 8 || m.ProducerName != "handcrafted" {
		t.Errorf("model header %+v", m)
	}
	if v, ok := m.Opset("ai.onnx"); !ok || v != 17 {
		t.Errorf("opset %d %v", v, ok)
	}
	g := m.Graph
	if g.Name != "g" || len(g.Nodes) != 1 || len(g.Initializers) != 1 || len(g.Inputs) != 1 || len(g.Outputs) != 1 {
		t.Fatalf("graph %+v", g)
	}
	n := g.Nodes[0]
	if n.OpType != "Conv" || n.Name != "conv0" || !slices.Equal(n.Inputs, []string{"x", "W"}) || !slices.Equal(n.Outputs, []string{"y"}) {
		t.Errorf("node %+v", n)
	}
	if a := n.Attr("strides"); a == nil || a.Type != AttrInts || !slices.Equal(a.Ints, []int64{2, 2}) {
		t.Errorf("strides %+v", a)
	}
	if a := n.Attr("pads"); a == nil || !slices.Equal(a.Ints, []int64{1, 1, 1, 1}) {
		t.Errorf("pads %+v", a)
	}
	if a := n.Attr("auto_pad"); a == nil || a.S != "NOTSET" || a.Type != AttrString {
		t.Errorf("auto_pad %+v", a)
	}
	if a := n.Attr("alpha"); a == nil || a.F != 0.5 {
		t.Errorf("alpha %+v", a)
	}
	if a := n.Attr("scales"); a == nil || !slices.Equal(a.Floats, []float32{1.5, 2.5}) {
		t.Errorf("scales %+v", a)
	}
	if n.Attr("missing") != nil {
		t.Error("missing attribute found")
	}
	w := g.Initializer("W")
	if w == nil || !slices.Equal(w.Dims, []int64{1, 1, 3, 3}) || w.DataType != Float {
		t.Fatalf("W %+v", w)
	}
	v, err := w.Float64s()
	if err != nil || !slices.Equal(v, []float64{0, 1, 2, 3, 4, 5, 6, 7, 8}) {
		t.Errorf("W values %v, %v", v, err)
	}
	in := g.Inputs[0]
	want := []Dim{{Value: 1, HasValue: true}, {Param: "N"}, {}}
	if !in.IsTensor || in.ElemType != Float || !in.HasShape || !slices.Equal(in.Shape, want) {
		t.Errorf("input %+v", in)
	}
	if out := g.Outputs[0]; out.Name != "y" || out.IsTensor || out.HasShape {
		t.Errorf("output %+v", out)
	}
}

func TestFloat64s(t *testing.T) {
	le := binary.LittleEndian
	f32 := func(vs ...float32) []byte {
		var b []byte
		for _, v := range vs {
			b = le.AppendUint32(b, math.Float32bits(v))
		}
		return b
	}
	tests := []struct {
		name   string
		tensor msg
		want   []float64
		err    string
	}{
		{"float raw", msg(nil).varint(1, 3).varint(2, 1).bytes(9, f32(1, -2, 0.5)), []float64{1, -2, 0.5}, ""},
		{"float packed", msg(nil).varint(1, 2).varint(2, 1).bytes(4, f32(3, 4)), []float64{3, 4}, ""},
		{"float unpacked", msg(nil).varint(1, 2).varint(2, 1).fixed32(4, math.Float32bits(3)).fixed32(4, math.Float32bits(4)), []float64{3, 4}, ""},
		{"double raw", msg(nil).varint(1, 1).varint(2, 11).bytes(9, le.AppendUint64(nil, math.Float64bits(0.1))), []float64{0.1}, ""},
		{"double typed", msg(nil).varint(1, 2).varint(2, 11).bytes(10, le.AppendUint64(le.AppendUint64(nil, math.Float64bits(1)), math.Float64bits(2))), []float64{1, 2}, ""},
		{"int64 typed", msg(nil).varint(1, 3).varint(2, 7).bytes(7, packedVarints(2, -4, 1<<40)), []float64{2, -4, 1 << 40}, ""},
		{"int64 raw", msg(nil).varint(1, 1).varint(2, 7).bytes(9, le.AppendUint64(nil, uint64(1<<63-1))), []float64{1<<63 - 1}, ""},
		{"int32 typed", msg(nil).varint(1, 2).varint(2, 6).varint(5, uint64(1<<64-3)).varint(5, 9), []float64{-3, 9}, ""},
		{"int32 raw", msg(nil).varint(1, 2).varint(2, 6).bytes(9, le.AppendUint32(le.AppendUint32(nil, 0xfffffffe), 5)), []float64{-2, 5}, ""},
		{"uint8 raw", msg(nil).varint(1, 2).varint(2, 2).bytes(9, []byte{255, 7}), []float64{255, 7}, ""},
		{"float16 raw", msg(nil).varint(1, 3).varint(2, 10).bytes(9, []byte{0x00, 0x3c, 0x00, 0xc0, 0x01, 0x00}), []float64{1, -2, math.Ldexp(1, -24)}, ""},
		{"scalar", msg(nil).varint(2, 1).bytes(4, f32(7)), []float64{7}, ""},
		{"empty", msg(nil).varint(1, 0).varint(2, 1), []float64{}, ""},
		{"short raw", msg(nil).varint(1, 3).varint(2, 1).bytes(9, f32(1, 2)), nil, "raw_data has 8 bytes, want 12"},
		{"short typed", msg(nil).varint(1, 3).varint(2, 1).bytes(4, f32(1, 2)), nil, "float_data has 2 values, want 3"},
		{"negative dim", msg(nil).varint(1, uint64(1<<64-1)).varint(2, 1), nil, "negative"},
		{"huge dims", msg(nil).bytes(1, packedVarints(1<<30, 1<<30, 1<<30)).varint(2, 1), nil, "more than 2^40"},
		{"string", msg(nil).varint(1, 1).varint(2, 8), nil, "unsupported data type"},
		{"external", msg(nil).varint(1, 1).varint(2, 1).bytes(13, msg(nil).str(1, "location").str(2, "w.bin")).varint(14, 1), nil, `stored externally in "w.bin"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tensor, err := DecodeTensor(tc.tensor)
			if err != nil {
				t.Fatal(err)
			}
			got, err := tensor.Float64s()
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil || !slices.Equal(got, tc.want) {
				t.Fatalf("got %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}

func TestLoadExternal(t *testing.T) {
	dir := t.TempDir()
	data := []byte("xxxx")
	for _, v := range []float32{1.5, -3} {
		data = binary.LittleEndian.AppendUint32(data, math.Float32bits(v))
	}
	if err := os.WriteFile(filepath.Join(dir, "w.bin"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	ext := func(kv ...string) msg {
		m := msg(nil).varint(1, 2).varint(2, 1).str(8, "w").varint(14, 1)
		for i := 0; i < len(kv); i += 2 {
			m = m.bytes(13, msg(nil).str(1, kv[i]).str(2, kv[i+1]))
		}
		return m
	}
	tensor, err := DecodeTensor(ext("location", "w.bin", "offset", "4", "length", "8"))
	if err != nil {
		t.Fatal(err)
	}
	if err := tensor.LoadExternal(dir); err != nil {
		t.Fatal(err)
	}
	if v, err := tensor.Float64s(); err != nil || !slices.Equal(v, []float64{1.5, -3}) {
		t.Fatalf("got %v, %v", v, err)
	}
	for _, bad := range [][]string{
		{"location", "../w.bin"},
		{"location", "w.bin", "offset", "8", "length", "8"},
		{"location", "w.bin", "offset", "x"},
		{"location", "missing.bin"},
		{},
	} {
		tensor, err := DecodeTensor(ext(bad...))
		if err != nil {
			t.Fatal(err)
		}
		if err := tensor.LoadExternal(dir); err == nil {
			t.Errorf("%v: no error", bad)
		}
	}
}

// External data stays inside the model's folder and within the tensor's
// declared size: a link out of the folder (to /etc/passwd, or to a file
// beside the folder) is refused, a link inside it is followed, a FIFO is
// refused without waiting for a writer, and a range other than the
// tensor's two floats (a large sparse file without "length") is refused
// before anything is allocated.
func TestLoadExternalStaysInside(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "model")
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.Mkdir(dir, 0o755))
	floats := binary.LittleEndian.AppendUint32(binary.LittleEndian.AppendUint32(nil, math.Float32bits(1.5)), math.Float32bits(-3))
	must(os.WriteFile(filepath.Join(dir, "w.bin"), floats, 0o644))
	must(os.WriteFile(filepath.Join(root, "secret.bin"), floats, 0o644))
	must(os.Symlink("w.bin", filepath.Join(dir, "alias.bin")))
	must(os.Symlink("/etc/passwd", filepath.Join(dir, "passwd.bin")))
	must(os.Symlink("../secret.bin", filepath.Join(dir, "up.bin")))
	must(syscall.Mkfifo(filepath.Join(dir, "fifo.bin"), 0o644))
	sparse, err := os.Create(filepath.Join(dir, "sparse.bin"))
	must(err)
	must(sparse.Truncate(64 << 20))
	must(sparse.Close())
	for _, tc := range []struct {
		kv   []string
		want error // nil: loads 1.5, -3
	}{
		{[]string{"location", "w.bin"}, nil},
		{[]string{"location", "alias.bin", "length", "8"}, nil},
		{[]string{"location", "passwd.bin"}, infile.ErrOutside},
		{[]string{"location", "up.bin", "length", "8"}, infile.ErrOutside},
		{[]string{"location", "fifo.bin"}, infile.ErrNotRegular},
		{[]string{"location", "sparse.bin"}, errSize},
		{[]string{"location", "sparse.bin", "length", "33554432"}, errSize},
	} {
		m := msg(nil).varint(1, 2).varint(2, 1).str(8, "w").varint(14, 1)
		for i := 0; i < len(tc.kv); i += 2 {
			m = m.bytes(13, msg(nil).str(1, tc.kv[i]).str(2, tc.kv[i+1]))
		}
		tensor, err := DecodeTensor(m)
		must(err)
		err = tensor.LoadExternal(dir)
		switch {
		case tc.want == nil:
			if v, ferr := tensor.Float64s(); err != nil || ferr != nil || !slices.Equal(v, []float64{1.5, -3}) {
				t.Errorf("%v: got %v, %v, %v", tc.kv, v, err, ferr)
			}
		case tc.want == errSize:
			if err == nil || len(tensor.RawData) != 0 {
				t.Errorf("%v: got %d bytes, %v; want a size error", tc.kv, len(tensor.RawData), err)
			}
		case !errors.Is(err, tc.want):
			t.Errorf("%v: got %v; want %v", tc.kv, err, tc.want)
		}
	}
}

// errSize marks a case that must fail on the range's size.
var errSize = errors.New("size")

// ReadModel names a file that is no model, and refuses special files
// before reading them.
func TestReadModelNotAModel(t *testing.T) {
	dir := t.TempDir()
	readme := filepath.Join(dir, "README.md")
	if err := os.WriteFile(readme, []byte("# rulebook\n\nrulebook enumerates small tensor graphs.\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(dir, "empty.onnx")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo.onnx")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		path string
		want error
	}{
		{readme, ErrNotModel},
		{empty, ErrNotModel},
		{fifo, infile.ErrNotRegular},
		{"/dev/zero", infile.ErrNotRegular},
		{dir, infile.ErrNotRegular},
	} {
		_, err := ReadModel(tc.path)
		if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.path) {
			t.Errorf("ReadModel(%s) = %v; want %v naming the file", tc.path, err, tc.want)
		}
	}
}

func TestDecodeErrors(t *testing.T) {
	attr := func(m msg) msg { return msg(nil).bytes(5, m) }
	nodes := msg(nil)
	for range 3 {
		nodes = nodes.bytes(1, msg(nil).str(4, "Relu"))
	}
	// node[3]: attribute[0] is fine, attribute[1] ends inside the varint i.
	bad := append(msg(nil).str(1, "axis").varint(20, 2), protowire.AppendTag(nil, 3, protowire.VarintType)...)
	bad = append(bad, 0x80)
	node3 := msg(nil).str(4, "Concat")
	node3 = append(node3, attr(msg(nil).str(1, "x"))...)
	node3 = append(node3, attr(bad)...)
	graph := append(nodes, msg(nil).bytes(1, node3)...)
	model := msg(nil).varint(1, 8).bytes(7, graph)
	errOffset := len(model) - 1 // the dangling 0x80

	tests := []struct {
		name  string
		input []byte
		model bool
		want  string
	}{
		{"truncated attribute varint", model, true,
			"onnx: graph.node[3].attribute[1].i: truncated varint at byte " + strconv.Itoa(errOffset)},
		{"length past end", msg(nil).varint(1, 8).str(7, "ab")[:5], true, "onnx: graph: length 2 exceeds the 1 bytes left at byte 3"},
		{"truncated tag", []byte{0x80}, true, "onnx: truncated varint at byte 0"},
		{"field number zero", []byte{0x00}, true, "onnx: invalid field number 0 at byte 0"},
		{"reserved wire type", []byte{0x0f}, true, "onnx: field 1: reserved wire type 7 at byte 0"},
		{"end group", []byte{0x0c}, true, "onnx: field 1: end-group marker without a group at byte 0"},
		{"mismatched group", []byte{0x0b, 0x14}, true, "onnx: field 1: malformed group: mismatched end-group marker at byte 1"},
		{"unterminated group", []byte{0x0b, 0x08, 0x01}, true, "onnx: field 1: malformed group: truncated at byte 1"},
		{"varint overflow", append([]byte{0x08}, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01), true,
			"onnx: ir_version: varint overflows 64 bits at byte 1"},
		{"packed floats", msg(nil).bytes(4, []byte{1, 2, 3}), false, "onnx: float_data: packed fixed32 data of 3 bytes is not a multiple of 4 at byte 2"},
		{"packed dims", msg(nil).bytes(1, []byte{0x80}), false, "onnx: dims: truncated varint at byte 2"},
		{"external entry", msg(nil).bytes(13, []byte{0x0a, 0x05}), false, "onnx: external_data[0].key: length 5 exceeds the 0 bytes left at byte 3"},
		{"initializer", msg(nil).bytes(7, msg(nil).bytes(5, msg(nil).bytes(10, []byte{1}))), true,
			"onnx: graph.initializer[0].double_data: packed fixed64 data of 1 bytes is not a multiple of 8 at byte 6"},
		{"value info dim", msg(nil).bytes(7, msg(nil).bytes(11, msg(nil).bytes(2, msg(nil).bytes(1, msg(nil).bytes(2, msg(nil).bytes(1, []byte{0x08, 0x80})))))),
			true, "onnx: graph.input[0].type.tensor_type.shape.dim[0].dim_value: truncated varint at byte 13"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			if tc.model {
				_, err = DecodeModel(tc.input)
			} else {
				_, err = DecodeTensor(tc.input)
			}
			if err == nil {
				t.Fatal("no error")
			}
			checkDecodeError(t, err, len(tc.input))
			if err.Error() != tc.want {
				t.Fatalf("error\n  %s\nwant\n  %s", err, tc.want)
			}
		})
	}

	// ReadModel and ReadTensor name the file.
	path := filepath.Join(t.TempDir(), "model.onnx")
	if err := os.WriteFile(path, model, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := ReadModel(path)
	if want := "onnx: " + path + ": graph.node[3].attribute[1].i: truncated varint at byte " + strconv.Itoa(errOffset); err == nil || err.Error() != want {
		t.Errorf("ReadModel: %v, want %s", err, want)
	}
	if _, err := ReadTensor(path + ".missing"); err == nil || !strings.HasPrefix(err.Error(), "onnx: ") {
		t.Errorf("ReadTensor of a missing file: %v", err)
	}
}

// ---- fuzzing ----

// fuzzSeedLimit caps seed size: the fuzzer minimises every new interesting
// input, which stalls it for minutes on inputs of tens of kilobytes.
const fuzzSeedLimit = 4 << 10

// fuzzSeedFiles returns up to limit files matching the patterns; files over
// fuzzSeedLimit are passed through shrink (nil drops them).
func fuzzSeedFiles(limit int, shrink func([]byte) []byte, patterns ...string) [][]byte {
	var seeds [][]byte
	for _, p := range patterns {
		files, _ := filepath.Glob(p)
		for _, f := range files {
			if len(seeds) >= limit {
				return seeds
			}
			b, err := os.ReadFile(f)
			if err != nil {
				continue
			}
			if len(b) > fuzzSeedLimit && shrink != nil {
				b = shrink(b)
			}
			if len(b) > 0 && len(b) <= fuzzSeedLimit {
				seeds = append(seeds, b)
			}
		}
	}
	return seeds
}

// shrinkModel keeps a real model's header and the first few nodes, inputs,
// outputs and small initializers of its graph, re-encoded from the original
// field records, so that a large model yields a small seed.
func shrinkModel(b []byte) []byte {
	var out []byte
	eachRecord(b, func(num protowire.Number, rec, value []byte) {
		switch {
		case num == 7 && value != nil:
			var g []byte
			nodes, inits := 0, 0
			eachRecord(value, func(num protowire.Number, rec, _ []byte) {
				switch {
				case num == 1 && nodes < 8:
					g, nodes = append(g, rec...), nodes+1
				case num == 5 && inits < 2 && len(rec) < 256:
					g, inits = append(g, rec...), inits+1
				case num != 1 && num != 5 && num != 13 && len(rec) < 512:
					g = append(g, rec...)
				}
			})
			out = protowire.AppendBytes(protowire.AppendTag(out, 7, protowire.BytesType), g)
		case len(rec) < 256:
			out = append(out, rec...)
		}
	})
	return out
}

// eachRecord calls fn with each field record of a well-formed message and,
// for length-delimited fields, the value.
func eachRecord(b []byte, fn func(num protowire.Number, rec, value []byte)) {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeField(b)
		if n < 0 {
			return
		}
		var value []byte
		if typ == protowire.BytesType {
			_, _, m := protowire.ConsumeTag(b)
			value, _ = protowire.ConsumeBytes(b[m:n])
		}
		fn(num, b[:n], value)
		b = b[n:]
	}
}

func nodeTestPatterns(suffix string) []string {
	var ps []string
	for _, d := range nodeTestDirs() {
		for _, c := range []string{"test_conv_with_strides_padding", "test_maxpool_2d_pads", "test_split_variable_parts_2d", "test_transpose_default"} {
			ps = append(ps, filepath.Join(d, c, suffix))
		}
	}
	return ps
}

// exercise runs the accessors that interpret decoded data; none may panic.
func exerciseTensor(t *Tensor) {
	if t == nil {
		return
	}
	v, err := t.Float64s()
	if err == nil {
		if n, err := t.NumElements(); err != nil || n != len(v) {
			panic("Float64s returned a count that disagrees with the dimensions")
		}
	}
	t.ExternalLocation("location")
	_ = t.DataType.String()
}

func FuzzDecodeModel(f *testing.F) {
	f.Add(handcraftedModel())
	f.Add([]byte{})
	f.Add([]byte{0x3a, 0x04, 0x0a, 0x02, 0x22, 0x00}) // graph { node { op_type "" } }
	patterns := append([]string{filepath.Join(sharedModels, "*.onnx")}, nodeTestPatterns("model.onnx")...)
	for _, s := range fuzzSeedFiles(12, shrinkModel, patterns...) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := DecodeModel(b)
		if err != nil {
			checkDecodeError(t, err, len(b))
			return
		}
		m.Opset("")
		if m.Graph == nil {
			return
		}
		for _, init := range m.Graph.Initializers {
			exerciseTensor(init)
		}
		for _, n := range m.Graph.Nodes {
			for _, a := range n.Attributes {
				exerciseTensor(a.T)
				_ = a.Type.String()
			}
		}
		for _, vi := range m.Graph.Inputs {
			for _, d := range vi.Shape {
				_ = d.String()
			}
		}
	})
}

func FuzzDecodeTensor(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte(msg(nil).varint(1, 2).varint(2, 1).bytes(9, make([]byte, 8))))
	f.Add([]byte(msg(nil).bytes(1, packedVarints(2, 3)).varint(2, 7).bytes(7, packedVarints(1, 2, 3, 4, 5, 6))))
	f.Add([]byte(msg(nil).varint(1, 1).varint(2, 10).varint(5, 0x3c00)))
	patterns := append([]string{filepath.Join(sharedModels, "squeezenet1_1-full_test_data_set_0", "*.pb")},
		nodeTestPatterns(filepath.Join("test_data_set_0", "*.pb"))...)
	for _, s := range fuzzSeedFiles(12, nil, patterns...) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		tensor, err := DecodeTensor(b)
		if err != nil {
			checkDecodeError(t, err, len(b))
			return
		}
		exerciseTensor(tensor)
	})
}

// The seeds derived from real models must stay valid models with nodes.
func TestDecodeShrunkSeeds(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join(sharedModels, "*.onnx"))
	if len(files) == 0 {
		if os.Getenv("CI") != "" {
			t.Fatalf("no models in %s; CI expects ../shared beside the repository", sharedModels)
		}
		missing(t, "no models in %s", sharedModels)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		seed := shrinkModel(b)
		m, err := DecodeModel(seed)
		if err != nil {
			t.Fatalf("%s: shrunk seed: %v", f, err)
		}
		if len(seed) > fuzzSeedLimit || m.Graph == nil || len(m.Graph.Nodes) == 0 {
			t.Errorf("%s: shrunk seed of %d bytes with graph %+v", f, len(seed), m.Graph)
		}
	}
}
