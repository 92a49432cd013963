package exchange

import (
	"bytes"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"

	"rulebook/internal/testfiles"
	"rulebook/rules"
)

// The foreign rule files are real ones: TASO's graph_subst.pb from its
// repository, the 3-operator collection its generator writes, and FlexFlow's
// graph_subst_3_v2.json, under anchors/ in ../shared beside the repository
// (this package is one level down) or $RULEBOOK_SHARED.
const (
	tasoRepoFile = "taso-repo-graph_subst.pb"
	tasoGenFile  = "taso-generator-3ops.pb"
	flexFlowFile = "flexflow-graph_subst_3_v2.json"
)

// anchor reads a shared rule file (see testfiles.Shared).
func anchor(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(testfiles.Shared(t, "anchors", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func readForeign(t testing.TB, name string, data []byte) *Foreign {
	t.Helper()
	read := ReadTASO
	if strings.HasSuffix(name, ".json") {
		read = ReadFlexFlow
	}
	f, err := read(name, data, rules.Default())
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// texts returns the oriented canonical texts of rules, sorted, after
// checking that each is a valid rule whose text parses back to itself.
func texts(t testing.TB, rs []*rules.Rule) []string {
	t.Helper()
	return textsIn(t, rules.Default(), rs)
}

// textsIn is texts for rules over the operators of reg.
func textsIn(t testing.TB, reg *rules.Registry, rs []*rules.Rule) []string {
	t.Helper()
	out := make([]string, len(rs))
	for i, r := range rs {
		if err := r.Src.Validate(); err != nil {
			t.Fatalf("rule %d: source: %v", i+1, err)
		}
		if err := r.Dst.Validate(); err != nil {
			t.Fatalf("rule %d: target: %v", i+1, err)
		}
		_, text := r.Oriented()
		out[i] = text.String()
		back, err := rules.NewText(reg, text.Src, text.Dst, "", "")
		if err != nil {
			t.Fatalf("rule %d: %s does not read back: %v", i+1, out[i], err)
		}
		if _, again := back.Rule().Oriented(); again.String() != out[i] {
			t.Fatalf("rule %d: %s reads back as %s", i+1, out[i], again)
		}
	}
	slices.Sort(out)
	return out
}

func ruleList(ns []Named) []*rules.Rule {
	out := make([]*rules.Rule, len(ns))
	for i, n := range ns {
		out[i] = n.Rule
	}
	return out
}

func TestReadTASOFiles(t *testing.T) {
	tests := []struct {
		file            string
		rules, distinct int
		want            map[string]string // rule name -> oriented canonical text
	}{
		{tasoRepoFile, 133, 120, map[string]string{
			"rule 1":   "(matmul (matmul ?a ?b) ?c) => (matmul ?a (matmul ?b ?c))",
			"rule 65":  "(relu (conv2d 1 same none 1 ?a ?b)) => (conv2d 1 same relu 1 ?a ?b)",
			"rule 117": "(let ((%0 (conv2d 1 same none 1 (concat 0 ?a ?b) ?c))) (outputs (split0 0 %0) (split1 0 %0))) => (outputs (conv2d 1 same none 1 ?a ?c) (conv2d 1 same none 1 ?b ?c))",
		}},
		{tasoGenFile, 619, 386, map[string]string{
			"rule 87":  "(conv2d 1 same none dw (conv2d 1 same relu 1 ?a ?b) (C_pool 3)) => (pool_avg 3 1 same (relu (conv2d 1 same none 1 ?a ?b)))",
			"rule 91":  "(conv2d 1 same none 1 (conv2d 1 same relu 1 ?a ?b) (enlarge 3 ?c)) => (conv2d 1 same none 1 (relu (conv2d 1 same none 1 ?a ?b)) ?c)",
			"rule 240": "(matmul (smul ?a ?b) (transpose ?c)) => (matmul ?a (transpose (smul ?c ?b)))",
			"rule 405": "(let ((%0 (smul (concat 1 ?a ?b) ?c))) (outputs (split0 1 %0) (split1 1 %0))) => (outputs (smul ?a ?c) (smul ?b ?c))",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			f := readForeign(t, tt.file, anchor(t, tt.file))
			if len(f.Rules) != tt.rules || len(f.Skipped) != 0 || len(f.Unknown) != 0 {
				t.Fatalf("%d rules, %d skipped %v, unknown %v; want %d, none skipped", len(f.Rules), len(f.Skipped), f.Skipped[:min(3, len(f.Skipped))], f.Unknown, tt.rules)
			}
			all := texts(t, ruleList(f.Rules))
			if n := len(slices.Compact(all)); n != tt.distinct {
				t.Errorf("%d distinct canonical rules, want %d", n, tt.distinct)
			}
			found := 0
			for _, n := range f.Rules {
				want, ok := tt.want[n.Name]
				if !ok {
					continue
				}
				found++
				if _, got := n.Rule.Oriented(); got.String() != want {
					t.Errorf("%s:\n got %s\nwant %s", n.Name, got, want)
				}
			}
			if found != len(tt.want) {
				t.Errorf("found %d of the %d named rules", found, len(tt.want))
			}
		})
	}
}

func TestReadFlexFlowFile(t *testing.T) {
	f := readForeign(t, flexFlowFile, anchor(t, flexFlowFile))
	if len(f.Rules) != 50 || len(f.Rules)+len(f.Skipped) != 640 {
		t.Errorf("%d imported + %d skipped, want 50 + 590", len(f.Rules), len(f.Skipped))
	}
	wantUnknown := map[string]int{"OP_REPLICATE": 866, "OP_REDUCE": 578, "OP_LINEAR": 562, "OP_PARTITION": 492, "OP_COMBINE": 92}
	if !maps.Equal(f.Unknown, wantUnknown) {
		t.Errorf("unknown operators %v, want %v", f.Unknown, wantUnknown)
	}
	for _, s := range f.Skipped {
		if !strings.HasPrefix(s.Reason, "unknown operators OP_") || !strings.HasPrefix(s.Name, "taso_rule_") {
			t.Errorf("skipped %s: %s", s.Name, s.Reason)
		}
	}
	if got := len(slices.Compact(texts(t, ruleList(f.Rules)))); got != 50 {
		t.Errorf("%d distinct canonical rules, want 50", got)
	}
	want := map[string]string{
		"taso_rule_454": "(let ((%0 (relu (concat 1 ?a ?b)))) (outputs (split0 1 %0) (split1 1 %0))) => (outputs (relu ?a) (relu ?b))",
		"taso_rule_326": "(ewadd (ewmul ?a ?b) (ewmul ?a ?c)) => (ewmul ?a (ewadd ?b ?c))",
	}
	for _, n := range f.Rules {
		if w, ok := want[n.Name]; ok {
			delete(want, n.Name)
			if _, got := n.Rule.Oriented(); got.String() != w {
				t.Errorf("%s:\n got %s\nwant %s", n.Name, got, w)
			}
		}
	}
	if len(want) > 0 {
		t.Errorf("not imported: %v", want)
	}
	groups := GroupSkips(f.Skipped, f.Unknown)
	want1 := SkipGroup{Rules: 590, Reason: "unknown operators OP_REPLICATE ×866, OP_REDUCE ×578, OP_LINEAR ×562, OP_PARTITION ×492, OP_COMBINE ×92"}
	if len(groups) != 1 || groups[0].Rules != want1.Rules || groups[0].Reason != want1.Reason || groups[0].Names != nil {
		t.Errorf("groups: %+v", groups)
	}
	lines := SummarizeSkips(f.Skipped, f.Unknown)
	if len(lines) != 1 || lines[0] != "590 rules with unknown operators: OP_REPLICATE ×866, OP_REDUCE ×578, OP_LINEAR ×562, OP_PARTITION ×492, OP_COMBINE ×92" {
		t.Errorf("summary: %q", lines)
	}
}

// ours3 reads testdata/ours3.sexpr: every candidate rule of
// 'rulebook generate --max-ops 3' (542 rules over all default operators,
// split and multi-output rules included), with their shapes.
func ours3(t testing.TB) []*rules.Rule {
	t.Helper()
	reg := rules.Default()
	data, err := os.ReadFile(filepath.Join("testdata", "ours3.sexpr"))
	if err != nil {
		t.Fatal(err)
	}
	in, err := ReadSexpr("ours3.sexpr", data, reg)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]*rules.Rule, len(in))
	for i, r := range in {
		out[i], _ = r.Rule().Oriented()
	}
	return out
}

type foreignFormat struct {
	name  string
	file  string
	write func(*bytes.Buffer, []*rules.Rule) ([]Skip, error)
	read  func(string, []byte, *rules.Registry) (*Foreign, error)
}

var foreignFormats = []foreignFormat{
	{"taso-pb", "x.pb", func(b *bytes.Buffer, rs []*rules.Rule) ([]Skip, error) { return WriteTASO(b, rs) }, ReadTASO},
	{"flexflow-json", "x.json", func(b *bytes.Buffer, rs []*rules.Rule) ([]Skip, error) { return WriteFlexFlow(b, rs) }, ReadFlexFlow},
}

// TestForeignRoundTrip writes rule sets in each foreign format and reads
// them back: the canonical texts must be those of the rules written, and
// the rules left out exactly those the format cannot carry.
func TestForeignRoundTrip(t *testing.T) {
	const (
		dwReason     = "conv2d groups that TASO's shapes do not imply (TASO infers groups from shapes)"
		inputReasonT = "an output is a graph input (TASO's mappedOutput pairs operators)"
		inputReasonF = "an output is a graph input (FlexFlow's mappedOutput pairs operators)"
	)
	sets := []struct {
		name  string
		rules func(testing.TB) []*rules.Rule
		skips map[string]map[string]int // format -> reason -> rules
	}{
		{"taso-generator", func(t testing.TB) []*rules.Rule {
			return ruleList(readForeign(t, tasoGenFile, anchor(t, tasoGenFile)).Rules)
		}, nil},
		{"taso-repo", func(t testing.TB) []*rules.Rule {
			return ruleList(readForeign(t, tasoRepoFile, anchor(t, tasoRepoFile)).Rules)
		}, nil},
		{"ours3", ours3, map[string]map[string]int{
			// 8 rules whose result is an input (x·I => x, split∘concat =>
			// its operands…), 64 depth-wise convolutions whose kernel is not
			// a C_pool (TASO infers groups from shapes).
			"taso-pb":       {dwReason: 64, inputReasonT: 8},
			"flexflow-json": {dwReason: 64, inputReasonF: 8},
		}},
	}
	for _, set := range sets {
		for _, ff := range foreignFormats {
			t.Run(set.name+"/"+ff.name, func(t *testing.T) {
				rs := set.rules(t)
				var buf bytes.Buffer
				skipped, err := ff.write(&buf, rs)
				if err != nil {
					t.Fatal(err)
				}
				gotSkips := map[string]int{}
				left := map[int]bool{}
				for _, s := range skipped {
					gotSkips[s.Reason]++
					var i int
					if _, err := fmt.Sscanf(s.Name, "rule %d", &i); err != nil || i < 1 || i > len(rs) {
						t.Fatalf("skip names %q", s.Name)
					}
					left[i-1] = true
				}
				want := set.skips[ff.name]
				if want == nil {
					want = map[string]int{}
				}
				if !maps.Equal(gotSkips, want) {
					t.Errorf("skipped %v, want %v", gotSkips, want)
				}
				if lines := SummarizeSkips(skipped, nil); len(lines) != len(want) {
					t.Errorf("summary %q", lines)
				}
				var kept []*rules.Rule
				for i, r := range rs {
					if !left[i] {
						kept = append(kept, r)
					}
				}
				back, err := ff.read(ff.file, buf.Bytes(), rules.Default())
				if err != nil {
					t.Fatal(err)
				}
				if len(back.Skipped) != 0 || len(back.Rules) != len(kept) {
					t.Fatalf("read back %d rules, %d skipped (%v); wrote %d", len(back.Rules), len(back.Skipped), back.Skipped[:min(3, len(back.Skipped))], len(kept))
				}
				before, after := texts(t, kept), texts(t, ruleList(back.Rules))
				for i := range before {
					if before[i] != after[i] {
						t.Fatalf("first difference:\nwrote %s\n read %s", before[i], after[i])
					}
				}
			})
		}
	}
}

// TestFlexFlowLayout checks that written JSON looks like FlexFlow's own.
func TestFlexFlowLayout(t *testing.T) {
	text, err := rules.NewText(rules.Default(), "(relu (concat 1 ?a ?b))", "(concat 1 (relu ?a) (relu ?b))", "?a:2x4 ?b:2x4", "")
	if err != nil {
		t.Fatal(err)
	}
	r, _ := text.Rule().Oriented()
	var buf bytes.Buffer
	if _, err := WriteFlexFlow(&buf, []*rules.Rule{r}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"{\n  \"_t\": \"RuleCollection\",\n  \"rule\": [\n    {\n      \"_t\": \"Rule\",\n      \"dstOp\": [",
		`"name": "rulebook_rule_1"`,
		`"type": "OP_CONCAT"`,
		`"key": "PM_NUMDIM",` + "\n" + `              "value": 2`,
		`"_t": "MapOutput",` + "\n" + `          "dstOpId": `,
	} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("no %q in\n%s", want, buf.String())
		}
	}
}

