package main

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"rulebook/internal/testfiles"
)

// TestExportImportRoundTrip exports a version, imports it into a fresh
// database, verifies and releases it there: the content hash must match.
func TestExportImportRoundTrip(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	src := filepath.Join(dir, "src.db")
	verifiedDB(t, src, "ewadd,ewmul,transpose,relu")
	rel, err := run(ctx, "release", "v1", "--db", src)
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Fields(rel)[5]
	for _, format := range []string{"json", "sexpr"} {
		t.Run(format, func(t *testing.T) {
			file := filepath.Join(dir, "v1."+format)
			if _, err := run(ctx, "export", "--version", "v1", "--format", format, "-o", file, "--db", src); err != nil {
				t.Fatal(err)
			}
			dst := filepath.Join(dir, format+".db")
			out, err := run(ctx, "import", "--format", format, file, "--db", dst)
			if err != nil || !strings.Contains(out, "imported") {
				t.Fatalf("import (err %v):\n%s", err, out)
			}
			if _, err := run(ctx, "verify", "../../axioms", "--db", dst, "--no-progress"); err != nil {
				t.Fatal(err)
			}
			again, err := run(ctx, "release", "v1", "--db", dst)
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Fields(again)[5]; got != want {
				t.Errorf("round trip through %s: hash %s, want %s", format, got, want)
			}
		})
	}
	dot, err := run(ctx, "export", "--version", "v1", "--format", "dot", "--db", src)
	if err != nil || !strings.HasPrefix(dot, "digraph rules {") || !strings.Contains(dot, "cluster_r") {
		t.Errorf("dot export (err %v):\n%.200s", err, dot)
	}
}

func TestImportBadFilesWriteNothing(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "r.db")
	verifiedDB(t, db, "ewadd,relu")
	cases := []struct {
		name, format, content, want string
	}{
		{"truncated.json", "json", "{\"format\": \"rulebook-rules/1\", \"rules\": [{\"src\": \"(relu ?a)\"", "truncated.json:1:"},
		{"shape.json", "json", "{\"format\": \"rulebook-rules/1\", \"rules\": {\"src\": 3}}", "shape.json:1:42: rules: expected an array, got JSON object"},
		{"format.json", "json", "{\"format\": \"other/2\", \"rules\": []}", "format.json: expected \"format\": \"rulebook-rules/1\""},
		{"bad.sexpr", "sexpr", "; header\n(relu ?a) => (relu ?a)\n(frob ?a) => ?a\n", "bad.sexpr:3:2: expected an operator"},
		{"garbage.pb", "taso-pb", "not a protobuf", "garbage.pb: byte 0: field 13: unexpected wire type 6"},
		{"shape.json", "flexflow-json", `{"_t": "RuleCollection", "rule": [{"srcOp": {}}]}`, "shape.json:1:45: rule[0].srcOp: expected an array of Operator objects, got an object"},
		{"ref.json", "flexflow-json", `{"rule": [{"srcOp": [{"type": "OP_RELU", "input": [{"opId": 3, "tsId": 0}]}], "dstOp": [], "mappedOutput": [{"srcOpId": 0, "srcTsId": 0, "dstOpId": 0, "dstTsId": 0}]}]}`,
			"ref.json:1:52: rule[0].srcOp[0].input[0]: opId 3: there is no operator 3 in srcOp (1 operators)"},
	}
	// A truncated TASO file, cut inside its last rule: an error, not the
	// rules before the cut (left out where the shared folder is missing,
	// except in CI).
	pb, err := os.ReadFile(filepath.Join(testfiles.SharedDir(), "anchors", "taso-generator-3ops.pb"))
	switch {
	case err == nil:
		cases = append(cases, struct{ name, format, content, want string }{"truncated.pb", "taso-pb", string(pb[:len(pb)-5]), "truncated.pb: byte 143857: rule 619: mappedOutput 0: dstOpId: truncated varint"})
	case os.Getenv("CI") != "":
		t.Fatal(err)
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			file := filepath.Join(dir, c.name)
			os.WriteFile(file, []byte(c.content), 0o644)
			before := fileHash(t, db)
			_, err := run(context.Background(), "import", "--format", c.format, file, "--db", db)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("got %v, want %q", err, c.want)
			}
			if fileHash(t, db) != before {
				t.Error("the database changed")
			}
		})
	}
}

func TestShowSVG(t *testing.T) {
	if _, err := exec.LookPath("dot"); err != nil {
		t.Skip("Graphviz's dot is not installed (apt-get install graphviz)")
	}
	db := filepath.Join(t.TempDir(), "r.db")
	verifiedDB(t, db, "ewadd,relu")
	svg := filepath.Join(t.TempDir(), "rule.svg")
	if _, err := run(context.Background(), "show", "1", "--svg", svg, "--db", db); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(svg)
	if err != nil || !strings.Contains(string(data), "<svg") || !strings.Contains(string(data), "rule 1") {
		t.Errorf("not an SVG of the rule (err %v): %.200s", err, data)
	}
}

// sharedAnchor is the path of a TASO or FlexFlow rule file in the shared
// folder (see testfiles.Shared).
func sharedAnchor(t *testing.T, name string) string {
	t.Helper()
	return testfiles.Shared(t, "anchors", name)
}

