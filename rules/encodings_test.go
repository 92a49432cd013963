package rules_test

import (
	"slices"
	"testing"

	"rulebook/rules"
)

// site answers an encoding's questions with fixed facts.
type site struct {
	kernel   int // 0: the rule does not tell
	rank     int
	parallel bool
}

func (s site) Kernel(int) (int, int, bool) { return s.kernel, s.kernel, s.kernel > 0 }
func (s site) Rank() int                   { return s.rank }
func (s site) Parallel() bool              { return s.parallel }

// formed lists the operators of every registry that TASO or FlexFlow
// names, once each.
func formed() []*rules.Op {
	var out []*rules.Op
	seen := map[string]bool{}
	for _, reg := range []*rules.Registry{rules.All(), rules.FlexFlowReading()} {
		for _, op := range reg.Ops() {
			if seen[op.Name] || op.TASO.None && op.FlexFlow.None {
				continue
			}
			seen[op.Name] = true
			out = append(out, op)
		}
	}
	return out
}

// TestEveryFormHasItsEncoding walks the registries: an operator TASO or
// FlexFlow names has an encoding of its parameters as their keys, and its
// encoding and rank rule refer to operands and parameters it has.
func TestEveryFormHasItsEncoding(t *testing.T) {
	for _, op := range formed() {
		k := op.Keys
		if k.Encode == nil || k.Decode == nil {
			t.Errorf("%s: a TASO or FlexFlow form, but no encoding of its parameters (Keys)", op.Name)
		}
		for _, i := range k.Inferred {
			if i >= len(op.Params) {
				t.Errorf("%s: inferred parameter %d of %d", op.Name, i, len(op.Params))
			}
		}
		if len(k.Inferred) > 0 && k.Settle == nil {
			t.Errorf("%s: parameters left to the shapes, but no Settle", op.Name)
		}
		for _, a := range op.Ranks.Alike {
			if a >= op.Arity {
				t.Errorf("%s: rank alike with operand %d of %d", op.Name, a, op.Arity)
			}
		}
		for a := range op.Ranks.Operands {
			if a >= op.Arity {
				t.Errorf("%s: rank of operand %d of %d", op.Name, a, op.Arity)
			}
		}
	}
}

// TestEncodingsReadBack writes every operator at every combination of its
// generated parameter values and reads the keys back: the keys are those
// its forms allow, the required ones among them, and the parameters come
// back, but for those left to the shapes.
func TestEncodingsReadBack(t *testing.T) {
	for _, op := range formed() {
		if op.Keys.Encode == nil || op.Keys.Decode == nil {
			continue // TestEveryFormHasItsEncoding reports it
		}
		for _, p := range generated(op) {
			kvs := op.EncodeKeys(p, site{kernel: 3, rank: -1})
			keys := map[rules.TASOParam]int{}
			for _, kv := range kvs {
				if !allowed(op, kv.Key) {
					t.Errorf("%s%v: writes %s, which its forms do not allow", op.Name, p, kv.Key)
				}
				keys[kv.Key] = kv.Value
			}
			for _, k := range required(op) {
				if _, ok := keys[k]; !ok {
					t.Errorf("%s%v: does not write the required %s", op.Name, p, k)
				}
			}
			back, err := op.DecodeKeys(keys)
			want := slices.Clone(p)
			for _, i := range op.Keys.Inferred {
				want[i] = rules.GroupsInferred
			}
			if err != nil || !slices.Equal(back, want) {
				t.Errorf("%s%v: reads back as %v, %v; want %v", op.Name, p, back, err, want)
			}
		}
	}
}

// generated lists every combination of the generated values of an
// operator's parameters.
func generated(op *rules.Op) [][]int {
	out := [][]int{nil}
	for _, spec := range op.Params {
		var next [][]int
		for _, p := range out {
			for _, v := range spec.Generate {
				next = append(next, append(slices.Clone(p), v))
			}
		}
		out = next
	}
	return out
}

func allowed(op *rules.Op, k rules.TASOParam) bool {
	if !op.TASO.None {
		return slices.Contains(op.TASO.Params, k)
	}
	return slices.Contains(op.FlexFlow.Params, k.String())
}

func required(op *rules.Op) []rules.TASOParam {
	if !op.TASO.None {
		return op.TASO.Required
	}
	var out []rules.TASOParam
	for _, name := range op.FlexFlow.Required {
		k, _ := rules.TASOParamNamed(name)
		out = append(out, k)
	}
	return out
}

