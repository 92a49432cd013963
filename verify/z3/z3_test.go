package z3

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// fermat3 has no solution (Fermat, n = 3) and Z3 cannot prove that, so it
// runs until stopped.
const fermat3 = `(declare-const x Int) (declare-const y Int) (declare-const z Int)
(assert (and (> x 0) (> y 0) (> z 0) (= (+ (* x x x) (* y y y)) (* z z z))))`

// Tensor axioms as SMT-LIB2 assertions over the names Tensor, ewadd, ewmul.
var axioms = map[string]string{
	"ewadd-comm":  `(assert (forall ((x Tensor) (y Tensor)) (= (ewadd x y) (ewadd y x))))`,
	"ewadd-assoc": `(assert (forall ((x Tensor) (y Tensor) (z Tensor)) (= (ewadd x (ewadd y z)) (ewadd (ewadd x y) z))))`,
	"ewmul-comm":  `(assert (forall ((x Tensor) (y Tensor)) (= (ewmul x y) (ewmul y x))))`,
}

const tensorDecls = `(declare-sort Tensor 0)
(declare-fun ewadd (Tensor Tensor) Tensor)
(declare-fun ewmul (Tensor Tensor) Tensor)
`

func TestVersion(t *testing.T) {
	v := Version()
	t.Logf("libz3: %s", v)
	if v == "" || !strings.Contains(v, "4.") {
		t.Fatalf("Version() = %q, want a 4.x version", v)
	}
}

func TestResultString(t *testing.T) {
	for r, want := range map[Result]string{Unknown: "unknown", Sat: "sat", Unsat: "unsat", Result(7): "Result(7)"} {
		if got := r.String(); got != want {
			t.Errorf("Result(%d).String() = %q, want %q", int(r), got, want)
		}
	}
}

// tensorEnv declares the Tensor vocabulary through the API.
type tensorEnv struct {
	c            *Context
	tensor       Sort
	ewadd, ewmul FuncDecl
	a, b, cc     AST
}

func newTensorEnv(c *Context) *tensorEnv {
	e := &tensorEnv{c: c, tensor: c.UninterpretedSort("Tensor")}
	e.ewadd = c.FuncDecl("ewadd", []Sort{e.tensor, e.tensor}, e.tensor)
	e.ewmul = c.FuncDecl("ewmul", []Sort{e.tensor, e.tensor}, e.tensor)
	e.a, e.b, e.cc = c.Const("a", e.tensor), c.Const("b", e.tensor), c.Const("c", e.tensor)
	return e
}

// parseOne parses text and expects exactly one assertion.
func parseOne(t *testing.T, c *Context, text string, sorts map[string]Sort, decls map[string]FuncDecl) AST {
	t.Helper()
	as, err := c.ParseSMTLIB2(text, sorts, decls)
	if err != nil {
		t.Fatalf("ParseSMTLIB2(%q): %v", text, err)
	}
	if len(as) != 1 {
		t.Fatalf("ParseSMTLIB2(%q) gave %d assertions, want 1", text, len(as))
	}
	return as[0]
}

