package optimizer

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"rulebook/exchange"
	"rulebook/internal/budget"
	"rulebook/internal/testfiles"
	"rulebook/onnx"
	"rulebook/rules"
	"rulebook/runtime"
	"rulebook/store"
	"rulebook/version"
)

// bundleSeed is a small valid bundle: the first n rules of a real one, and
// those of its rules that carry conditions, under their recomputed hash.
func bundleSeed(f *testing.F, path string, n int) []byte {
	data, err := os.ReadFile(path)
	if err != nil {
		f.Fatal(err)
	}
	h, in, err := exchange.ReadJSON(path, data)
	if err != nil {
		f.Fatal(err)
	}
	var keep []rules.Text
	for i, r := range in {
		if i < n || (r.Cond != "" && len(keep) < n+2) {
			keep = append(keep, r)
		}
	}
	var texts []string
	reg := rules.Default()
	for _, r := range keep {
		checked, err := r.Checked(reg)
		if err != nil {
			f.Fatal(err)
		}
		_, text := checked.Rule().Oriented()
		texts = append(texts, text.String())
	}
	var b bytes.Buffer
	if err := exchange.WriteJSON(&b, exchange.Header{Version: h.Version, Hash: store.ContentHash(texts)}, keep); err != nil {
		f.Fatal(err)
	}
	seed := filepath.Join(f.TempDir(), "seed.json")
	if err := os.WriteFile(seed, b.Bytes(), 0o644); err != nil {
		f.Fatal(err)
	}
	if rs, err := version.LoadBundle(seed); err != nil || len(rs.Rules) != len(keep) {
		f.Fatalf("the seed cut from %s does not load whole: %v", path, err)
	}
	return b.Bytes()
}

// FuzzLoadBundle: a bundle loads or is refused, never panics; what loads
// is a rule set whose rules are oriented and validated, hash to its hash,
// and export to a bundle that loads back the same.
func FuzzLoadBundle(f *testing.F) {
	f.Add(bundleSeed(f, bundle3Ops, 3))
	f.Add(bundleSeed(f, "testdata/rules-3ops-1x1.json", 2))
	f.Add([]byte(`{"format":"rulebook-rules/1","version":"v1","hash":"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855","rules":[]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(t.TempDir(), "bundle.json")
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		rs, err := version.LoadBundle(path)
		if err != nil {
			return
		}
		checkRuleSet(t, rs)
		again := filepath.Join(t.TempDir(), "again.json")
		if err := os.WriteFile(again, exportBundle(t, rs), 0o644); err != nil {
			t.Fatal(err)
		}
		back, err := version.LoadBundle(again)
		if err != nil {
			t.Fatalf("the loaded bundle, exported again, does not load: %v", err)
		}
		if back.Hash != rs.Hash || !slices.Equal(back.Texts, rs.Texts) {
			t.Fatalf("the bundle exported again loads as %.12s… %q, want %.12s… %q", back.Hash, back.Texts, rs.Hash, rs.Texts)
		}
	})
}

// checkRuleSet holds what a loaded rule set promises.
func checkRuleSet(t *testing.T, rs *version.Set) {
	if len(rs.Rules) != len(rs.Texts) || len(rs.Texts) != len(rs.RuleHashes) {
		t.Fatalf("%d rules, %d texts, %d hashes", len(rs.Rules), len(rs.Texts), len(rs.RuleHashes))
	}
	if got := store.ContentHash(rs.Texts); got != rs.Hash {
		t.Fatalf("texts hash to %s, the set records %s", got, rs.Hash)
	}
	for i, r := range rs.Rules {
		for _, g := range []rules.Graph{r.Src, r.Dst} {
			if err := g.Validate(); err != nil {
				t.Fatalf("rule %d %s: %v", i+1, rs.Texts[i], err)
			}
		}
		if _, text := r.Oriented(); text.String() != rs.Texts[i] {
			t.Fatalf("rule %d: oriented again reads %q, loaded as %q", i+1, text.String(), rs.Texts[i])
		}
	}
}

// exportBundle writes a rule set as 'rulebook export --format json' does.
func exportBundle(t *testing.T, rs *version.Set) []byte {
	var texts []rules.Text
	for _, r := range rs.Rules {
		_, text := r.Oriented()
		texts = append(texts, text)
	}
	var b bytes.Buffer
	if err := exchange.WriteJSON(&b, exchange.Header{Version: rs.Tag, Hash: rs.Hash}, texts); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// FuzzPrepareModel decodes a model and prepares it as 'rulebook optimize'
// does before its search: loaded by the runtime (weights generated where
// the model's files are absent, as they are here), mapped onto the
// registry, its shapes inferred and its cost priced. What maps lowers back
// to a model that decodes and loads again. Under the memory cap of
// .ci/run a size the model declares that is allocated unchecked fails the
// run.
func FuzzPrepareModel(f *testing.F) {
	if b, err := os.ReadFile(filepath.Join(testfiles.SharedDir(), "models", "squeezenet1_1.onnx")); err == nil {
		f.Add(b)
	}
	if root, _ := testfiles.FindONNXNodeTests(); root != "" {
		for _, c := range []string{"test_conv_with_strides_padding", "test_gemm_all_attributes", "test_matmul_2d",
			"test_concat_3d_axis_1", "test_maxpool_2d_pads", "test_transpose_default", "test_relu", "test_add_bcast"} {
			if b, err := os.ReadFile(filepath.Join(root, c, "model.onnx")); err == nil {
				f.Add(b)
			}
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := onnx.DecodeModel(b)
		if err != nil {
			return
		}
		rt, _, err := runtime.FromONNX(m, t.TempDir(), runtime.LoadOptions{Weights: runtime.WeightsAuto, Seed: 1, Dims: map[string]int{"N": 1}, Memory: fuzzMemory(t)})
		if err != nil {
			return
		}
		g, err := FromONNX(m, rt)
		if err != nil {
			return
		}
		if err := g.Infer(); err != nil {
			t.Fatalf("a mapped model does not infer: %v", err)
		}
		if c := DefaultCPU().Cost(g); c < 0 || math.IsNaN(c) {
			t.Fatalf("a mapped model costs %g", c)
		}
		lowered, err := g.ToONNX()
		if err != nil {
			t.Fatalf("a mapped model does not lower: %v", err)
		}
		again, err := onnx.DecodeModel(onnx.EncodeModel(lowered))
		if err != nil {
			t.Fatalf("the lowered model does not decode: %v", err)
		}
		if _, _, err := runtime.FromONNX(again, t.TempDir(), runtime.LoadOptions{Weights: runtime.WeightsAuto, Seed: 1, Dims: map[string]int{"N": 1}, Memory: fuzzMemory(t)}); err != nil {
			t.Fatalf("the lowered model does not load: %v", err)
		}
	})
}

// fuzzMemory is the memory budget of a fuzzed model: well below the
// address-space cap .ci/run runs fuzz targets under, so that a size the
// budget allows cannot crash the run.
func fuzzMemory(t *testing.T) budget.Budget {
	b, err := budget.Parse("512MiB")
	if err != nil {
		t.Fatal(err)
	}
	return b
}
