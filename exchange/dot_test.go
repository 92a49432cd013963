package exchange

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"rulebook/rules"
	"rulebook/store"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata from this run")

// storedOurs3 is testdata/ours3.sexpr as stored rules, the id of each its
// place in the file (the file lists a generation's rules in id order).
func storedOurs3(t testing.TB) []store.Rule {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "ours3.sexpr"))
	if err != nil {
		t.Fatal(err)
	}
	texts, err := ReadSexpr("ours3.sexpr", data, rules.Default())
	if err != nil {
		t.Fatal(err)
	}
	out := make([]store.Rule, len(texts))
	for i, text := range texts {
		out[i] = store.NewRule(text)
		out[i].ID = int64(i + 1)
	}
	return out
}

// goldenVersion stands for a released version of the ours3 rules.
var goldenVersion = store.Version{Tag: "v1", Hash: "1e27e3cdd11baca7e43f6583003eca6ba261d60104752edb6bdd3f819dd4f61c"}

// goldenSelection picks three representative rules: a depth-wise conv2d
// with a constant kernel (26), a conv2d through a scalar multiplication
// (34), and a split of a convolution into two outputs (176).
var goldenSelection = Selection{IDs: []int64{26, 34, 176}}

// TestDotGolden holds the dot drawing of three rules to
// testdata/rules.dot (go test ./exchange -run TestDotGolden -update
// rewrites it).
func TestDotGolden(t *testing.T) {
	var out bytes.Buffer
	if _, err := Export(&out, rules.Default(), "dot", goldenVersion, storedOurs3(t), goldenSelection); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	for _, want := range []string{
		`label="version v1 (hash 1e27e3cdd11b): 3 of 542 rules"`,
		`label="rule 26 (#26 of 542 in v1, hash `,
		`label="rule 176 (#176 of 542 in v1, hash `,
		`"conv2d\nstride=1 padding=same\nactivation=relu groups=dw"`, // named parameters
		`"C_pool\nkernel=3"`,
		`<td port="i0">?a 2x4x5x5</td>`, // input shapes
		`[label="kernel 4x1x3x3"]`,      // operand and shape on an edge
		`[label="split1 2x4x5x5"]`,      // a split's second output
		`<td port="o1">output 1</td>`,
		`r176_to [label="=>"`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the drawing lacks %s", want)
		}
	}
	path := filepath.Join("testdata", "rules.dot")
	if *update {
		if err := os.WriteFile(path, out.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test ./exchange -run TestDotGolden -update creates it)", err)
	}
	if string(want) != got {
		t.Errorf("%s is out of date (go test ./exchange -run TestDotGolden -update rewrites it); this run:\n%s", path, got)
	}
}

// needDot skips a test when Graphviz's dot is missing, except in CI,
// where it must be installed.
func needDot(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("dot"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("Graphviz's dot is not installed in CI (apt-get install graphviz)")
		}
		t.Skip("Graphviz's dot is not installed (apt-get install graphviz): the drawing is not checked")
	}
}

// TestGraphvizLaysOutEveryRule has Graphviz lay out all 542 rules of
// ours3, as many to a picture as a picture may hold, and checks the
// layout: in every rule the source lies wholly left of the target with
// "=>" between, the rules run top to bottom in the order asked, and a
// full picture stays within Graphviz's 32767-pixel bitmap limit, so it is
// never scaled down.
func TestGraphvizLaysOutEveryRule(t *testing.T) {
	needDot(t)
	stored := storedOurs3(t)
	for start := 0; start < len(stored); start += MaxPictureRules {
		chunk := stored[start:min(start+MaxPictureRules, len(stored))]
		var src bytes.Buffer
		if err := WriteDot(&src, rules.Default(), versionPicture(goldenVersion, stored, chunk)); err != nil {
			t.Fatal(err)
		}
		layout := plainLayout(t, src.Bytes())
		if px := layout.height * 96; px > 32767 {
			t.Errorf("rules %d to %d: %.0f pixels high at 96 dpi, beyond Graphviz's limit", chunk[0].ID, chunk[len(chunk)-1].ID, px)
		}
		previousTop := layout.height + 1
		for _, r := range chunk {
			box := layout.rules[r.ID]
			if box.srcRight >= box.dstLeft || box.arrow <= box.srcRight || box.arrow >= box.dstLeft {
				t.Errorf("rule %d: source right edge %.2f, arrow %.2f, target left edge %.2f: want them in that order", r.ID, box.srcRight, box.arrow, box.dstLeft)
			}
			if box.top >= previousTop {
				t.Errorf("rule %d is drawn above the rule before it", r.ID)
			}
			previousTop = box.top
		}
	}
}

// ruleBox is where Graphviz put one rule: the right edge of its source,
// the left edge of its target, the centre of its arrow and its top.
type ruleBox struct{ srcRight, dstLeft, arrow, top float64 }

type layout struct {
	height float64 // inches
	rules  map[int64]*ruleBox
}