// tasoFile encodes rules given in the shared schema, for crafted inputs.
func tasoFile(xs ...xRule) []byte {
	var b []byte
	for i := range xs {
		b = appendMessage(b, 1, encodeRule(&xs[i]))
	}
	return b
}

// TASO's numbers of the operator types and parameter keys the crafted
// rules use: the wire format, as TASO's rules.proto has it.
const (
	tConv2D    = 3
	tPoolMax   = 6
	tPoolAvg   = 7
	tRelu      = 8
	tConcat    = 12
	tSplit     = 13
	tTranspose = 15
	tEwAdd     = 16
	tMatmul    = 18
	tMul       = 19
	tEnlarge   = 20
	tIMatmul   = 22
	tIConv     = 23
	tIEwMul    = 24
	tCPool     = 25

	pmOpType     = 0
	pmNumInputs  = 1
	pmNumOutputs = 2
	pmKernelH    = 4
	pmKernelW    = 5
	pmStrideH    = 6
	pmStrideW    = 7
	pmPad        = 8
	pmActi       = 9
	pmNumDim     = 10
	pmAxis       = 11
	pmPerm       = 12
	pmOutShuffle = 13
)

func op(typ int, in []xTensor, para ...int) xOp {
	o := xOp{typ: rules.TASOType(typ), in: in}
	for i := 0; i+1 < len(para); i += 2 {
		o.para = append(o.para, xParam{key: rules.TASOParam(para[i]), value: para[i+1]})
	}
	return o
}

