package main

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"rulebook/internal/infile"
	"rulebook/internal/outfile"
	"rulebook/onnx"
)

// Every file a command reads goes through the input layer: a FIFO without
// a writer is refused at once (it hung run --input, plan --machine,
// import and --rules), /dev/zero is refused rather than read without
// end, and a text file given as a model is "not an ONNX model".
func TestInputsRefused(t *testing.T) {
	dir := t.TempDir()
	p := func(name string) string { return filepath.Join(dir, name) }
	model := p("chain.onnx")
	writeChainModel(t, model, 2)
	must(t, os.WriteFile(p("README.md"), []byte("# rulebook\n\nA toolkit.\n"), 0o644))
	for _, name := range []string{"fifo.pb", "fifo.json"} {
		must(t, syscall.Mkfifo(p(name), 0o644))
	}
	for _, tc := range []struct {
		args []string
		want error
	}{
		{[]string{"run", p("README.md")}, onnx.ErrNotModel},
		{[]string{"run", p("fifo.json")}, infile.ErrNotRegular},
		{[]string{"run", model, "--input", p("fifo.pb")}, infile.ErrNotRegular},
		{[]string{"run", model, "--input", "/dev/zero"}, infile.ErrNotRegular},
		{[]string{"plan", "mlp", "--machine", p("fifo.json")}, infile.ErrNotRegular},
		{[]string{"plan", "mlp", "--machine", "/dev/zero"}, infile.ErrNotRegular},
		{[]string{"import", "--format", "json", "--db", p("r.db"), p("fifo.json")}, infile.ErrNotRegular},
		{[]string{"optimize", model, "--rules", p("fifo.json"), "-o", p("out.onnx")}, infile.ErrNotRegular},
	} {
		out, err := run(context.Background(), tc.args...)
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: %v; want %v\n%s", strings.Join(tc.args, " "), err, tc.want, out)
		}
	}
	if _, err := run(context.Background(), "run", p("README.md")); err == nil || !strings.Contains(err.Error(), "README.md is not an ONNX model") {
		t.Errorf("run README.md: %v; want it named as not an ONNX model", err)
	}
}

// No output may be one of the command's inputs, under any name: each of
// these overwrote its input and exited 0. Each is refused before any work,
// and the input stays byte for byte as it was.
func TestOutputIsInput(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	p := func(name string) string { return filepath.Join(dir, name) }
	db := p("t.db")
	if out, err := run(ctx, "generate", "--max-ops", "1", "--ops", "relu,transpose", "--db", db); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	dbBytes, err := os.ReadFile(db)
	must(t, err)
	must(t, os.WriteFile(p("t.dot"), dbBytes, 0o644))
	model := p("m.onnx")
	writeChainModel(t, model, 2)
	must(t, os.Link(model, p("hard.onnx")))
	must(t, os.WriteFile(p("x.sharded.onnx"), []byte("a sharded model"), 0o644))
	bundleBytes, err := os.ReadFile("../../optimizer/testdata/rules-3ops.json")
	must(t, err)
	bundle := p("v1.json")
	must(t, os.WriteFile(bundle, bundleBytes, 0o644))
	optimize := []string{"optimize", model, "--rules", bundle, "--budget", "1"}
	for _, tc := range []struct {
		args  []string
		input string // the file that must stay as it was
	}{
		{[]string{"export", "--db", db, "--version", "v1", "-o", db}, db},
		{[]string{"export", "--db", db, "--version", "v1", "-o", db + "-wal"}, db},
		{[]string{"show", "1", "--db", p("t.dot"), "--svg", p("t.dot")}, p("t.dot")},
		{append(optimize, "-o", model), model},
		{append(optimize, "-o", dir+"/./m.onnx"), model},
		{append(optimize, "-o", p("hard.onnx")), model},
		{append(optimize, "--report", model), model},
		{append(optimize, "--report", bundle), bundle},
		{append(optimize, "--db", db, "-o", db), db},
		{[]string{"plan", model, "--machine", "summit:1", "-o", model}, model},
		{[]string{"plan", p("x.sharded.onnx"), "--machine", "summit:1", "-o", p("x.json")}, p("x.sharded.onnx")},
	} {
		before := fileHash(t, tc.input)
		out, err := run(ctx, tc.args...)
		if !errors.Is(err, outfile.ErrIsInput) {
			t.Errorf("%s: %v; want it refused as an input\n%s", strings.Join(tc.args, " "), err, out)
		}
		if fileHash(t, tc.input) != before {
			t.Errorf("%s: %s changed", strings.Join(tc.args, " "), tc.input)
		}
	}
}

// Output lost to a closed or full standard output is an error: each of
// these exited 0.
func TestStdoutWriteErrors(t *testing.T) {
	bin := rulebookBinary(t)
	model := filepath.Join(t.TempDir(), "chain.onnx")
	writeChainModel(t, model, 2)
	for _, tc := range []struct {
		shell, want string
	}{
		{`"$0" ops >&-`, "standard output is closed"},
		{`"$0" ops > /dev/full`, "cannot write standard output: no space left on device"},
		{`"$0" run "$1" > /dev/full`, "cannot write standard output: no space left on device"},
		{`"$0" run "$1" >&-`, "standard output is closed"},
	} {
		out, err := exec.Command("sh", "-c", tc.shell, bin, model).CombinedOutput()
		if err == nil || !strings.Contains(string(out), tc.want) {
			t.Errorf("%s: %v; want a failure saying %q\n%s", tc.shell, err, tc.want, out)
		}
	}
	if out, err := exec.Command("sh", "-c", `"$0" ops > /dev/null`, bin).CombinedOutput(); err != nil {
		t.Errorf("ops > /dev/null: %v\n%s", err, out)
	}
}