// queryInt runs a query returning one integer, behind rulebook's back.
func queryInt(t *testing.T, path, q string) int {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int
	if err := db.QueryRow(q).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestImportForeign imports TASO's and FlexFlow's rule files: every rule
// they can express, each recorded with its name there, and a report of
// what was skipped.
func TestImportForeign(t *testing.T) {
	tests := []struct {
		file, format    string
		rules, distinct int
		skipped         string
		origin          string // a rule name the file uses
	}{
		{"taso-repo-graph_subst.pb", "taso-pb", 133, 120, "", "rule 133"},
		{"taso-generator-3ops.pb", "taso-pb", 619, 386, "", "rule 619"},
		// Issue 14: every rule of FlexFlow's file imports (50 did before).
		{"flexflow-graph_subst_3_v2.json", "flexflow-json", 640, 417,
			"note: PM_PARALLEL_DIM of OP_REPLICATE and OP_REDUCE read and dropped (1444 operators): our tensors have one replica dimension\n", "taso_rule_454"},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			file := sharedAnchor(t, tt.file)
			db := filepath.Join(t.TempDir(), "r.db")
			out, err := run(context.Background(), "import", "--format", tt.format, file, "--db", db)
			if err != nil {
				t.Fatal(err)
			}
			want := fmt.Sprintf("imported %d rules from %s: %d new (run 1)\n%s", tt.rules, file, tt.distinct, tt.skipped)
			if out != want {
				t.Errorf("got\n%s\nwant\n%s", out, want)
			}
			if n := queryInt(t, db, "SELECT count(*) FROM rules"); n != tt.distinct {
				t.Errorf("%d rules stored, want %d", n, tt.distinct)
			}
			if n := queryInt(t, db, "SELECT count(*) FROM rule_origins"); n != tt.rules {
				t.Errorf("%d origins recorded, want one per imported rule (%d)", n, tt.rules)
			}
			if n := queryInt(t, db, "SELECT count(*) FROM rule_origins WHERE name = '"+tt.origin+"'"); n != 1 {
				t.Errorf("origin %q recorded %d times", tt.origin, n)
			}
		})
	}
}

// TestExportForeignFormats exports a version for TASO and FlexFlow, with
// the rules they cannot carry reported, and imports the files again.
func TestExportForeignFormats(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	src := filepath.Join(dir, "src.db")
	verifiedDB(t, src, "ewadd,ewmul,transpose,relu")
	if _, err := run(ctx, "release", "v1", "--db", src); err != nil {
		t.Fatal(err)
	}
	total := queryInt(t, src, "SELECT count(*) FROM version_rules")
	// transpose(transpose(a)) => a: the result is an input.
	const left = 1
	for _, format := range []string{"taso-pb", "flexflow-json"} {
		t.Run(format, func(t *testing.T) {
			file := filepath.Join(dir, "v1."+format)
			out, err := run(ctx, "export", "--version", "v1", "--format", format, "-o", file, "--db", src)
			if err != nil {
				t.Fatal(err)
			}
			want := fmt.Sprintf("skipped %d of %d rules that %s cannot carry:\n  %d: an output is a graph input", left, total, format, left)
			if !strings.HasPrefix(out, want) {
				t.Errorf("export reports\n%s\nwant\n%s…", out, want)
			}
			dst := filepath.Join(dir, format+".db")
			out, err = run(ctx, "import", "--format", format, file, "--db", dst)
			if err != nil || !strings.HasPrefix(out, fmt.Sprintf("imported %d rules from %s: %d new", total-left, file, total-left)) {
				t.Errorf("import (err %v):\n%s", err, out)
			}
			// The same rules: every imported text is one of the version's.
			if n := queryInt(t, dst, "ATTACH DATABASE '"+src+"' AS v; SELECT count(*) FROM rules r WHERE r.hash IN (SELECT s.hash FROM v.rules s JOIN v.version_rules vr ON vr.rule_id = s.id)"); n != total-left {
				t.Errorf("%d imported rules are the version's, want %d", n, total-left)
			}
		})
	}
	if _, err := run(ctx, "export", "--version", "v1", "--format", "onnx", "--db", src); err == nil || !strings.Contains(err.Error(), "taso-pb, flexflow-json") {
		t.Errorf("unknown format: %v", err)
	}
}

// TestImportOrigins checks that rulebook's own formats record "rule N".
func TestImportOrigins(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "r.sexpr")
	os.WriteFile(file, []byte("; two rules\n(relu (relu ?a)) => (relu ?a)\n(ewadd ?a ?b) => (ewadd ?b ?a)\n"), 0o644)
	db := filepath.Join(dir, "r.db")
	if _, err := run(context.Background(), "import", "--format", "sexpr", file, "--db", db); err != nil {
		t.Fatal(err)
	}
	if n := queryInt(t, db, "SELECT count(*) FROM rule_origins WHERE name IN ('rule 1', 'rule 2')"); n != 2 {
		t.Errorf("%d origins named rule 1 and rule 2", n)
	}
}

// TestExportDegreeRefused: --degree 0, or --degree for a format that
// writes d as d, is one line and writes nothing.
func TestExportDegreeRefused(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	db := filepath.Join(dir, "r.db")
	verifiedDB(t, db, "ewadd,relu")
	if _, err := run(ctx, "release", "v1", "--db", db); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out.json")
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"--format", "flexflow-json", "--degree", "0"}, "--degree 0: expected an integer from 2 to 1024 (degree 1 is the identity)"},
		{[]string{"--format", "json", "--degree", "4"}, "--degree applies to --format flexflow-json only (the other formats write the degree variable d as d)"},
	}
	for _, c := range cases {
		args := append([]string{"export", "--version", "v1", "-o", out, "--db", db}, c.args...)
		_, err := run(ctx, args...)
		if err == nil || err.Error() != c.want {
			t.Errorf("%v: %v, want %s", c.args, err, c.want)
		}
		if _, err := os.Stat(out); !os.IsNotExist(err) {
			t.Errorf("%v: %s written", c.args, out)
		}
	}
}