func ts(ids ...int) []xTensor {
	var out []xTensor
	for i := 0; i+1 < len(ids); i += 2 {
		out = append(out, xTensor{op: ids[i], ts: ids[i+1]})
	}
	return out
}

var out0 = []xMap{{}}

// TestTASOMapping checks operator and parameter mapping on crafted rules,
// one operator on each side, and what makes a rule unimportable.
func TestTASOMapping(t *testing.T) {
	conv := func(para ...int) xOp { return op(tConv2D, ts(-1, 0, -2, 0), para...) }
	convParams := []int{pmKernelH, 3, pmKernelW, 3, pmStrideH, 1, pmStrideW, 1, pmPad, 0, pmActi, 0}
	tests := []struct {
		name       string
		src, dst   []xOp
		out        []xMap
		want       string // canonical text, or
		skip       string // the reason it is skipped
		unknownKey string
	}{
		{"conv kernel H/W ignored", []xOp{conv(pmKernelH, 1, pmKernelW, 3, pmStrideH, 2, pmStrideW, 2, pmPad, 1, pmActi, 2)}, []xOp{conv(convParams...)}, out0,
			"(conv2d 2 valid relu 1 ?a ?b) => (conv2d 1 same none 1 ?a ?b)", "", ""},
		{"dw over C_pool", []xOp{op(tCPool, nil, pmKernelH, 5, pmKernelW, 5), op(tConv2D, ts(-1, 0, 0, 0), convParams...)},
			[]xOp{op(tPoolAvg, ts(-1, 0), pmOpType, tPoolAvg, pmKernelH, 5, pmKernelW, 5, pmStrideH, 1, pmStrideW, 1, pmPad, 0, pmActi, 0)},
			[]xMap{{srcOp: 1}}, "(conv2d 1 same none dw ?a (C_pool 5)) => (pool_avg 5 1 same ?a)", "", ""},
		{"pool shape operand dropped", []xOp{op(tPoolMax, ts(-1, 0, -2, 0), pmKernelH, 3, pmKernelW, 3, pmStrideH, 2, pmStrideW, 2, pmPad, 1)},
			[]xOp{op(tRelu, ts(-1, 0))}, out0, "(pool_max 3 2 valid ?a) => (relu ?a)", "", ""},
		{"enlarge", []xOp{op(tEnlarge, ts(-3, 0, -4, 0), pmKernelH, 5, pmKernelW, 5)}, []xOp{op(tIConv, nil, pmKernelH, 5, pmKernelW, 5)}, out0,
			"(enlarge 5 ?a) => (I_conv 5)", "", ""},
		{"transpose and outshuffle", []xOp{op(tTranspose, ts(-1, 0), pmNumDim, 2, pmPerm, 2, pmOutShuffle, 1)}, []xOp{op(tIMatmul, nil)}, out0,
			"(transpose ?a) => (I_matmul)", "", ""},
		{"split outputs", []xOp{op(tConcat, ts(-1, 0, -2, 0), pmNumInputs, 2, pmAxis, 1, pmNumDim, 2), op(tSplit, ts(0, 0), pmNumOutputs, 2, pmAxis, 1)},
			[]xOp{op(tMul, ts(-1, 0, -2, 0)), op(tIEwMul, nil)}, []xMap{{srcOp: 1, srcTs: 1, dstOp: 0}, {srcOp: 1, srcTs: 0, dstOp: 1}},
			"(let ((%0 (concat 1 ?a ?b))) (outputs (split0 1 %0) (split1 1 %0))) => (outputs (I_ewmul) (smul ?a ?b))", "", ""},
		{"stride H≠W", []xOp{conv(pmStrideH, 1, pmStrideW, 2, pmPad, 0)}, []xOp{conv(convParams...)}, out0, "", "conv2d: stride height and width differ", ""},
		{"kernel H≠W", []xOp{op(tEnlarge, ts(-1, 0), pmKernelH, 3, pmKernelW, 5)}, []xOp{op(tRelu, ts(-1, 0))}, out0, "", "enlarge: kernel height and width differ", ""},
		{"matmul relu", []xOp{op(tMatmul, ts(-1, 0, -2, 0), pmActi, 2)}, []xOp{op(tMatmul, ts(-1, 0, -2, 0), pmActi, 0)}, out0, "", "matmul with relu activation", ""},
		{"conv sigmoid", []xOp{conv(pmStrideH, 1, pmStrideW, 1, pmPad, 0, pmActi, 1)}, []xOp{conv(convParams...)}, out0, "", "conv2d with sigmoid activation", ""},
		{"pool relu", []xOp{op(tPoolMax, ts(-1, 0), pmKernelH, 3, pmKernelW, 3, pmStrideH, 1, pmStrideW, 1, pmPad, 0, pmActi, 2)}, []xOp{op(tRelu, ts(-1, 0))}, out0,
			"", "pool_max with relu activation", ""},
		{"transpose 3-D", []xOp{op(tTranspose, ts(-1, 0), pmNumDim, 3, pmPerm, 2)}, []xOp{op(tRelu, ts(-1, 0))}, out0, "", "transpose of a 3-dimensional tensor", ""},
		{"identity perm", []xOp{op(tTranspose, ts(-1, 0), pmNumDim, 2, pmPerm, 1)}, []xOp{op(tRelu, ts(-1, 0))}, out0, "", "transpose: permutation 1 is not the swap of two axes (2)", ""},
		{"padding 2", []xOp{conv(pmStrideH, 1, pmStrideW, 1, pmPad, 2)}, []xOp{conv(convParams...)}, out0, "", "conv2d: padding 2", ""},
		{"stride 0", []xOp{conv(pmStrideH, 0, pmStrideW, 0, pmPad, 0)}, []xOp{conv(convParams...)}, out0, "", "conv2d: stride 0 outside [1, 8]", ""},
		{"missing axis", []xOp{op(tConcat, ts(-1, 0, -2, 0))}, []xOp{op(tEwAdd, ts(-1, 0, -2, 0))}, out0, "", "concat: missing parameter PM_AXIS", ""},
		{"unexpected key", []xOp{op(tRelu, ts(-1, 0), pmAxis, 1)}, []xOp{op(tRelu, ts(-1, 0))}, out0, "", "relu: unexpected parameter PM_AXIS", ""},
		{"arity", []xOp{op(tEwAdd, ts(-1, 0))}, []xOp{op(tRelu, ts(-1, 0))}, out0, "", "ewadd: 1 operands, expected 2", ""},
		{"concat of 3", []xOp{op(tConcat, ts(-1, 0, -2, 0), pmNumInputs, 3, pmAxis, 0)}, []xOp{op(tEwAdd, ts(-1, 0, -2, 0))}, out0, "", "concat of 3 inputs", ""},
		{"output index", []xOp{op(tRelu, ts(-1, 0))}, []xOp{op(tRelu, ts(-1, 0))}, []xMap{{srcTs: 1}}, "", "relu has 1 outputs, mappedOutput uses output 1", ""},
		{"many outputs", []xOp{op(tRelu, ts(-1, 0))}, []xOp{op(tRelu, ts(-1, 0))}, make([]xMap, 9), "", "more than 8 outputs", ""},
		{"linear", []xOp{op(5, ts(-1, 0, -2, 0), pmActi, 0)}, []xOp{op(tMatmul, ts(-1, 0, -2, 0))}, out0, "", "unknown operators OP_LINEAR (type 5)", "OP_LINEAR (type 5)"},
		{"unnamed type", []xOp{op(99, ts(-1, 0))}, []xOp{op(tRelu, ts(-1, 0))}, out0, "", "unknown operators type 99", "type 99"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := ReadTASO("x.pb", tasoFile(xRule{src: tt.src, dst: tt.dst, out: tt.out}), rules.Default())
			if err != nil {
				t.Fatal(err)
			}
			if tt.skip != "" {
				if len(f.Skipped) != 1 || f.Skipped[0] != (Skip{"rule 1", tt.skip}) {
					t.Errorf("skipped %v, want %q", f.Skipped, tt.skip)
				}
				if tt.unknownKey != "" && f.Unknown[tt.unknownKey] != 1 {
					t.Errorf("unknown %v, want %s", f.Unknown, tt.unknownKey)
				}
				return
			}
			if len(f.Rules) != 1 {
				t.Fatalf("not imported: %v", f.Skipped)
			}
			if _, got := f.Rules[0].Rule.Canonical(); got.String() != tt.want {
				t.Errorf("got  %s\nwant %s", got, tt.want)
			}
		})
	}
}