func TestTensorProofs(t *testing.T) {
	// goal: the equation to prove, in SMT-LIB2 over a, b, c.
	type tc struct {
		name      string
		axioms    []string
		goal      string
		wantUnsat bool     // proved
		wantCore  []string // must be contained in the core when proved
	}
	cases := []tc{
		{"comm+assoc", []string{"ewadd-comm", "ewadd-assoc"},
			"(= (ewadd a (ewadd b c)) (ewadd c (ewadd b a)))", true, []string{"ewadd-assoc", "ewadd-comm"}},
		{"comm+assoc+unrelated", []string{"ewadd-comm", "ewadd-assoc", "ewmul-comm"},
			"(= (ewadd a (ewadd b c)) (ewadd c (ewadd b a)))", true, []string{"ewadd-assoc", "ewadd-comm"}},
		{"comm-only-simple", []string{"ewadd-comm"},
			"(= (ewadd a b) (ewadd b a))", true, []string{"ewadd-comm"}},
		{"comm-only-unprovable", []string{"ewadd-comm"},
			"(= (ewadd a (ewadd b c)) (ewadd c (ewadd b a)))", false, nil},
		{"no-axioms", nil, "(= (ewadd a b) (ewadd b a))", false, nil},
	}
	// Two ways to build each problem: vocabulary and goal through the API
	// (axioms parsed against the API's sort and declarations), or
	// everything parsed from self-contained SMT-LIB2 text.
	modes := map[string]func(t *testing.T, c *Context, s *Solver, k tc){
		"api": func(t *testing.T, c *Context, s *Solver, k tc) {
			e := newTensorEnv(c)
			sorts := map[string]Sort{"Tensor": e.tensor}
			decls := map[string]FuncDecl{"ewadd": e.ewadd, "ewmul": e.ewmul}
			for _, name := range k.axioms {
				s.AssertTracked(parseOne(t, c, axioms[name], sorts, decls), name)
			}
			var goal AST
			switch k.goal {
			case "(= (ewadd a (ewadd b c)) (ewadd c (ewadd b a)))":
				goal = c.Eq(c.Apply(e.ewadd, e.a, c.Apply(e.ewadd, e.b, e.cc)),
					c.Apply(e.ewadd, e.cc, c.Apply(e.ewadd, e.b, e.a)))
			case "(= (ewadd a b) (ewadd b a))":
				goal = c.Eq(c.Apply(e.ewadd, e.a, e.b), c.Apply(e.ewadd, e.b, e.a))
			default:
				t.Fatalf("no API form for goal %s", k.goal)
			}
			s.Assert(c.Not(goal))
		},
		"parsed": func(t *testing.T, c *Context, s *Solver, k tc) {
			// Each text redeclares the vocabulary; Z3 identifies sorts and
			// functions by name and signature, so they coincide.
			for _, name := range k.axioms {
				s.AssertTracked(parseOne(t, c, tensorDecls+axioms[name], nil, nil), name)
			}
			goal := tensorDecls + "(declare-const a Tensor) (declare-const b Tensor) (declare-const c Tensor)\n" +
				"(assert (not " + k.goal + "))"
			s.Assert(parseOne(t, c, goal, nil, nil))
		},
	}
	for _, k := range cases {
		for _, mode := range []string{"api", "parsed"} {
			t.Run(k.name+"/"+mode, func(t *testing.T) {
				c := NewContext()
				defer c.Close()
				s := c.NewSolver()
				defer s.Close()
				s.SetTimeout(10 * time.Second)
				modes[mode](t, c, s, k)
				if err := c.Err(); err != nil {
					t.Fatalf("builder error: %v", err)
				}
				r, err := s.Check(context.Background())
				if err != nil {
					t.Fatalf("Check: %v", err)
				}
				core := s.UnsatCore()
				t.Logf("result %v, reason %q, core %v", r, s.ReasonUnknown(), core)
				if !k.wantUnsat {
					if r == Unsat {
						t.Fatalf("unprovable goal came back unsat (core %v)", core)
					}
					return
				}
				if r != Unsat {
					t.Fatalf("Check = %v (%s), want unsat", r, s.ReasonUnknown())
				}
				if !slices.IsSorted(core) {
					t.Errorf("UnsatCore %v not sorted", core)
				}
				for _, want := range k.wantCore {
					if !slices.Contains(core, want) {
						t.Errorf("UnsatCore %v lacks %q", core, want)
					}
				}
			})
		}
	}
}

