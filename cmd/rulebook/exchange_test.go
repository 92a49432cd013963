package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
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
	if err != nil || !strings.HasPrefix(dot, "digraph rules {") || !strings.Contains(dot, "cluster_0") {
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
		{"shape.json", "json", "{\"format\": \"rulebook-rules/1\", \"rules\": {\"src\": 3}}", "shape.json:1:42: rules: expected []exchange.Rule, got JSON object"},
		{"format.json", "json", "{\"format\": \"other/2\", \"rules\": []}", "format.json: expected \"format\": \"rulebook-rules/1\""},
		{"bad.sexpr", "sexpr", "; header\n(relu ?a) => (relu ?a)\n(frob ?a) => ?a\n", "bad.sexpr:3:2: expected an operator"},
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
