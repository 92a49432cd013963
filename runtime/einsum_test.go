package runtime

import (
	"strings"
	"testing"
)

// TestEinsum checks Einsum against a loop over every assignment of the
// labels, for matrix products in every layout, batches (maxvit's
// attention), contractions over several labels, one-operand sums and
// transposes, and implicit outputs.
func TestEinsum(t *testing.T) {
	cases := []struct {
		eq     string
		shapes [][]int
	}{
		{"ij,jk->ik", [][]int{{3, 4}, {4, 5}}},
		{"ij,kj->ik", [][]int{{3, 4}, {5, 4}}},
		{"ji,jk->ki", [][]int{{4, 3}, {4, 5}}},
		{"B G H I D, B G H J D -> B G H I J", [][]int{{1, 2, 3, 7, 8}, {1, 2, 3, 6, 8}}},
		{"B G H I J, B G H J D -> B G H I D", [][]int{{1, 2, 3, 7, 6}, {1, 2, 3, 6, 8}}},
		{"bij,bjk->bik", [][]int{{5, 2, 3}, {5, 3, 4}}},
		{"abc,cbd->ad", [][]int{{2, 3, 4}, {4, 3, 5}}},
		{"i,i->", [][]int{{6}, {6}}},
		{"i,j->ij", [][]int{{3}, {4}}},
		{"ij,jk", [][]int{{3, 4}, {4, 5}}},
		{"ij->ji", [][]int{{3, 4}}},
		{"ijk->i", [][]int{{3, 4, 5}}},
		{"ijk->ki", [][]int{{3, 4, 5}}},
	}
	for _, c := range cases {
		t.Run(c.eq, func(t *testing.T) {
			var inputs []namedTensor
			var names []string
			for i, s := range c.shapes {
				name := string(rune('a' + i))
				inputs = append(inputs, namedTensor{name, randomTensor(uint64(i+1), s...)})
				names = append(names, name)
			}
			got := runNode(t, 12, pbNode("Einsum", names, []string{"y"}, pbAttrString("equation", c.eq)), nil, inputs, "y")[0]
			shape, want := naiveEinsum(c.eq, inputs)
			assertClose(t, got, shape, want)
		})
	}
}

// TestEinsumRefused: what the runtime does not compute is refused at
// load with the equation and the reason.
func TestEinsumRefused(t *testing.T) {
	cases := []struct {
		eq     string
		shapes [][]int
		want   string
	}{
		{"...ij,...jk->...ik", [][]int{{2, 3, 4}, {2, 4, 5}}, "ellipsis"},
		{"ii->i", [][]int{{3, 3}}, "label i repeats"},
		{"ij,jk->ik", [][]int{{3, 4}, {5, 6}}, "label j is 4 in one operand and 5"},
		{"ij,jk->i", [][]int{{3, 4}, {4, 5}}, "label k is summed in the second operand only"},
		{"ij,jk->ikz", [][]int{{3, 4}, {4, 5}}, "output label z"},
	}
	for _, c := range cases {
		t.Run(c.eq, func(t *testing.T) {
			var infos [][]byte
			var names []string
			for i, s := range c.shapes {
				name := string(rune('a' + i))
				infos = append(infos, pbValueInfoShape(name, s))
				names = append(names, name)
			}
			model := pbModel(12, pbGraph([][]byte{pbNode("Einsum", names, []string{"y"}, pbAttrString("equation", c.eq))}, nil, infos, [][]byte{pbValueInfo("y")}))
			_, _, err := fromBytes(model, LoadOptions{})
			wantErr(t, err, "Einsum", c.want)
		})
	}
}

// naiveEinsum sums the product of the operands over every assignment of
// the labels, in float64.
func naiveEinsum(eq string, inputs []namedTensor) ([]int, []float32) {
	eq = strings.ReplaceAll(eq, " ", "")
	in, out, explicit := strings.Cut(eq, "->")
	terms := strings.Split(in, ",")
	sizes := map[byte]int{}
	var labels []byte
	count := map[byte]int{}
	for i, term := range terms {
		for j := range len(term) {
			if _, ok := sizes[term[j]]; !ok {
				labels = append(labels, term[j])
			}
			sizes[term[j]] = inputs[i].t.Shape[j]
			count[term[j]]++
		}
	}
	if !explicit {
		for c := byte('a'); c <= 'z'; c++ {
			if count[c] == 1 {
				out += string(c)
			}
		}
	}
	shape := make([]int, len(out))
	for i := range len(out) {
		shape[i] = sizes[out[i]]
	}
	result := make([]float64, numElements(shape))
	value := map[byte]int{}
	var walk func(int)
	walk = func(d int) {
		if d == len(labels) {
			p := 1.0
			for i, term := range terms {
				p *= float64(inputs[i].t.Data[flatIndex(term, value, inputs[i].t.Shape)])
			}
			result[flatIndex(out, value, shape)] += p
			return
		}
		for v := range sizes[labels[d]] {
			value[labels[d]] = v
			walk(d + 1)
		}
	}
	walk(0)
	want := make([]float32, len(result))
	for i, v := range result {
		want[i] = float32(v)
	}
	return shape, want
}

func flatIndex(term string, value map[byte]int, shape []int) int {
	idx := 0
	for j := range len(term) {
		idx = idx*shape[j] + value[term[j]]
	}
	return idx
}
