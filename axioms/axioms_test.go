package axioms

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"rulebook/rules"
)

// TestWrongAxiomsAreCaught validates each deliberately wrong axiom of
// testdata/wrong on its own and expects a counterexample: three about the
// default set's operators, twelve about the parallel ones
// (reduce-replicate-identity, relu-reduce, linear-weight-rows,
// conv-input-channels, embedding-rows-partition, embedding-concat-swapped,
// attn-mix-swapped, attn-softmax-ewadd, batchnorm-concat-batch,
// batchnorm-idempotent, and Unity's linear-reduce-input and
// linear-reduce-weight), which are evaluated at degrees 1 to 4 and at
// parallel layouts (rank 4 for the convolution, attention and batch
// normalisation, 1 and 2 for the lookups). The last two hold at every
// layout with one feature per tensor; only the combined layouts refute
// them.
func TestWrongAxiomsAreCaught(t *testing.T) {
	files, _ := filepath.Glob("testdata/wrong/*.smt2")
	if len(files) != 15 {
		t.Fatalf("want 15 wrong-axiom fixtures, found %d", len(files))
	}
	combined := map[string]bool{"linear-reduce-input": true, "linear-reduce-weight": true}
	reg := rules.All()
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			dir := t.TempDir()
			src, _ := os.ReadFile(f)
			os.WriteFile(filepath.Join(dir, filepath.Base(f)), src, 0o644)
			set, err := Load(dir, reg)
			if err != nil {
				t.Fatal(err)
			}
			reports, err := Validate(context.Background(), set, reg, DefaultBound(), 2)
			if err != nil {
				t.Fatal(err)
			}
			r := reports[0]
			if r.OK() || r.Counterexample == "" {
				t.Fatalf("%s was not caught", r.Axiom.Name)
			}
			if combined[r.Axiom.Name] && !strings.Contains(r.Counterexample, "at combined layouts") {
				t.Fatalf("%s was caught, but not at combined layouts: %s", r.Axiom.Name, r.Counterexample)
			}
			t.Logf("%s: %s", r.Axiom.Name, r.Counterexample)
		})
	}
}

func TestMalformedFilesSayWhere(t *testing.T) {
	reg := rules.Default()
	cases := []struct{ name, src, want string }{
		{"unclosed", "; c\n(assert (! (forall ((x Tensor)) (= (relu x) x)) :named r)", "unclosed.smt2:2:1: \"(\" is never closed"},
		{"unknown-op", "; c\n(assert (! (forall ((x Tensor)) (= (frob x) x)) :named r))", "unknown-op.smt2:2:37: unknown operator \"frob\""},
		{"arity", "; c\n(assert (! (forall ((x Tensor)) (= (ewadd x) x)) :named r))", "arity.smt2:2:37: ewadd takes 0 parameters and 2 tensors, got 1 arguments"},
		{"sort", "; c\n(assert (! (forall ((x Tensor) (a Int)) (= (concat x a a) x)) :named r))", "sort.smt2:2:52: expected an Int here, got \"x\" of sort Tensor"},
		{"no-name", "; c\n(assert (forall ((x Tensor)) (= (relu x) x)))", "no-name.smt2:2:9: expected (! FORMULA :named NAME)"},
		{"no-comment", "(assert (! (forall ((x Tensor)) (= (relu x) x)) :named r))", "no-comment.smt2:1:1: axiom r needs a one-line comment"},
		{"declaration", "(declare-fun relu (Tensor) Tensor)", "declaration.smt2:1:1: declare-fun: declarations come from the operator registry"},
		{"bad-sort", "; c\n(assert (! (forall ((x Real)) (= (relu x) x)) :named r))", "bad-sort.smt2:2:24: expected sort Tensor or Int"},
		{"not-equation", "; c\n(assert (! (forall ((x Tensor)) (relu x)) :named r))", "not-equation.smt2:2:33: expected an equation"},
		{"unknown-symbol", "; c\n(assert (! (forall ((x Tensor)) (= (conv2d 1 padding.wide activation.none 1 x x) x)) :named r))", "unknown-symbol.smt2:2:46: unknown symbol \"padding.wide\""},
		{"layout-under-or", "; c\n(assert (! (forall ((x Tensor)) (=> (or (no-sums x) (no-sums x)) (= (relu x) x))) :named r))", "layout-under-or.smt2:2:41: a layout condition (no-sums x) may only be the guard or a conjunct of its top-level and"},
		{"layout-of-int", "; c\n(assert (! (forall ((x Tensor) (d Int)) (=> (no-sums d) (= (replicate d x) x))) :named r))", "layout-of-int.smt2:2:45: (no-sums x) takes one tensor variable"},
		{"nested-arithmetic", "; c\n(assert (! (forall ((x Tensor) (d Int)) (= (replicate (- (+ d 1) 1) x) x)) :named r))", "nested-arithmetic.smt2:2:58: - in an axiom takes integer variables and constants only"},
	}
	reg = rules.All()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse(c.name+".smt2", c.src, reg)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("got %v, want an error containing %q", err, c.want)
			}
		})
	}
}

// TestLayoutConditionIsLeftToTheChecks: Z3's formula of an axiom with a
// layout condition leaves the condition out, and the axiom is marked
// conditional; the hashed formula keeps it.
func TestLayoutConditionIsLeftToTheChecks(t *testing.T) {
	src := "; c\n(assert (! (forall ((d Int) (x Tensor)) (=> (and (>= d 2) (no-sums x)) (= (reduce d (replicate d x)) (ewadd x (reduce (- d 1) (replicate (- d 1) x)))))) :named step))"
	axs, err := Parse("step.smt2", src, rules.All())
	if err != nil {
		t.Fatal(err)
	}
	a := axs[0]
	want := "(forall ((d Int) (x Tensor)) (=> (>= d 2) (= (reduce d (replicate d x)) (ewadd x (reduce (- d 1) (replicate (- d 1) x))))))"
	if !a.Conditional() || a.SolverFormula() != want || !strings.Contains(a.Formula(), "(no-sums x)") {
		t.Errorf("conditional %v, solver formula %s, formula %s", a.Conditional(), a.SolverFormula(), a.Formula())
	}
}

