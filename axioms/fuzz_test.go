package axioms

import (
	"os"
	"slices"
	"testing"
	"testing/fstest"

	"rulebook/rules"
)

// FuzzLoadAxioms reads a folder of two axiom files: it loads or is refused
// exactly as the two files joined into one would be, and to the same set
// (the set's hash does not depend on how its axioms are spread over
// files).
func FuzzLoadAxioms(f *testing.F) {
	reg := rules.All()
	var firsts []string
	for _, name := range []string{"core.smt2", "matmul.smt2", "conv.smt2", "parallel.smt2"} {
		src, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		axs, err := Parse(name, string(src), reg)
		if err != nil || len(axs) < 2 {
			f.Fatalf("%s: %d axioms, %v", name, len(axs), err)
		}
		first := ""
		for _, a := range axs[:2] {
			first += "(assert (! " + a.Formula() + " :named " + a.Name + "))\n"
		}
		firsts = append(firsts, first)
	}
	for i := range firsts {
		f.Add(firsts[i], firsts[(i+1)%len(firsts)])
	}
	f.Add(firsts[0], firsts[0]) // every axiom defined twice
	f.Fuzz(func(t *testing.T, a, b string) {
		two, errTwo := load(fstest.MapFS{"a.smt2": {Data: []byte(a)}, "b.smt2": {Data: []byte(b)}}, "two", reg)
		one, errOne := load(fstest.MapFS{"ab.smt2": {Data: []byte(a + "\n" + b)}}, "one", reg)
		if (errTwo == nil) != (errOne == nil) {
			t.Fatalf("as two files: %v; as one: %v", errTwo, errOne)
		}
		if errTwo != nil {
			return
		}
		names := func(s *Set) []string {
			var out []string
			for _, a := range s.Axioms {
				out = append(out, a.Name)
			}
			return out
		}
		if two.Hash != one.Hash || !slices.Equal(names(two), names(one)) {
			t.Fatalf("as two files %s %v; as one %s %v", two.Hash, names(two), one.Hash, names(one))
		}
	})
}
