package exchange

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"rulebook/rules"
)

// reluRule is a foreign rule (as the TASO and FlexFlow readers decode
// them) whose source holds n relus, each reading the one before when
// chained, else each reading the input, and whose target is one relu.
func reluRule(n int, chained bool) xRule {
	relu, _ := rules.Default().Lookup("relu")
	op := func(from int) xOp {
		return xOp{typ: relu.TASO.Type, name: relu.FlexFlow.Type, in: []xTensor{{op: from}}}
	}
	x := xRule{name: "deep", dst: []xOp{op(-1)}, out: []xMap{{srcOp: n - 1}}}
	for j := range n {
		from := -1
		if chained {
			from = j - 1
		}
		x.src = append(x.src, op(from))
	}
	return x
}

// flexFlowJSON encodes rules given in the shared schema as FlexFlow's
// JSON, as tasoFile does as TASO's protobuf.
func flexFlowJSON(t testing.TB, xs ...xRule) []byte {
	c := ffCollection{T: "RuleCollection", Rule: []ffRule{}}
	for _, x := range xs {
		m := []ffMap{}
		for _, o := range x.out {
			m = append(m, ffMap{T: "MapOutput", DstOpID: o.dstOp, DstTsID: o.dstTs, SrcOpID: o.srcOp, SrcTsID: o.srcTs})
		}
		c.Rule = append(c.Rule, ffRule{T: "Rule", Name: x.name, SrcOp: ffOps(x.src), DstOp: ffOps(x.dst), MappedOutput: m})
	}
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// nestedText is n relus around ?a, as rule text.
func nestedText(n int) string {
	return strings.Repeat("(relu ", n) + "?a" + strings.Repeat(")", n)
}

// ownFiles writes the rule "nestedText(n) => (relu ?a)" as our JSON and
// sexpr.
func ownFiles(t testing.TB, n int) (js, sx []byte) {
	r := []rules.Text{{Src: nestedText(n), Dst: "(relu ?a)"}}
	var a, b bytes.Buffer
	if err := WriteJSON(&a, Header{}, r); err != nil {
		t.Fatal(err)
	}
	if err := WriteSexpr(&b, Header{}, r); err != nil {
		t.Fatal(err)
	}
	return a.Bytes(), b.Bytes()
}

// TestDeepAndHugeRulesAreRefused: a rule deeper than rules.MaxDepth or
// with more than rules.MaxNodes operators on a side is an error naming
// the file, the place and the limit, in every format, before the rest of
// the rule is built (100,000 operators once took a minute to import, and
// 100,000 nested terms crashed Z3 in verify; a timing is no assertion on
// a shared machine, so the error's place shows where reading stopped).
func TestDeepAndHugeRulesAreRefused(t *testing.T) {
	reg := rules.Default()
	deepJSON, deepSexpr := ownFiles(t, 100_000)
	cases := []struct {
		name, format string
		data         []byte
		want         string
	}{
		{"chain.pb", "taso-pb", tasoFile(reluRule(rules.MaxDepth+1, true)), "chain.pb: byte 2699: rule 1: srcOp 256: a chain of more than 256 operators (rulebook's limit)"},
		{"huge.pb", "taso-pb", tasoFile(reluRule(100_000, true)), "huge.pb: byte 11148: rule 1: srcOp 1024: more than 1024 operators in srcOp (rulebook's limit)"},
		{"wide.pb", "taso-pb", tasoFile(reluRule(rules.MaxNodes+1, false)), "rule 1: srcOp 1024: more than 1024 operators in srcOp"},
		{"chain.json", "flexflow-json", flexFlowJSON(t, reluRule(rules.MaxDepth+1, true)), "chain.json:1:"},
		{"huge.json", "flexflow-json", flexFlowJSON(t, reluRule(100_000, true)), "rule[0].srcOp[1024]: more than 1024 operators in srcOp (rulebook's limit) (rule \"deep\")"},
		{"deep.json", "json", deepJSON, "deep.json: rule 1: 1:1537: operators nested more than 256 deep (rulebook's limit)"},
		{"deep.sexpr", "sexpr", deepSexpr, "deep.sexpr:2:1537: operators nested more than 256 deep (rulebook's limit)"},
		{"nested.json", "json", []byte(`{"format": "rulebook-rules/1", "rules": ` + strings.Repeat("[", 100_000) + strings.Repeat("]", 100_000) + "}"), "nested.json:1:"},
	}
	for _, c := range cases {
		_, err := Read(c.name, c.data, reg, c.format)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want an error containing %q", c.name, err, c.want)
		}
		if c.format == "flexflow-json" && c.name == "chain.json" && (err == nil || !strings.Contains(err.Error(), "rule[0].srcOp[256]: a chain of more than 256 operators")) {
			t.Errorf("%s: got %v", c.name, err)
		}
	}
	// At the limits, every format reads the rule.
	atLimitJSON, atLimitSexpr := ownFiles(t, rules.MaxDepth)
	for _, c := range []struct {
		format string
		data   []byte
	}{
		{"taso-pb", tasoFile(reluRule(rules.MaxDepth, true))},
		{"flexflow-json", flexFlowJSON(t, reluRule(rules.MaxDepth, true))},
		{"json", atLimitJSON},
		{"sexpr", atLimitSexpr},
	} {
		f, err := Read("limit", c.data, reg, c.format)
		if err != nil || len(f.Rules) != 1 {
			t.Errorf("%s at the limits: %v", c.format, err)
		}
	}
}

// deepSeeds are fuzz seeds just beyond the limits, in each format.
func deepSeeds(t testing.TB, format string) [][]byte {
	js, sx := ownFiles(t, rules.MaxDepth+1)
	switch format {
	case "taso-pb":
		return [][]byte{tasoFile(reluRule(rules.MaxDepth+1, true)), tasoFile(reluRule(rules.MaxNodes+1, false))}
	case "flexflow-json":
		return [][]byte{flexFlowJSON(t, reluRule(rules.MaxDepth+1, true))}
	case "json":
		return [][]byte{js, []byte(fmt.Sprintf(`{"format": "rulebook-rules/1", "rules": %s%s}`, strings.Repeat("[", 20_000), strings.Repeat("]", 20_000)))}
	}
	return [][]byte{sx}
}
