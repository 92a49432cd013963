package runtime

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"rulebook/internal/budget"
	"rulebook/onnx"
)

// TestMemoryBudget loads models whose declared sizes would need tens of
// gigabytes: each is refused at load, before anything is allocated, with
// a line naming the file, the node, initializer or input, and the size.
// Sizes within the budget load, and small ones add up against it.
func TestMemoryBudget(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	relu := func(in string) [][]byte { return [][]byte{pbNode("Relu", []string{in}, []string{"y"})} }
	out := [][]byte{pbValueInfo("y")}
	// Three generated weights of 400 KiB each pass one by one and add up
	// past 1 MiB.
	var three [][]byte
	var threeNodes [][]byte
	for i, name := range []string{"w1", "w2", "w3"} {
		three = append(three, pbExternalTensor(name, []int64{100 << 10}, "absent.bin", 0, 0))
		in := "x"
		if i > 0 {
			in = "s" + string(rune('0'+i))
		}
		threeNodes = append(threeNodes, pbNode("Add", []string{in, name}, []string{"s" + string(rune('1'+i))}))
	}
	threeNodes = append(threeNodes, pbNode("Relu", []string{"s3"}, []string{"y"}))
	for _, tc := range []struct {
		name   string
		model  []byte
		dims   map[string]int
		budget budget.Budget
		want   []string // fragments of the refusal; none when it loads
	}{
		{name: "ConstantOfShape 2^16 x 2^17",
			model: pbModel(13, pbGraph(
				[][]byte{pbNode("ConstantOfShape", []string{"shape"}, []string{"c"}), pbNode("Add", []string{"x", "c"}, []string{"y"})},
				[][]byte{pbInt64Tensor("shape", []int64{2}, []int64{1 << 16, 1 << 17})},
				[][]byte{pbValueInfo("x", 1)}, out)),
			budget: budget.New(1 << 30),
			want:   []string{"const.onnx", `node 0 (ConstantOfShape "ConstantOfShape_node")`, "output of shape [65536 131072] (float32)", "32 GiB", "1 GiB"}},
		{name: "absent external initializer 2^17 x 2^16",
			model: pbModel(13, pbGraph(
				[][]byte{pbNode("MatMul", []string{"x", "w"}, []string{"y"})},
				[][]byte{pbExternalTensor("w", []int64{1 << 17, 1 << 16}, "absent.bin", 0, 0)},
				[][]byte{pbValueInfo("x", 1, 1<<17)}, out)),
			budget: budget.New(1 << 30),
			want:   []string{`initializer "w" of shape [131072 65536] (float32)`, "32 GiB"}},
		{name: "graph input 65536 x 65536",
			model:  pbModel(13, pbGraph(relu("x"), nil, [][]byte{pbValueInfo("x", 65536, 65536)}, out)),
			budget: budget.New(1 << 30),
			want:   []string{`input "x" of shape [65536 65536] (float32)`, "16 GiB"}},
		{name: "symbolic dimension N = 2^30",
			model:  pbModel(13, pbGraph(relu("x"), nil, [][]byte{pbValueInfo("x", "N")}, out)),
			dims:   map[string]int{"N": 1 << 30},
			budget: budget.New(1 << 30),
			want:   []string{`input "x" of shape [1073741824] (float32)`, "4 GiB"}},
		{name: "Range of 2^33",
			model: pbModel(13, pbGraph(
				[][]byte{pbNode("Range", []string{"a", "b", "c"}, []string{"r"}), pbNode("Cast", []string{"r"}, []string{"f"}, pbAttrInt("to", 1)), pbNode("Add", []string{"x", "f"}, []string{"y"})},
				[][]byte{pbInt64Tensor("a", nil, []int64{0}), pbInt64Tensor("b", nil, []int64{1 << 33}), pbInt64Tensor("c", nil, []int64{1})},
				[][]byte{pbValueInfo("x", 1)}, out)),
			budget: budget.New(1 << 30),
			want:   []string{`node 0 (Range "Range_node")`, "output of shape [8589934592] (int64)", "160 GiB"}},
		{name: "generated weights add up",
			model:  pbModel(13, pbGraph(threeNodes, three, [][]byte{pbValueInfo("x", 100<<10)}, out)),
			budget: budget.New(1 << 20),
			want:   []string{`initializer "w3"`, "held already"}},
		{name: "within the budget",
			model:  pbModel(13, pbGraph(relu("x"), nil, [][]byte{pbValueInfo("x", 1024, 1024)}, out)),
			budget: budget.New(16 << 20)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			file := "const.onnx"
			if !strings.HasPrefix(tc.name, "ConstantOfShape") {
				file = tc.name + ".onnx"
			}
			path := write(file, tc.model)
			m, _, err := Load(path, LoadOptions{Weights: WeightsAuto, Dims: tc.dims, Memory: tc.budget})
			if tc.want == nil {
				if err != nil {
					t.Fatal(err)
				}
				if _, err := m.NewSession(SessionOptions{Threads: 1}); err != nil {
					t.Fatal(err)
				}
				return
			}
			if !errors.Is(err, budget.ErrExceeded) {
				t.Fatalf("got %v, want a refusal over the memory budget", err)
			}
			wantErr(t, err, append([]string{path}, tc.want...)...)
			if strings.Count(err.Error(), "\n") > 0 {
				t.Errorf("the refusal is more than one line: %q", err)
			}
		})
	}
}

// TestSessionBudget refuses a session whose buffers pass the budget,
// though each input and constant fits: a MatMul of x [1024 1] by w [1 1024]
// makes a 4 MiB intermediate from 8 KiB of inputs.
func TestSessionBudget(t *testing.T) {
	b := pbModel(13, pbGraph(
		[][]byte{pbNode("MatMul", []string{"x", "w"}, []string{"m"}), pbNode("Relu", []string{"m"}, []string{"y"})},
		[][]byte{pbFloatTensor("w", []int64{1, 1024}, make([]float32, 1024))},
		[][]byte{pbValueInfo("x", 1024, 1)}, [][]byte{pbValueInfo("y")}))
	m, err := onnx.DecodeModel(b)
	if err != nil {
		t.Fatal(err)
	}
	rt, _, err := FromONNX(m, "", LoadOptions{Memory: budget.New(6 << 20)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rt.NewSession(SessionOptions{Threads: 1}); !errors.Is(err, budget.ErrExceeded) {
		t.Fatalf("got %v, want a refusal over the memory budget", err)
	}
	rt, _, err = FromONNX(m, "", LoadOptions{Memory: budget.New(16 << 20)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rt.NewSession(SessionOptions{Threads: 1}); err != nil {
		t.Fatal(err)
	}
}