// TestEncodings pins what TASO's format needs and rules leave open: the
// kernel of a convolution, concat's rank, TASO's activation and padding
// values, and the replica dimension.
func TestEncodings(t *testing.T) {
	k := func(key rules.TASOParam, v int) rules.KeyValue { return rules.KeyValue{Key: key, Value: v} }
	kv := func(kvs ...rules.KeyValue) []rules.KeyValue { return kvs }
	cases := []struct {
		op   string
		p    []int
		at   site
		want []rules.KeyValue
	}{
		{rules.NameConv2D, []int{2, rules.PadValid, rules.ActRelu, 1}, site{kernel: 5, rank: -1},
			kv(k(rules.PMKernelH, 5), k(rules.PMKernelW, 5), k(rules.PMStrideH, 2), k(rules.PMStrideW, 2), k(rules.PMPad, 1), k(rules.PMActi, 2))},
		{rules.NameConv2D, []int{1, rules.PadSame, rules.ActNone, 1}, site{rank: -1},
			kv(k(rules.PMKernelH, 3), k(rules.PMKernelW, 3), k(rules.PMStrideH, 1), k(rules.PMStrideW, 1), k(rules.PMPad, 0), k(rules.PMActi, 0))},
		{rules.NamePoolMax, []int{3, 1, rules.PadSame}, site{rank: -1},
			kv(k(rules.PMOpType, 6), k(rules.PMKernelH, 3), k(rules.PMKernelW, 3), k(rules.PMStrideH, 1), k(rules.PMStrideW, 1), k(rules.PMPad, 0), k(rules.PMActi, 0))},
		{rules.NameConcat, []int{1}, site{rank: -1}, kv(k(rules.PMNumInputs, 2), k(rules.PMAxis, 1), k(rules.PMNumDim, 4))},
		{rules.NameConcat, []int{1}, site{rank: -1, parallel: true}, kv(k(rules.PMNumInputs, 2), k(rules.PMAxis, 1), k(rules.PMNumDim, 3))},
		{rules.NameConcat, []int{3}, site{rank: 2}, kv(k(rules.PMNumInputs, 2), k(rules.PMAxis, 3), k(rules.PMNumDim, 4))},
		{rules.NameTranspose, nil, site{rank: -1}, kv(k(rules.PMNumDim, 2), k(rules.PMPerm, 2), k(rules.PMOutShuffle, 0))},
		{rules.NameReplicate, []int{4}, site{rank: -1}, kv(k(rules.PMParallelDim, 0), k(rules.PMParallelDegree, 4))},
		{rules.NameLinear, []int{rules.ActRelu}, site{rank: -1}, kv(k(rules.PMActi, 2))},
		{rules.NameEwadd, nil, site{rank: -1}, nil},
	}
	for _, c := range cases {
		op, _ := rules.All().Lookup(c.op)
		if got := op.EncodeKeys(c.p, c.at); !slices.Equal(got, c.want) {
			t.Errorf("%s%v at %+v: %v, want %v", c.op, c.p, c.at, got, c.want)
		}
	}
}

// TestDecodingRefuses pins the reasons an operator cannot read keys.
func TestDecodingRefuses(t *testing.T) {
	cases := []struct {
		op   string
		keys map[rules.TASOParam]int
		want string
	}{
		{rules.NameConv2D, map[rules.TASOParam]int{rules.PMStrideH: 1, rules.PMStrideW: 2, rules.PMPad: 0}, "conv2d: stride height and width differ"},
		{rules.NameConv2D, map[rules.TASOParam]int{rules.PMStrideH: 1, rules.PMStrideW: 1, rules.PMPad: 0, rules.PMGroup: 0}, "conv2d: PM_GROUP 0"},
		{rules.NameConv2D, map[rules.TASOParam]int{rules.PMStrideH: 9, rules.PMStrideW: 9, rules.PMPad: 0}, "conv2d: stride 9 outside [1, 8]"},
		{rules.NamePoolAvg, map[rules.TASOParam]int{rules.PMOpType: 6}, "pool_avg: PM_OP_TYPE 6 disagrees with the operator type"},
		{rules.NamePoolAvg, map[rules.TASOParam]int{rules.PMPad: 5}, "pool_avg: padding 5"},
		{rules.NameMatmul, map[rules.TASOParam]int{rules.PMActi: 2}, "matmul with relu activation"},
		{rules.NameLinear, map[rules.TASOParam]int{rules.PMActi: 3}, "linear with tanh activation"},
		{rules.NameConcat, map[rules.TASOParam]int{rules.PMNumInputs: 3}, "concat of 3 inputs"},
		{rules.NameSplit, map[rules.TASOParam]int{rules.PMNumOutputs: 3}, "split into 3 outputs"},
		{rules.NameTranspose, map[rules.TASOParam]int{rules.PMPerm: 1}, "transpose: permutation 1 is not the swap of two axes (2)"},
	}
	for _, c := range cases {
		op, _ := rules.All().Lookup(c.op)
		if _, err := op.DecodeKeys(c.keys); err == nil || err.Error() != c.want {
			t.Errorf("%s %v: %v, want %q", c.op, c.keys, err, c.want)
		}
	}
}