// TestTASOExportParams checks what is written for parameters TASO needs
// and our rules lack.
func TestTASOExportParams(t *testing.T) {
	tests := []struct {
		src, dst, inputs string
		side             int // 0 source, 1 target
		node             int
		want             []xParam
	}{
		// Kernel size from the input's shape, concat rank from the shapes.
		{"(concat 1 (conv2d 1 same none 1 ?a ?b) (conv2d 1 same none 1 ?a ?c))", "(conv2d 1 same none 1 ?a (concat 0 ?b ?c))", "?a:2x4x5x5 ?b:4x4x1x3 ?c:4x4x1x3", 1, 1,
			[]xParam{{key: pmKernelH, value: 1}, {key: pmKernelW, value: 3}, {key: pmStrideH, value: 1}, {key: pmStrideW, value: 1}, {key: pmPad, value: 0}, {key: pmActi, value: 0}}},
		{"(concat 1 (conv2d 1 same none 1 ?a ?b) (conv2d 1 same none 1 ?a ?c))", "(conv2d 1 same none 1 ?a (concat 0 ?b ?c))", "", 1, 0,
			[]xParam{{key: pmNumInputs, value: 2}, {key: pmAxis, value: 0}, {key: pmNumDim, value: 4}}},
		// Kernel size through enlarge, activation and padding, default rank.
		{"(conv2d 2 valid relu 1 ?a (enlarge 5 ?b))", "(relu ?a)", "", 0, 1,
			[]xParam{{key: pmKernelH, value: 5}, {key: pmKernelW, value: 5}, {key: pmStrideH, value: 2}, {key: pmStrideW, value: 2}, {key: pmPad, value: 1}, {key: pmActi, value: 2}}},
		// Without shapes, the default kernel; matrices from transpose.
		{"(conv2d 1 same none 1 ?a ?b)", "(relu ?a)", "", 0, 0,
			[]xParam{{key: pmKernelH, value: 3}, {key: pmKernelW, value: 3}, {key: pmStrideH, value: 1}, {key: pmStrideW, value: 1}, {key: pmPad, value: 0}, {key: pmActi, value: 0}}},
		{"(transpose (concat 0 ?a ?b))", "(concat 1 (transpose ?a) (transpose ?b))", "", 0, 0,
			[]xParam{{key: pmNumInputs, value: 2}, {key: pmAxis, value: 0}, {key: pmNumDim, value: 2}}},
		{"(pool_avg 3 2 valid ?a)", "(relu ?a)", "", 0, 0,
			[]xParam{{key: pmOpType, value: tPoolAvg}, {key: pmKernelH, value: 3}, {key: pmKernelW, value: 3}, {key: pmStrideH, value: 2}, {key: pmStrideW, value: 2}, {key: pmPad, value: 1}, {key: pmActi, value: 0}}},
	}
	for _, tt := range tests {
		text, err := rules.NewText(rules.Default(), tt.src, tt.dst, tt.inputs, "")
		if err != nil {
			t.Fatal(err)
		}
		x, reason := exportRule(text.Rule(), "TASO")
		if reason != "" {
			t.Fatalf("%s: %s", tt.src, reason)
		}
		got := [][]xOp{x.src, x.dst}[tt.side][tt.node].para
		if !slices.Equal(got, tt.want) {
			t.Errorf("%s => %s: side %d node %d: %v, want %v", tt.src, tt.dst, tt.side, tt.node, got, tt.want)
		}
	}
}

