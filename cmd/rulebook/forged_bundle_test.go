package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"rulebook/exchange"
	"rulebook/internal/testfiles"
	"rulebook/rules"
	"rulebook/store"
	"rulebook/verify"
	"rulebook/version"
)

// TestForgedBundleRefused: a bundle with one rule changed into a false one
// and its content hash recomputed, as anyone can with the documented
// hash, loads by its hash but is refused by optimize: each rule is
// evaluated again when loaded (verify.Recheck), and nothing is written.
func TestForgedBundleRefused(t *testing.T) {
	data, err := os.ReadFile("../../optimizer/testdata/rules-3ops.json")
	if err != nil {
		t.Fatal(err)
	}
	h, texts, err := exchange.ReadJSON("rules-3ops.json", data)
	if err != nil {
		t.Fatal(err)
	}
	// relu does not distribute over a sum: false, and well typed.
	texts[7] = rules.Text{Src: "(relu (ewadd ?a ?b))", Dst: "(ewadd (relu ?a) (relu ?b))", Inputs: "?a:4x4 ?b:4x4"}
	canon := make([]string, len(texts))
	for i, x := range texts {
		c, err := x.Checked(rules.Default())
		if err != nil {
			t.Fatal(err)
		}
		_, o := c.Rule().Oriented()
		canon[i] = o.String()
	}
	h.Hash = store.ContentHash(canon)
	dir := t.TempDir()
	forged := filepath.Join(dir, "forged.json")
	var b bytes.Buffer
	if err := exchange.WriteJSON(&b, h, texts); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(forged, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	rs, err := version.LoadBundle(forged)
	if err != nil {
		t.Fatalf("the forged bundle's hash does not match, so this test forges nothing: %v", err)
	}
	if err := verify.Recheck(context.Background(), rs.Rules, rs.Texts); !errors.Is(err, verify.ErrNotTrue) {
		t.Fatalf("Recheck: %v, want ErrNotTrue", err)
	}
	out := filepath.Join(dir, "m.opt.onnx")
	got, err := run(context.Background(), "optimize", testfiles.Shared(t, "models", "squeezenet1_1.onnx"), "--rules", forged, "-o", out, "--db", filepath.Join(dir, "none.db"))
	if err == nil || !strings.Contains(err.Error(), "(relu (ewadd ?a ?b))") {
		t.Fatalf("optimize with the forged bundle: %v\n%s", err, got)
	}
	if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s written: %v", out, err)
	}
	// The released bundles pass the same check.
	for _, name := range []string{"rules-3ops.json", "rules-3ops-1x1.json"} {
		rs, err = version.LoadBundle(filepath.Join("../../optimizer/testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		if err := verify.Recheck(context.Background(), rs.Rules, rs.Texts); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
}

// BenchmarkRecheck is what optimize pays to evaluate every rule of a
// released ≤3-operator version again when it loads it.
func BenchmarkRecheck(b *testing.B) {
	rs, err := version.LoadBundle("../../optimizer/testdata/rules-3ops.json")
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if err := verify.Recheck(context.Background(), rs.Rules, rs.Texts); err != nil {
			b.Fatal(err)
		}
	}
}