// TestGroundAPI builds a quantifier-free problem entirely through the API,
// with Int and Bool sorts and every connective.
func TestGroundAPI(t *testing.T) {
	c := NewContext()
	defer c.Close()
	i := c.IntSort()
	f := c.FuncDecl("f", []Sort{i}, i)
	p := c.FuncDecl("p", []Sort{i}, c.BoolSort())
	x, y := c.Const("x", i), c.Const("y", i)

	if got, want := c.String(c.Apply(f, c.Int(-3))), "(f (- 3))"; got != want {
		t.Errorf("String = %q, want %q", got, want)
	}
	if got := c.String(c.And()); got != "true" {
		t.Errorf("And() = %s, want true", got)
	}
	if got := c.String(c.Or()); got != "false" {
		t.Errorf("Or() = %s, want false", got)
	}
	if got := c.String(c.Int(1 << 40)); got != "1099511627776" {
		t.Errorf("Int(1<<40) = %s", got)
	}

	tests := []struct {
		name     string
		tracked  map[string]AST
		plain    []AST
		want     Result
		wantCore []string
	}{
		{"chain", map[string]AST{
			"h1": c.Eq(c.Apply(f, x), y),
			"h2": c.Eq(c.Apply(f, y), c.Int(7)),
			"h3": c.Apply(p, c.Int(0)),
		}, []AST{c.Not(c.Eq(c.Apply(f, c.Apply(f, x)), c.Int(7)))}, Unsat, []string{"h1", "h2"}},
		{"or-and", map[string]AST{
			"either":  c.Or(c.Apply(p, x), c.Apply(p, y)),
			"neither": c.And(c.Not(c.Apply(p, x)), c.Not(c.Apply(p, y))),
		}, nil, Unsat, []string{"either", "neither"}},
		{"satisfiable", map[string]AST{
			"h": c.Eq(c.Apply(f, x), c.Int(1)),
		}, []AST{c.Apply(p, x), c.And()}, Sat, nil},
	}
	if err := c.Err(); err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := c.NewSolver()
			defer s.Close()
			for name, a := range tt.tracked {
				s.AssertTracked(a, name)
			}
			for _, a := range tt.plain {
				s.Assert(a)
			}
			r, err := s.Check(context.Background())
			if err != nil || r != tt.want {
				t.Fatalf("Check = %v, %v; want %v", r, err, tt.want)
			}
			core := s.UnsatCore()
			if tt.want != Unsat {
				if core != nil {
					t.Errorf("UnsatCore after %v = %v, want nil", r, core)
				}
				return
			}
			if !slices.Equal(core, tt.wantCore) {
				t.Errorf("UnsatCore = %v, want %v", core, tt.wantCore)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	c := NewContext()
	defer c.Close()
	tests := []struct{ name, text, want string }{
		{"unbalanced", "(declare-const a Int) (declare-const b Int) (assert (= a b", "error"},
		{"unknown-constant", "(assert (= a 1))", "unknown constant a"},
		{"unknown-function", "(assert (foo 1))", "unknown constant foo"},
		{"sort-mismatch", "(declare-const a Int) (assert (= a true))", "incompatible"},
		{"unknown-sort", "(declare-const t Tensor) (assert (= t t))", "Tensor"},
		{"bad-token", "(assert (= 1 1)) )", "error"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			as, err := c.ParseSMTLIB2(tt.text, nil, nil)
			if err == nil {
				t.Fatalf("ParseSMTLIB2(%q) = %d assertions, want an error", tt.text, len(as))
			}
			t.Logf("error: %v", err)
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not mention %q", err, tt.want)
			}
			// Z3 4.8.12's parser does not clear the error code on success;
			// the next good parse must not report the stale error.
			if _, err := c.ParseSMTLIB2("(assert (= 1 1))", nil, nil); err != nil {
				t.Fatalf("good parse after bad one: %v", err)
			}
		})
	}
}