// plainLayout lays src out with "dot -Tplain" and reads where each rule's
// nodes went (node names "r<ID>_src…", "r<ID>_dst…", "r<ID>_to").
func plainLayout(t *testing.T, src []byte) layout {
	t.Helper()
	c := exec.Command("dot", "-Tplain")
	c.Stdin = bytes.NewReader(src)
	var stderr bytes.Buffer
	c.Stderr = &stderr
	out, err := c.Output()
	if err != nil || stderr.Len() > 0 {
		t.Fatalf("dot refused the drawing: %v: %s", err, stderr.String())
	}
	l := layout{rules: map[int64]*ruleBox{}}
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) >= 4 && f[0] == "graph" {
			l.height = parseFloat(t, f[3])
		}
		if len(f) < 6 || f[0] != "node" {
			continue
		}
		idText, part, ok := strings.Cut(strings.TrimPrefix(f[1], "r"), "_")
		id, err := strconv.ParseInt(idText, 10, 64)
		if !ok || err != nil {
			continue
		}
		x, y, w := parseFloat(t, f[2]), parseFloat(t, f[3]), parseFloat(t, f[4])
		box := l.rules[id]
		if box == nil {
			box = &ruleBox{srcRight: -1, dstLeft: 1e9}
			l.rules[id] = box
		}
		box.top = max(box.top, y)
		switch {
		case strings.HasPrefix(part, "src"):
			box.srcRight = max(box.srcRight, x+w/2)
		case strings.HasPrefix(part, "dst"):
			box.dstLeft = min(box.dstLeft, x-w/2)
		case part == "to":
			box.arrow = x
		}
	}
	return l
}

func parseFloat(t *testing.T, s string) float64 {
	t.Helper()
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		t.Fatalf("dot -Tplain: %v", err)
	}
	return v
}

// TestWritePictureFormats draws a rule into each format its extension
// names, and refuses an unknown extension before writing anything.
func TestWritePictureFormats(t *testing.T) {
	needDot(t)
	dir := t.TempDir()
	picture := RulePicture(storedOurs3(t)[175])
	for ext, magic := range map[string]string{"svg": "<svg", "png": "\x89PNG", "PDF": "%PDF", "dot": "digraph rules {"} {
		path := filepath.Join(dir, "rule."+ext)
		if err := WritePicture(context.Background(), path, rules.Default(), picture); err != nil {
			t.Fatalf("%s: %v", ext, err)
		}
		data, err := os.ReadFile(path)
		if err != nil || !bytes.Contains(data[:min(len(data), 300)], []byte(magic)) {
			t.Errorf("%s: not a %s file (err %v): %.40q", path, ext, err, data)
		}
	}
	for name, want := range map[string]string{
		"rule.jpg": "rule.jpg: cannot draw .jpg; expected a file name ending in .svg, .png, .pdf or .dot",
		"rule":     "rule: expected a file name ending in .svg, .png, .pdf or .dot, to say the format",
	} {
		path := filepath.Join(dir, name)
		err := WritePicture(context.Background(), path, rules.Default(), picture)
		if err == nil || !strings.HasSuffix(err.Error(), want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: got %v, want one line ending %q", name, err, want)
		}
		if _, err := os.Stat(path); !os.IsNotExist(err) {
			t.Errorf("%s was written", name)
		}
	}
}

func TestSelectionPick(t *testing.T) {
	stored := storedOurs3(t)
	ids := func(rs []store.Rule) string {
		var s []string
		for _, r := range rs {
			s = append(s, fmt.Sprint(r.ID))
		}
		return strings.Join(s, ",")
	}
	cases := []struct {
		sel       Selection
		want, err string
	}{
		{sel: Selection{IDs: []int64{176, 26, 176}}, want: "176,26"},
		{sel: Selection{IDs: []int64{26, 34, 176}, Ops: []string{"split"}}, want: "176"},
		{sel: Selection{Ops: []string{"C_pool", "relu", "pool_avg"}}, want: "26"},
		{sel: Selection{IDs: []int64{999}}, err: "--id 999: version v1 has no rule 999"},
		{sel: Selection{IDs: []int64{26}, Ops: []string{"matmul"}}, err: "no rule of version v1 is selected by --id 26 --op matmul"},
	}
	for _, c := range cases {
		got, err := c.sel.Pick(goldenVersion, stored)
		switch {
		case c.err != "" && (err == nil || !strings.HasPrefix(err.Error(), c.err)):
			t.Errorf("%s: got %v, want error %q", c.sel, err, c.err)
		case c.err == "" && (err != nil || ids(got) != c.want):
			t.Errorf("%s: got %s (%v), want %s", c.sel, ids(got), err, c.want)
		}
	}
	if got, _ := (Selection{}).Pick(goldenVersion, stored); len(got) != len(stored) {
		t.Errorf("the empty selection picks %d of %d rules", len(got), len(stored))
	}
	if err := (Selection{Ops: []string{"frob"}}).Check(rules.Default()); err == nil || !strings.HasPrefix(err.Error(), `--op: unknown operator "frob" (known: `) {
		t.Errorf("unknown operator: %v", err)
	}
}

// TestExportSelection: a selection's header keeps the version but not its
// hash, and a picture of more rules than one can read is refused with
// the flags that pick fewer.
func TestExportSelection(t *testing.T) {
	stored := storedOurs3(t)
	var out bytes.Buffer
	if _, err := Export(&out, rules.Default(), "json", goldenVersion, stored, Selection{Ops: []string{"split", "conv2d"}}); err != nil {
		t.Fatal(err)
	}
	h, rs, err := ReadJSON("sel.json", out.Bytes())
	if err != nil || h != (Header{Version: "v1"}) || len(rs) == 0 {
		t.Errorf("selection header %+v, %d rules (err %v): want version v1 without a hash", h, len(rs), err)
	}
	for _, r := range rs {
		if !strings.Contains(r.String(), "split") || !strings.Contains(r.String(), "conv2d") {
			t.Errorf("--op split,conv2d exported %s", r)
		}
	}
	out.Reset()
	_, err = Export(&out, rules.Default(), "dot", goldenVersion, stored, Selection{})
	want := fmt.Sprintf("--format dot: version v1's 542 rules are too many for a readable picture (at most %d); pick fewer with --id", MaxPictureRules)
	if err == nil || !strings.HasPrefix(err.Error(), want) || out.Len() > 0 {
		t.Errorf("whole-version picture: got %v and %d bytes, want %q and nothing", err, out.Len(), want)
	}
}
