package exchange

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"rulebook/rules"
)

// parallelExportRules are parallel rules of every kind the FlexFlow writer
// meets: with the degree variable d, with a concrete degree, and without
// degrees (linear alone).
func parallelExportRules(t *testing.T) []*rules.Rule {
	t.Helper()
	var out []*rules.Rule
	for _, text := range []string{
		"(partition 1 d (partition 2 d ?a)) => (partition 2 d (partition 1 d ?a))",
		"(combine 1 d (relu (partition 1 d ?a))) => (relu ?a)",
		"(linear none (replicate d ?a) (partition 1 d ?b)) => (partition 2 d (linear none ?a ?b))",
		"(linear none (partition 1 d ?a) (replicate d ?b)) => (partition 1 d (linear none ?a ?b))",
		"(reduce d (ewadd ?a ?b)) => (ewadd (reduce d ?a) (reduce d ?b))",
		"(concat 0 (partition 1 d ?a) (partition 1 d ?b)) => (partition 1 d (concat 0 ?a ?b))",
		"(let ((%0 (partition 2 d (concat 1 ?a ?b)))) (outputs (split0 1 %0) (split1 1 %0))) => (outputs (partition 2 d ?a) (partition 2 d ?b))",
		"(linear relu ?a ?b) => (relu (linear none ?a ?b))",
		// A convolution's groups are left to the shapes in the file.
		"(conv2d 1 same none 1 (partition 0 d ?a) (replicate d ?b)) => (partition 0 d (conv2d 1 same none 1 ?a ?b))",
		"(partition 1 d (pool_max 3 1 same ?a)) => (pool_max 3 1 same (partition 1 d ?a))",
		// True at degree 2 only: written at degree 2, left out at others.
		"(ewadd ?a ?a) => (reduce 2 (replicate 2 ?a))",
	} {
		r, err := rules.ParseRule(rules.All(), text)
		if err != nil {
			t.Fatalf("%s: %v", text, err)
		}
		out = append(out, r)
	}
	return out
}

// TestExportFlexFlowDegrees: a parallel rule set exported for FlexFlow at
// degrees 2, 4 and 8 reads back as the same rules at that degree; a rule
// that holds at degree 2 only is written at degree 2 alone.
func TestExportFlexFlowDegrees(t *testing.T) {
	rs := parallelExportRules(t)
	for _, degree := range []int{2, 4, 8} {
		t.Run(fmt.Sprint(degree), func(t *testing.T) {
			var buf bytes.Buffer
			skipped, err := WriteFlexFlowAt(&buf, rs, degree)
			if err != nil {
				t.Fatal(err)
			}
			var want []*rules.Rule
			for _, r := range rs {
				if r.HasDegreeVar() {
					want = append(want, r.WithDegree(degree))
				} else if degree == 2 || ruleDegree(r) == 0 {
					want = append(want, r)
				}
			}
			if degree != 2 && (len(skipped) != 1 || skipped[0].Reason != "holds at degree 2 only (no degree variable d), not at the degree written") {
				t.Errorf("skipped %v, want the degree-2 rule", skipped)
			}
			if degree == 2 && len(skipped) != 0 {
				t.Errorf("skipped %v", skipped)
			}
			back, err := ReadFlexFlow("x.json", buf.Bytes(), rules.All())
			if err != nil {
				t.Fatal(err)
			}
			if len(back.Skipped) > 0 {
				t.Fatalf("read back with skips: %v", back.Skipped)
			}
			got, exp := textsIn(t, rules.All(), ruleList(back.Rules)), textsIn(t, rules.All(), want)
			if !slices.Equal(got, exp) {
				t.Errorf("read back\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(exp, "\n"))
			}
		})
	}
}

// TestExportFlexFlowSchema: the exported file has the shared FlexFlow
// file's "_t" tags, the same field names for each, and for each operator
// type the same parameter keys in the same order (but a convolution's and
// a pool's, which the shared file has none of).
func TestExportFlexFlowSchema(t *testing.T) {
	var buf bytes.Buffer
	if _, err := WriteFlexFlowAt(&buf, parallelExportRules(t), 4); err != nil {
		t.Fatal(err)
	}
	shared, ours := schemaOf(t, anchor(t, flexFlowFile)), schemaOf(t, buf.Bytes())
	if !maps.Equal(shared.fields, ours.fields) {
		t.Errorf("tags and fields:\n ours   %v\n shared %v", ours.fields, shared.fields)
	}
	if len(ours.params) < 8 {
		t.Errorf("only %d operator types exported: %v", len(ours.params), ours.params)
	}
	for typ, keys := range ours.params {
		// The shared file has no convolution or pool to compare with.
		if want, ok := shared.params[typ]; ok && want != keys || !ok && typ != "OP_CONV2D" && !strings.HasPrefix(typ, "OP_POOL2D") {
			t.Errorf("%s: parameter keys %s, shared file %s", typ, keys, want)
		}
	}
}

// schema is what TestExportFlexFlowSchema compares: each "_t" tag's field
// names, and each operator type's parameter keys.
type schema struct {
	fields map[string]string
	params map[string]string
}

func schemaOf(t *testing.T, data []byte) schema {
	t.Helper()
	var doc any
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	s := schema{fields: map[string]string{}, params: map[string]string{}}
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case []any:
			for _, e := range v {
				walk(e)
			}
		case map[string]any:
			tag, _ := v["_t"].(string)
			s.fields[tag] = strings.Join(slices.Sorted(maps.Keys(v)), ",")
			if tag == "Operator" {
				var keys []string
				for _, p := range v["para"].([]any) {
					keys = append(keys, p.(map[string]any)["key"].(string))
				}
				s.params[v["type"].(string)] = strings.Join(keys, ",")
			}
			for _, e := range v {
				walk(e)
			}
		}
	}
	walk(doc)
	return s
}