// TestParseQuirks pins down how Z3 4.8.12 treats commands in parsed text.
func TestParseQuirks(t *testing.T) {
	c := NewContext()
	defer c.Close()
	tests := []struct {
		name, text string
		want       []string
	}{
		// :named is accepted but dropped: the formula comes back bare, so
		// names for unsat cores must be given through AssertTracked.
		{"named", "(declare-const p Bool) (assert (! (not p) :named n1))", []string{"(not p)"}},
		// check-sat is ignored; every assertion is returned in order.
		{"check-sat", "(declare-const a Int) (assert (= a 1)) (check-sat) (assert (= a 2))", []string{"(= a 1)", "(= a 2)"}},
		// Only assertions still in scope at the end are returned.
		{"push-pop", "(push) (assert true) (pop) (assert false)", []string{"false"}},
		{"empty", "(declare-const a Int)", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			as, err := c.ParseSMTLIB2(tt.text, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, a := range as {
				got = append(got, c.String(a))
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestBuilderErrors(t *testing.T) {
	c := NewContext()
	defer c.Close()
	i := c.IntSort()
	f := c.FuncDecl("f", []Sort{i}, i)
	tests := []struct {
		name  string
		build func() AST
		want  string
	}{
		{"eq-sorts", func() AST { return c.Eq(c.Int(1), c.Const("b", c.BoolSort())) }, "incompatible"},
		{"apply-arity", func() AST { return c.Apply(f, c.Int(1), c.Int(2)) }, "Apply"},
		{"apply-sort", func() AST { return c.Apply(f, c.Const("b", c.BoolSort())) }, "Apply"},
		{"not-int", func() AST { return c.Not(c.Int(1)) }, "Not"},
		{"zero-ast", func() AST { return c.And(c.Int(1) /* ok */, AST{}) }, "invalid"},
		{"zero-decl", func() AST { return c.Apply(FuncDecl{}) }, "invalid"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c.err = nil // test-only: reset the sticky error between cases
			a := tt.build()
			if a != (AST{}) {
				t.Fatalf("got %s, want the zero AST", c.String(a))
			}
			err := c.Err()
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Err() = %v, want mention of %q", err, tt.want)
			}
			t.Logf("Err: %v", err)
			s := c.NewSolver()
			defer s.Close()
			s.Assert(a)
			if r, err := s.Check(context.Background()); err == nil || r != Unknown {
				t.Fatalf("Check after invalid Assert = %v, %v; want an error", r, err)
			}
		})
	}
	// A non-Boolean assertion is reported by Check.
	c.err = nil
	s := c.NewSolver()
	defer s.Close()
	s.AssertTracked(c.Int(3), "h")
	if _, err := s.Check(context.Background()); err == nil {
		t.Fatal("Check after asserting an Int succeeded")
	} else {
		t.Logf("non-Boolean assert: %v", err)
	}
}

// hardSolver returns a solver holding fermat3.
func hardSolver(t *testing.T, c *Context) *Solver {
	t.Helper()
	as, err := c.ParseSMTLIB2(fermat3, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	s := c.NewSolver()
	for _, a := range as {
		s.Assert(a)
	}
	return s
}

func TestTimeout(t *testing.T) {
	c := NewContext()
	defer c.Close()
	s := hardSolver(t, c)
	defer s.Close()
	s.SetTimeout(300 * time.Millisecond)
	start := time.Now()
	r, err := s.Check(context.Background())
	elapsed := time.Since(start)
	reason := s.ReasonUnknown()
	t.Logf("Check = %v, err %v, reason %q after %v", r, err, reason, elapsed)
	if err != nil || r != Unknown {
		t.Fatalf("Check = %v, %v; want unknown", r, err)
	}
	if elapsed > 2*time.Second {
		t.Errorf("Check took %v with a 300ms timeout", elapsed)
	}
	if !strings.Contains(reason, "timeout") && !strings.Contains(reason, "cancel") {
		t.Errorf("ReasonUnknown = %q, want timeout/canceled", reason)
	}
	// Removing the timeout again and checking an easy problem works.
	s2 := c.NewSolver()
	defer s2.Close()
	s2.SetTimeout(0)
	s2.Assert(c.Eq(c.Int(1), c.Int(1)))
	if r, err := s2.Check(context.Background()); r != Sat || err != nil {
		t.Fatalf("easy Check = %v, %v", r, err)
	}
}

func TestInterrupt(t *testing.T) {
	c := NewContext()
	defer c.Close()
	s := hardSolver(t, c)
	defer s.Close()
	ctx, cancel := context.WithCancel(context.Background())
	timer := time.AfterFunc(200*time.Millisecond, cancel)
	defer timer.Stop()
	start := time.Now()
	r, err := s.Check(ctx)
	elapsed := time.Since(start)
	t.Logf("Check = %v, err %v, reason %q after %v", r, err, s.ReasonUnknown(), elapsed)
	if r != Unknown || !errors.Is(err, context.Canceled) {
		t.Fatalf("Check = %v, %v; want unknown, context.Canceled", r, err)
	}
	if elapsed > 2*time.Second {
		t.Errorf("interrupted Check took %v", elapsed)
	}
	// The interruption is not sticky: the context still solves problems.
	s2 := c.NewSolver()
	defer s2.Close()
	s2.Assert(c.Not(c.Eq(c.Int(1), c.Int(2))))
	if r, err := s2.Check(context.Background()); r != Sat || err != nil {
		t.Fatalf("Check after interrupt = %v, %v", r, err)
	}

	// Deadline flavour, and an already cancelled context (Z3 not run).
	dctx, dcancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer dcancel()
	start = time.Now()
	if r, err := s.Check(dctx); r != Unknown || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Check with deadline = %v, %v", r, err)
	}
	t.Logf("deadline Check returned after %v", time.Since(start))
	if r, err := s2.Check(ctx); r != Unknown || !errors.Is(err, context.Canceled) {
		t.Fatalf("Check with cancelled ctx = %v, %v", r, err)
	}
}

// TestCloseAndInterruptRace hammers Interrupt from other goroutines while
// the context works and is closed.
func TestCloseAndInterruptRace(t *testing.T) {
	for i := 0; i < 50; i++ {
		c := NewContext()
		var wg sync.WaitGroup
		stop := make(chan struct{})
		for g := 0; g < 3; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					select {
					case <-stop:
						return
					default:
						c.Interrupt()
						runtime.Gosched()
					}
				}
			}()
		}
		s := c.NewSolver()
		s.Assert(c.Eq(c.Int(i), c.Int(i)))
		if _, err := s.Check(context.Background()); err != nil {
			t.Error(err)
		}
		if i%2 == 0 {
			s.Close()
		}
		c.Close()
		c.Close()
		s.Close() // after the context: a no-op
		c.Interrupt()
		close(stop)
		wg.Wait()
	}
}