func TestDuplicateNamesAcrossFiles(t *testing.T) {
	dir := t.TempDir()
	ax := "; c\n(assert (! (forall ((x Tensor)) (= (relu (relu x)) (relu x))) :named idem))\n"
	os.WriteFile(filepath.Join(dir, "a.smt2"), []byte(ax), 0o644)
	os.WriteFile(filepath.Join(dir, "b.smt2"), []byte(ax), 0o644)
	_, err := Load(dir, rules.Default())
	if err == nil || !strings.Contains(err.Error(), "b.smt2:2:1: axiom idem is already defined at") {
		t.Errorf("got %v", err)
	}
}

func TestHashIgnoresCommentsAndLayout(t *testing.T) {
	reg := rules.Default()
	write := func(src string) string {
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, "x.smt2"), []byte(src), 0o644)
		set, err := Load(dir, reg)
		if err != nil {
			t.Fatal(err)
		}
		return set.Hash
	}
	a := write("; one\n(assert (! (forall ((x Tensor)) (= (relu (relu x)) (relu x))) :named idem))\n")
	b := write(";  another comment\n(assert (!\n  (forall ((x Tensor))\n    (= (relu (relu x)) (relu x)))\n  :named idem))\n")
	c := write("; one\n(assert (! (forall ((x Tensor)) (= (relu x) (relu (relu x)))) :named idem))\n")
	if a != b {
		t.Error("comments or layout changed the hash")
	}
	if a == c {
		t.Error("a different formula kept the hash")
	}
}

// TestBuiltinIsTheFolder: the axiom set compiled into the binary is this
// folder's, axiom for axiom and by hash.
func TestBuiltinIsTheFolder(t *testing.T) {
	reg := rules.All()
	dir, err := Load(".", reg)
	if err != nil {
		t.Fatal(err)
	}
	in, err := Builtin(reg)
	if err != nil {
		t.Fatal(err)
	}
	if in.Hash != dir.Hash || len(in.Axioms) != len(dir.Axioms) || in.Dir != BuiltinDir {
		t.Errorf("built in: %d axioms, hash %s, dir %q; folder: %d axioms, hash %s", len(in.Axioms), in.Hash, in.Dir, len(dir.Axioms), dir.Hash)
	}
}

// deepAxiom is an axiom whose left side nests n relus.
func deepAxiom(n int) string {
	return "; deep\n(assert (! (forall ((x Tensor)) (= " + strings.Repeat("(relu ", n) + "x" + strings.Repeat(")", n) + " (relu x))) :named deep))\n"
}

// wideAxiom is an axiom whose left side is a balanced sum of 2^levels
// relus: few levels deep, many applications.
func wideAxiom(levels int) string {
	term := "(relu x)"
	for range levels {
		term = "(ewadd " + term + " " + term + ")"
	}
	return "; wide\n(assert (! (forall ((x Tensor)) (= " + term + " x)) :named wide))\n"
}

// TestDeepAndHugeAxiomsAreRefused: an axiom nested beyond rules.MaxDepth,
// or with more than rules.MaxNodes applications, is refused at its
// position with the limit, in bounded time, however large; one at the
// depth limit reads.
func TestDeepAndHugeAxiomsAreRefused(t *testing.T) {
	reg := rules.Default()
	for _, c := range []struct{ name, src, want string }{
		{"deep", deepAxiom(100_000), "deep.smt2:2:1548: lists nested more than 256 deep (rulebook's limit)"},
		{"wide", wideAxiom(16), "wide.smt2:2:"},
	} {
		_, err := Parse(c.name+".smt2", c.src, reg)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want an error containing %q", c.name, err, c.want)
		}
		if c.name == "wide" && (err == nil || !strings.Contains(err.Error(), "more than 1024 operator applications in one axiom")) {
			t.Errorf("wide: got %v", err)
		}
	}
	// (assert (! (forall (...) (= LHS ...)))) opens 5 lists around LHS.
	if _, err := Parse("ok.smt2", deepAxiom(rules.MaxDepth-5), reg); err != nil {
		t.Errorf("an axiom within the limit: %v", err)
	}
}

// FuzzParseAxioms: the parser never panics, and what it reads prints as a
// formula that reads back the same.
func FuzzParseAxioms(f *testing.F) {
	files, _ := filepath.Glob("*.smt2")
	for _, name := range files {
		src, _ := os.ReadFile(name)
		f.Add(string(src))
	}
	f.Add(deepAxiom(rules.MaxDepth + 1))
	f.Add(wideAxiom(11))
	f.Add("; guarded\n(assert (! (forall ((x Tensor) (a Int)) (=> (or (= a 0) (= a (- 1))) (= (relu x) x))) :named g))")
	reg := rules.All()
	f.Fuzz(func(t *testing.T, src string) {
		axs, err := Parse("fuzz.smt2", src, reg)
		if err != nil {
			return
		}
		for _, a := range axs {
			again, err := Parse("again.smt2", "; c\n(assert (! "+a.Formula()+" :named "+a.Name+"))", reg)
			if err != nil || len(again) != 1 || again[0].Formula() != a.Formula() {
				t.Fatalf("axiom %s as %q does not read back: %v", a.Name, a.Formula(), err)
			}
		}
	})
}