func TestReadTASOErrors(t *testing.T) {
	data := anchor(t, tasoGenFile)
	// Cut anywhere but between two rules (len(data)/3 happens to be such a
	// place: the rules before it read as a shorter collection).
	for _, cut := range []int{1, 2, 7, 1000, len(data)/3 + 1, len(data) / 2, len(data) - 20, len(data) - 1} {
		_, err := ReadTASO("taso.pb", data[:cut], rules.Default())
		if err == nil || !strings.HasPrefix(err.Error(), "taso.pb: byte ") || !strings.Contains(err.Error(), "truncated") || !strings.Contains(err.Error(), ": rule ") {
			t.Errorf("cut at %d: %v", cut, err)
		}
	}
	// The innermost place is named.
	_, err := ReadTASO("taso.pb", data[:len(data)-1], rules.Default())
	if err == nil || !strings.Contains(err.Error(), "taso.pb: byte 143861: rule 619: mappedOutput 0: dstTsId: truncated varint") {
		t.Errorf("cut before the last byte: %v", err)
	}
	valid := xRule{src: []xOp{op(tRelu, ts(-1, 0))}, dst: []xOp{op(tRelu, ts(-1, 0))}, out: out0}
	forward := xRule{src: []xOp{op(tRelu, ts(1, 0)), op(tRelu, ts(-1, 0))}, dst: []xOp{op(tRelu, ts(-1, 0))}, out: out0}
	missing := xRule{src: []xOp{op(tRelu, ts(5, 0))}, dst: []xOp{op(tRelu, ts(-1, 0))}, out: out0}
	noOutput := xRule{src: []xOp{op(tRelu, ts(-1, 0))}, dst: []xOp{op(tRelu, ts(-1, 0))}}
	badOutput := xRule{src: []xOp{op(tRelu, ts(-1, 0))}, dst: []xOp{op(tRelu, ts(-1, 0))}, out: []xMap{{dstOp: 3}}}
	tests := []struct {
		name string
		data []byte
		want string
	}{
		{"empty", nil, "x.pb: empty file: expected a TASO RuleCollection"},
		{"text", []byte("hello, world"), "x.pb: byte 0: unexpected field 13 (a varint) in a RuleCollection (expected rule = 1)"},
		{"garbage", []byte{0xff, 0xff, 0xff}, "x.pb: byte 0: truncated field tag"},
		{"wire type", protowire.AppendVarint(protowire.AppendTag(nil, 1, protowire.VarintType), 3), "x.pb: byte 0: rule 1: rule (field 1): expected a length-delimited field, got a varint"},
		{"forward reference", tasoFile(valid, forward), "x.pb: byte 56: rule 2: srcOp 0: input 0: opId 1: expected an operator earlier in srcOp than 0"},
		{"missing operator", tasoFile(missing), "rule 1: srcOp 0: input 0: opId 5: there is no operator 5 in srcOp (1 operators)"},
		{"no mappedOutput", tasoFile(noOutput), "x.pb: byte 0: rule 1: expected at least one mappedOutput"},
		{"bad mappedOutput", tasoFile(badOutput), "rule 1: mappedOutput 0: dstOpId 3: dstOp has 1 operators"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := ReadTASO("x.pb", tt.data, rules.Default())
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got %v (%v), want %q", err, f, tt.want)
			}
		})
	}
}