func TestUseAfterClose(t *testing.T) {
	c := NewContext()
	s := c.NewSolver()
	x := c.Const("x", c.IntSort())
	c.Close()
	if a := c.Eq(x, x); a != (AST{}) || c.Err() == nil {
		t.Errorf("Eq after Close = %v, Err %v", a, c.Err())
	}
	if _, err := c.ParseSMTLIB2("(assert true)", nil, nil); err == nil {
		t.Error("ParseSMTLIB2 after Close succeeded")
	}
	s.Assert(x)
	if _, err := s.Check(context.Background()); err == nil {
		t.Error("Check after Close succeeded")
	}
	if got := s.UnsatCore(); got != nil {
		t.Errorf("UnsatCore after Close = %v", got)
	}
	if got := c.String(x); got != "<closed>" {
		t.Errorf("String after Close = %q", got)
	}
	s2 := c.NewSolver()
	s2.SetTimeout(time.Second)
	s2.Close()
	s2.Close()
}

// vmRSS returns the resident set size in bytes.
func vmRSS(t *testing.T) int64 {
	t.Helper()
	runtime.GC()
	f, err := os.Open("/proc/self/status")
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Skip("no VmRSS in /proc/self/status")
	return 0
}

const mib = 1 << 20

func TestNoLeakContexts(t *testing.T) {
	round := func(i int) {
		c := NewContext()
		defer c.Close()
		e := newTensorEnv(c)
		s := c.NewSolver()
		defer s.Close()
		s.SetTimeout(5 * time.Second)
		comm := parseOne(t, c, axioms["ewadd-comm"], map[string]Sort{"Tensor": e.tensor},
			map[string]FuncDecl{"ewadd": e.ewadd, "ewmul": e.ewmul})
		s.AssertTracked(comm, "ewadd-comm")
		s.Assert(c.Not(c.Eq(c.Apply(e.ewadd, e.a, e.b), c.Apply(e.ewadd, e.b, e.a))))
		s.Assert(c.Or(c.Eq(c.Int(i), c.Int(i)), c.And()))
		r, err := s.Check(context.Background())
		if r != Unsat || err != nil {
			t.Fatalf("round %d: Check = %v, %v", i, r, err)
		}
		if core := s.UnsatCore(); len(core) != 1 {
			t.Fatalf("round %d: core %v", i, core)
		}
	}
	for i := 0; i < 200; i++ {
		round(i)
	}
	before := vmRSS(t)
	start := time.Now()
	for i := 0; i < 2000; i++ {
		round(i)
	}
	after := vmRSS(t)
	growth := after - before
	t.Logf("2000 contexts in %v: VmRSS %.1f MiB -> %.1f MiB (growth %.2f MiB)",
		time.Since(start), float64(before)/mib, float64(after)/mib, float64(growth)/mib)
	if growth >= 20*mib {
		t.Errorf("VmRSS grew %.1f MiB over 2000 contexts", float64(growth)/mib)
	}
}

