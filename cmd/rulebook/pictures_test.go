package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestExportSelection exports some rules of a released version by id and
// by operator, in the order asked, and refuses ids not in the version and
// unknown operators without writing anything.
func TestExportSelection(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	db := filepath.Join(dir, "r.db")
	verifiedDB(t, db, "ewadd,relu,transpose")
	if _, err := run(ctx, "release", "v1", "--db", db); err != nil {
		t.Fatal(err)
	}
	// Nothing is pruned, so every proved rule is in v1.
	proved, err := run(ctx, "list", "--status", "proved", "--db", db)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(proved), "\n")[1:]
	if len(lines) < 3 {
		t.Fatalf("too few proved rules to select from:\n%s", proved)
	}
	first, last := strings.Fields(lines[0])[0], strings.Fields(lines[len(lines)-1])[0]

	sexpr, err := run(ctx, "export", "--version", "v1", "--format", "sexpr", "--id", last+","+first, "--db", db)
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Split(strings.TrimSpace(sexpr), "\n")
	if len(got) != 3 || got[0] != "; rulebook rules, version v1, 2 rules" {
		t.Errorf("--id %s,%s: want a header without the version's hash and two rules, got\n%s", last, first, sexpr)
	}

	dot, err := run(ctx, "export", "--version", "v1", "--format", "dot", "--id", last, "--id", first, "--db", db)
	if err != nil {
		t.Fatal(err)
	}
	lastAt, firstAt := strings.Index(dot, `label="rule `+last+` (#`), strings.Index(dot, `label="rule `+first+` (#`)
	if lastAt < 0 || firstAt < lastAt || strings.Count(dot, "subgraph cluster_") != 2 {
		t.Errorf("--id %s --id %s: want rules %s then %s, labelled by id, and no other:\n%s", last, first, last, first, dot)
	}

	relu, err := run(ctx, "export", "--version", "v1", "--format", "sexpr", "--op", "relu", "--db", db)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := run(ctx, "list", "--status", "proved", "--op", "relu", "--db", db)
	rows := strings.Split(strings.TrimSpace(relu), "\n")[1:]
	if len(rows) == 0 || len(rows) != strings.Count(want, "\n")-1 {
		t.Errorf("--op relu exported %d rules; list finds:\n%s", len(rows), want)
	}
	for _, r := range rows {
		if !strings.Contains(r, "relu") {
			t.Errorf("--op relu exported %s", r)
		}
	}

	out := filepath.Join(dir, "sel.dot")
	for _, c := range []struct{ args, want string }{
		{"--id 99999", "--id 99999: version v1 has no rule 99999"},
		{"--id 0", "--id must be positive rule ids, got 0"},
		{"--op frob", `--op: unknown operator "frob"`},
		{"--id " + first + " --op matmul", "no rule of version v1 is selected by --id " + first + " --op matmul"},
	} {
		args := append([]string{"export", "--version", "v1", "--format", "dot", "-o", out, "--db", db}, strings.Fields(c.args)...)
		_, err := run(ctx, args...)
		if err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("%s: got %v, want %q", c.args, err, c.want)
		}
		if _, err := os.Stat(out); !os.IsNotExist(err) {
			t.Errorf("%s: %s was written", c.args, out)
		}
	}
}

// TestShowPicture draws a rule as PNG by its file's extension, and
// refuses an extension it cannot draw before opening the database.
func TestShowPicture(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing.db")
	jpg := filepath.Join(dir, "rule.jpg")
	_, err := run(context.Background(), "show", "1", "--svg", jpg, "--db", missing)
	if want := "--svg " + jpg + ": cannot draw .jpg; expected a file name ending in .svg, .png, .pdf or .dot"; err == nil || err.Error() != want {
		t.Errorf("got %v, want %q", err, want)
	}
	for _, path := range []string{jpg, missing} {
		if _, err := os.Stat(path); !os.IsNotExist(err) {
			t.Errorf("%s was written", path)
		}
	}

	if _, err := exec.LookPath("dot"); err != nil {
		t.Skip("Graphviz's dot is not installed (apt-get install graphviz): PNG not drawn")
	}
	db := filepath.Join(dir, "r.db")
	verifiedDB(t, db, "ewadd,relu")
	png := filepath.Join(dir, "rule.png")
	if _, err := run(context.Background(), "show", "2", "--svg", png, "--db", db); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(png)
	if err != nil || !strings.HasPrefix(string(data), "\x89PNG") {
		t.Errorf("%s is not a PNG (err %v): %.20q", png, err, data)
	}
}