func TestReadFlexFlowErrors(t *testing.T) {
	rule := func(srcOp string) string {
		return `{"rule": [{"_t": "Rule", "name": "r", "srcOp": ` + srcOp + `, "dstOp": [{"type": "OP_RELU", "input": [{"opId": -1, "tsId": 0}], "para": []}],
  "mappedOutput": [{"srcOpId": 0, "srcTsId": 0, "dstOpId": 0, "dstTsId": 0}]}]}`
	}
	relu := `[{"type": "OP_RELU", "input": [{"opId": -1, "tsId": 0}], "para": []}]`
	if f, err := ReadFlexFlow("ff.json", []byte(rule(relu)), rules.Default()); err != nil || len(f.Rules) != 1 || f.Rules[0].Name != "r" {
		t.Fatalf("the valid base case: %v %+v", err, f)
	}
	tests := []struct{ name, data, want string }{
		{"rule not an array", `{"rule": 5}`, "ff.json:1:10: rule: expected an array of Rule objects, got the number 5"},
		{"input not an array", rule(`[{"type": "OP_RELU", "input": "x"}]`), `ff.json:1:78: rule[0].srcOp[0].input: expected an array of Tensor objects, got "x"`},
		{"top level", `[]`, "ff.json:1:1: expected a RuleCollection object, got an array"},
		{"wrong _t", `{"_t": "Rule", "rule": []}`, `ff.json:1:8: expected "_t": "RuleCollection", got "Rule"`},
		{"unknown key", rule(`[{"type": "OP_RELU", "inputs": []}]`), `ff.json:1:69: rule[0].srcOp[0]: unexpected key "inputs" in an Operator object`},
		{"float", rule(`[{"type": "OP_RELU", "input": [{"opId": -1.5, "tsId": 0}]}]`), "ff.json:1:88: rule[0].srcOp[0].input[0].opId: expected a 32-bit integer, got -1.5"},
		{"missing key", `{"rule": [{"srcOp": [], "dstOp": []}]}`, `ff.json:1:11: rule[0]: expected a key "mappedOutput" in the Rule object`},
		{"missing type", rule(`[{"input": []}]`), `ff.json:1:49: rule[0].srcOp[0]: expected a key "type" in the Operator object`},
		{"duplicate key", rule(`[{"type": "OP_RELU", "type": "OP_RELU"}]`), `ff.json:1:69: rule[0].srcOp[0]: key "type" appears twice in an Operator object`},
		{"forward reference", rule(`[{"type": "OP_RELU", "input": [{"opId": 0, "tsId": 0}]}]`), `ff.json:1:79: rule[0].srcOp[0].input[0]: opId 0: expected an operator earlier in srcOp than 0 (rule "r")`},
		{"truncated", rule(relu)[:120], "ff.json:1:121: the JSON ends early (truncated file?)"},
		{"syntax", `{"rule": [}`, "ff.json:1:11: invalid character '}' looking for beginning of value"},
		{"trailing data", `{"rule": []} {}`, "ff.json:1:14: unexpected an object after the RuleCollection"},
		{"multi-line position", "{\n  \"rule\": [\n    {\"srcOp\": 7}]}", "ff.json:3:15: rule[0].srcOp: expected an array of Operator objects, got the number 7"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ReadFlexFlow("ff.json", []byte(tt.data), rules.Default())
			if err == nil || err.Error() != tt.want {
				t.Errorf("got  %v\nwant %s", err, tt.want)
			}
		})
	}
	data := anchor(t, flexFlowFile)
	for _, cut := range []int{1, 1000, len(data) / 2, len(data) - 3} {
		if _, err := ReadFlexFlow("ff.json", data[:cut], rules.Default()); err == nil || !strings.HasPrefix(err.Error(), "ff.json:") {
			t.Errorf("cut at %d: %v", cut, err)
		}
	}
}