func TestNoLeakSolvers(t *testing.T) {
	c := NewContext()
	defer c.Close()
	x := c.Const("x", c.IntSort())
	f := c.Eq(x, c.Int(3))
	// Z3 builds a solver's internals lazily on the first assertion, which
	// costs a few milliseconds; every 20th solver goes that far (and is
	// checked), the rest exercise the solver and params reference counts.
	round := func(i int) {
		s := c.NewSolver()
		defer s.Close()
		s.SetTimeout(time.Second)
		if i%20 != 0 {
			return
		}
		s.AssertTracked(f, "h")
		s.Assert(c.Not(f))
		if r, err := s.Check(context.Background()); r != Unsat || err != nil {
			t.Fatalf("round %d: Check = %v, %v", i, r, err)
		}
	}
	for i := 0; i < 2000; i++ {
		round(i)
	}
	before := vmRSS(t)
	start := time.Now()
	for i := 0; i < 20000; i++ {
		round(i)
	}
	after := vmRSS(t)
	growth := after - before
	t.Logf("20000 solvers in %v: VmRSS %.1f MiB -> %.1f MiB (growth %.2f MiB)",
		time.Since(start), float64(before)/mib, float64(after)/mib, float64(growth)/mib)
	if growth >= 20*mib {
		t.Errorf("VmRSS grew %.1f MiB over 20000 solvers", float64(growth)/mib)
	}
}

func TestConcurrentContexts(t *testing.T) {
	const workers, rounds = 4, 10
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := NewContext()
			defer c.Close()
			e := newTensorEnv(c)
			sorts := map[string]Sort{"Tensor": e.tensor}
			decls := map[string]FuncDecl{"ewadd": e.ewadd, "ewmul": e.ewmul}
			for i := 0; i < rounds; i++ {
				s := c.NewSolver()
				for _, name := range []string{"ewadd-comm", "ewadd-assoc"} {
					as, err := c.ParseSMTLIB2(axioms[name], sorts, decls)
					if err != nil {
						errs <- err
						return
					}
					s.AssertTracked(as[0], name)
				}
				goal := c.Eq(c.Apply(e.ewadd, e.a, c.Apply(e.ewadd, e.b, e.cc)),
					c.Apply(e.ewadd, e.cc, c.Apply(e.ewadd, e.b, e.a)))
				s.Assert(c.Not(goal))
				r, err := s.Check(context.Background())
				core := s.UnsatCore()
				s.Close()
				if err != nil || r != Unsat || len(core) != 2 {
					errs <- fmt.Errorf("worker %d round %d: %v, %v, core %v", w, i, r, err, core)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