// The fuzzers start from the real files, whole and as their first rules
// (small inputs mutate and minimise faster: a whole file takes tens of
// milliseconds a run, and Go minimises each new input for up to
// -fuzzminimizetime, 60 s by default, so pass e.g. -fuzzminimizetime 5s).
func FuzzReadTASO(f *testing.F) {
	for _, name := range []string{tasoRepoFile, tasoGenFile} {
		data := anchor(f, name)
		f.Add(data)
		f.Add(firstRules(data, 3))
	}
	for _, seed := range deepSeeds(f, "taso-pb") {
		f.Add(seed)
	}
	reg := rules.Default()
	f.Fuzz(func(t *testing.T, data []byte) {
		fr, err := ReadTASO("fuzz.pb", data, reg)
		if err == nil {
			checkForeign(t, fr)
		}
	})
}

func FuzzReadFlexFlow(f *testing.F) {
	data := anchor(f, flexFlowFile)
	f.Add(data)
	// The first two rules, closed: a small valid file.
	head := string(data[:bytes.Index(data, []byte("\n    {\n      \"_t\": \"Rule\""))+1])
	for range 2 {
		i := strings.Index(string(data[len(head):]), "\n    },\n")
		head = string(data[:len(head)+i+len("\n    }")])
	}
	f.Add([]byte(head + "\n  ]\n}\n"))
	for _, seed := range deepSeeds(f, "flexflow-json") {
		f.Add(seed)
	}
	reg := rules.Default()
	f.Fuzz(func(t *testing.T, data []byte) {
		fr, err := ReadFlexFlow("fuzz.json", data, reg)
		if err == nil {
			checkForeign(t, fr)
		}
	})
}

// firstRules cuts a TASO file after its first n rules.
func firstRules(data []byte, n int) []byte {
	off := 0
	for range n {
		_, _, l := protowire.ConsumeField(data[off:])
		if l < 0 {
			break
		}
		off += l
	}
	return data[:off]
}

// checkForeign checks what the fuzzers read: valid rules that canonicalise
// and write without panicking.
func checkForeign(t *testing.T, f *Foreign) {
	for _, n := range f.Rules {
		if err := n.Rule.Src.Validate(); err != nil {
			t.Fatalf("%s: %v", n.Name, err)
		}
		if err := n.Rule.Dst.Validate(); err != nil {
			t.Fatalf("%s: %v", n.Name, err)
		}
		n.Rule.Oriented()
	}
	var b bytes.Buffer
	WriteTASO(&b, ruleList(f.Rules))
	WriteFlexFlow(&b, ruleList(f.Rules))
}
