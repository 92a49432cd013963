// Package z3 is a small cgo binding to the Z3 SMT solver's C API (libz3).
// It covers just what the rule verifier needs: uninterpreted sorts and
// functions, integers, Boolean connectives, SMT-LIB2 parsing, and solvers
// with timeouts, cancellation and unsat cores. A Context and what is made
// from it are used by one goroutine at a time. Only Context.Interrupt may be
// called from any goroutine. docs/design.md ("The Z3 binding") gives its
// memory, goroutine and error rules.
package z3

/*
#cgo LDFLAGS: -lz3
#include <stdlib.h>
#include <z3.h>
*/
import "C"

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"sync"
	"time"
	"unsafe"
)

// Version is libz3's full version string (Z3_get_full_version), e.g.
// "Z3 4.8.12.0".
func Version() string {
	return C.GoString(C.Z3_get_full_version())
}

// Context owns a Z3_context. Create one with NewContext and release it with
// Close.
type Context struct {
	// mu guards ctx against Interrupt racing with Close. The owning
	// goroutine reads ctx without the lock: only Close (also run by the
	// owner) writes it.
	mu  sync.Mutex
	ctx C.Z3_context
	err error // first error from a builder without an error result
	// kept holds AST vectors returned by the parser. In Z3 4.8.12 their
	// elements are owned by the vector only (Z3_ast_vector_get does not
	// pin them in a non-reference-counted context), so the vectors stay
	// referenced until Close to keep parsed ASTs valid for the context's
	// lifetime.
	kept []C.Z3_ast_vector
}

// errClosed is reported when a closed Context (or its solver) is used.
var errClosed = errors.New("z3: context is closed")

// errInvalid is reported when a zero Sort, FuncDecl or AST is used.
var errInvalid = errors.New("z3: invalid (zero) sort, declaration or AST")

// NewContext makes a context with models and unsat cores enabled and with a
// NULL error handler, so that API misuse and parse errors are reported as Go
// errors instead of terminating the process.
func NewContext() *Context {
	cfg := C.Z3_mk_config()
	setCfg := func(k, v string) {
		ck, cv := C.CString(k), C.CString(v)
		C.Z3_set_param_value(cfg, ck, cv)
		C.free(unsafe.Pointer(ck))
		C.free(unsafe.Pointer(cv))
	}
	setCfg("model", "true")
	setCfg("unsat_core", "true")
	ctx := C.Z3_mk_context(cfg)
	C.Z3_del_config(cfg) // the context keeps its own copy of the settings
	C.Z3_set_error_handler(ctx, nil)
	return &Context{ctx: ctx}
}

// Close releases the context and everything made from it (ASTs, sorts,
// declarations, solvers). It is idempotent.
func (c *Context) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ctx == nil {
		return
	}
	for _, v := range c.kept {
		C.Z3_ast_vector_dec_ref(c.ctx, v)
	}
	c.kept = nil
	C.Z3_del_context(c.ctx)
	c.ctx = nil
}

// Interrupt asks a running Z3 operation on this context to stop as soon as
// possible (Z3_interrupt). It is safe to call from any goroutine and is a
// no-op after Close.
func (c *Context) Interrupt() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ctx != nil {
		C.Z3_interrupt(c.ctx)
	}
}

// Err returns the first error recorded by a builder method that has no error
// result (for example Eq on arguments of different sorts), or nil.
func (c *Context) Err() error { return c.err }

// reset clears the context's error code. Some Z3 4.8.12 entry points (for
// example Z3_parse_smtlib2_string) do not reset it themselves, so a stale
// error from an earlier call would otherwise be reported again.
func (c *Context) reset() {
	C.Z3_set_error(c.ctx, C.Z3_OK)
}

// lastError returns the error of the last API call on c, or nil.
func (c *Context) lastError(op string) error {
	code := C.Z3_get_error_code(c.ctx)
	if code == C.Z3_OK {
		return nil
	}
	return fmt.Errorf("z3: %s: %s", op, C.GoString(C.Z3_get_error_msg(c.ctx, code)))
}

// record stores err as the context's sticky builder error if it is the first.
func (c *Context) record(err error) {
	if c.err == nil {
		c.err = err
	}
}

// usable reports whether builder op may call into Z3, recording why not.
func (c *Context) usable(op string) bool {
	if c.ctx == nil {
		c.record(fmt.Errorf("z3: %s: %w", op, errClosed))
		return false
	}
	return true
}

// check records and reports the error of the last API call, if any.
func (c *Context) check(op string) bool {
	if err := c.lastError(op); err != nil {
		c.record(err)
		return false
	}
	return true
}

// symbol makes a Z3 string symbol for name.
func (c *Context) symbol(name string) C.Z3_symbol {
	cs := C.CString(name)
	defer C.free(unsafe.Pointer(cs))
	return C.Z3_mk_string_symbol(c.ctx, cs)
}

// Sort is a Z3 sort. It is valid while its Context is open; the zero Sort is
// invalid.
type Sort struct{ s C.Z3_sort }

// FuncDecl is a Z3 function declaration. It is valid while its Context is
// open; the zero FuncDecl is invalid.
type FuncDecl struct{ f C.Z3_func_decl }

// AST is a Z3 term or formula. It is valid while its Context is open; the
// zero AST is invalid.
type AST struct{ a C.Z3_ast }

// UninterpretedSort returns the uninterpreted sort called name.
func (c *Context) UninterpretedSort(name string) Sort {
	if !c.usable("UninterpretedSort") {
		return Sort{}
	}
	c.reset()
	s := C.Z3_mk_uninterpreted_sort(c.ctx, c.symbol(name))
	if !c.check("UninterpretedSort") {
		return Sort{}
	}
	return Sort{s}
}

// IntSort returns the sort of mathematical integers.
func (c *Context) IntSort() Sort {
	if !c.usable("IntSort") {
		return Sort{}
	}
	return Sort{C.Z3_mk_int_sort(c.ctx)}
}

// BoolSort returns the Boolean sort.
func (c *Context) BoolSort() Sort {
	if !c.usable("BoolSort") {
		return Sort{}
	}
	return Sort{C.Z3_mk_bool_sort(c.ctx)}
}

// FuncDecl declares the uninterpreted function name : domain -> rng.
func (c *Context) FuncDecl(name string, domain []Sort, rng Sort) FuncDecl {
	if !c.usable("FuncDecl") {
		return FuncDecl{}
	}
	dom := make([]C.Z3_sort, len(domain))
	for i, s := range domain {
		if s.s == nil {
			c.record(fmt.Errorf("z3: FuncDecl %q: domain %d: %w", name, i, errInvalid))
			return FuncDecl{}
		}
		dom[i] = s.s
	}
	if rng.s == nil {
		c.record(fmt.Errorf("z3: FuncDecl %q: range: %w", name, errInvalid))
		return FuncDecl{}
	}
	var domPtr *C.Z3_sort
	if len(dom) > 0 {
		domPtr = &dom[0]
	}
	c.reset()
	f := C.Z3_mk_func_decl(c.ctx, c.symbol(name), C.uint(len(dom)), domPtr, rng.s)
	if !c.check("FuncDecl") {
		return FuncDecl{}
	}
	return FuncDecl{f}
}

// asts converts args to a C array, reporting an invalid element.
func (c *Context) asts(op string, args []AST) ([]C.Z3_ast, bool) {
	out := make([]C.Z3_ast, len(args))
	for i, a := range args {
		if a.a == nil {
			c.record(fmt.Errorf("z3: %s: argument %d: %w", op, i, errInvalid))
			return nil, false
		}
		out[i] = a.a
	}
	return out, true
}

// astPtr returns a pointer to the first element, or nil for no elements.
func astPtr(v []C.Z3_ast) *C.Z3_ast {
	if len(v) == 0 {
		return nil
	}
	return &v[0]
}

// Apply applies f to args.
func (c *Context) Apply(f FuncDecl, args ...AST) AST {
	if !c.usable("Apply") {
		return AST{}
	}
	if f.f == nil {
		c.record(fmt.Errorf("z3: Apply: %w", errInvalid))
		return AST{}
	}
	v, ok := c.asts("Apply", args)
	if !ok {
		return AST{}
	}
	c.reset()
	a := C.Z3_mk_app(c.ctx, f.f, C.uint(len(v)), astPtr(v))
	if !c.check("Apply") {
		return AST{}
	}
	return AST{a}
}

// Const returns the constant called name of sort s.
func (c *Context) Const(name string, s Sort) AST {
	if !c.usable("Const") {
		return AST{}
	}
	if s.s == nil {
		c.record(fmt.Errorf("z3: Const %q: %w", name, errInvalid))
		return AST{}
	}
	c.reset()
	a := C.Z3_mk_const(c.ctx, c.symbol(name), s.s)
	if !c.check("Const") {
		return AST{}
	}
	return AST{a}
}

// Int returns the integer numeral v.
func (c *Context) Int(v int) AST {
	if !c.usable("Int") {
		return AST{}
	}
	c.reset()
	a := C.Z3_mk_int64(c.ctx, C.int64_t(v), C.Z3_mk_int_sort(c.ctx))
	if !c.check("Int") {
		return AST{}
	}
	return AST{a}
}

// unary and binary helpers share the validity/error plumbing.
func (c *Context) unary(op string, a AST, mk func(C.Z3_ast) C.Z3_ast) AST {
	if !c.usable(op) {
		return AST{}
	}
	if a.a == nil {
		c.record(fmt.Errorf("z3: %s: %w", op, errInvalid))
		return AST{}
	}
	c.reset()
	r := mk(a.a)
	if !c.check(op) {
		return AST{}
	}
	return AST{r}
}

// Eq returns a = b. Both sides must have the same sort.
func (c *Context) Eq(a, b AST) AST {
	if b.a == nil {
		if c.usable("Eq") {
			c.record(fmt.Errorf("z3: Eq: %w", errInvalid))
		}
		return AST{}
	}
	return c.unary("Eq", a, func(x C.Z3_ast) C.Z3_ast { return C.Z3_mk_eq(c.ctx, x, b.a) })
}

// Not returns the negation of the Boolean formula a.
func (c *Context) Not(a AST) AST {
	return c.unary("Not", a, func(x C.Z3_ast) C.Z3_ast { return C.Z3_mk_not(c.ctx, x) })
}

// And returns the conjunction of as; And() is true.
func (c *Context) And(as ...AST) AST {
	return c.nary("And", as, true)
}

// Or returns the disjunction of as; Or() is false.
func (c *Context) Or(as ...AST) AST {
	return c.nary("Or", as, false)
}

func (c *Context) nary(op string, as []AST, isAnd bool) AST {
	if !c.usable(op) {
		return AST{}
	}
	if len(as) == 0 {
		if isAnd {
			return AST{C.Z3_mk_true(c.ctx)}
		}
		return AST{C.Z3_mk_false(c.ctx)}
	}
	v, ok := c.asts(op, as)
	if !ok {
		return AST{}
	}
	var r C.Z3_ast
	c.reset()
	if isAnd {
		r = C.Z3_mk_and(c.ctx, C.uint(len(v)), &v[0])
	} else {
		r = C.Z3_mk_or(c.ctx, C.uint(len(v)), &v[0])
	}
	if !c.check(op) {
		return AST{}
	}
	return AST{r}
}

// String renders a in SMT-LIB2 syntax. The zero AST renders as "<invalid>".
func (c *Context) String(a AST) string {
	if c.ctx == nil {
		return "<closed>"
	}
	if a.a == nil {
		return "<invalid>"
	}
	// The returned buffer is reused by the next call: copy it at once.
	return C.GoString(C.Z3_ast_to_string(c.ctx, a.a))
}

// ParseSMTLIB2 parses the assertions in text with Z3_parse_smtlib2_string.
// sorts and decls give the sorts and function declarations the text may
// refer to by name (the text may also declare its own). It returns the
// asserted formulas in order. Syntax and sort errors are returned as errors
// carrying Z3's message.
func (c *Context) ParseSMTLIB2(text string, sorts map[string]Sort, decls map[string]FuncDecl) ([]AST, error) {
	if c.ctx == nil {
		return nil, errClosed
	}
	sortNames := make([]C.Z3_symbol, 0, len(sorts))
	sortVals := make([]C.Z3_sort, 0, len(sorts))
	for name, s := range sorts {
		if s.s == nil {
			return nil, fmt.Errorf("z3: ParseSMTLIB2: sort %q: %w", name, errInvalid)
		}
		sortNames = append(sortNames, c.symbol(name))
		sortVals = append(sortVals, s.s)
	}
	declNames := make([]C.Z3_symbol, 0, len(decls))
	declVals := make([]C.Z3_func_decl, 0, len(decls))
	for name, f := range decls {
		if f.f == nil {
			return nil, fmt.Errorf("z3: ParseSMTLIB2: declaration %q: %w", name, errInvalid)
		}
		declNames = append(declNames, c.symbol(name))
		declVals = append(declVals, f.f)
	}
	var (
		sn *C.Z3_symbol
		sv *C.Z3_sort
		dn *C.Z3_symbol
		dv *C.Z3_func_decl
	)
	if len(sortNames) > 0 {
		sn, sv = &sortNames[0], &sortVals[0]
	}
	if len(declNames) > 0 {
		dn, dv = &declNames[0], &declVals[0]
	}
	ctext := C.CString(text)
	defer C.free(unsafe.Pointer(ctext))
	c.reset()
	vec := C.Z3_parse_smtlib2_string(c.ctx, ctext,
		C.uint(len(sortNames)), sn, sv, C.uint(len(declNames)), dn, dv)
	if err := c.lastError("ParseSMTLIB2"); err != nil {
		return nil, err
	}
	if vec == nil {
		return nil, errors.New("z3: ParseSMTLIB2: no result")
	}
	n := int(C.Z3_ast_vector_size(c.ctx, vec))
	if n == 0 {
		return nil, nil // the vector is freed with the context
	}
	C.Z3_ast_vector_inc_ref(c.ctx, vec)
	c.kept = append(c.kept, vec) // released by Close; see Context.kept
	out := make([]AST, n)
	for i := range out {
		out[i] = AST{C.Z3_ast_vector_get(c.ctx, vec, C.uint(i))}
	}
	return out, nil
}

// Result is the outcome of Solver.Check.
type Result int

// Check outcomes.
const (
	Unknown Result = iota
	Sat
	Unsat
)

func (r Result) String() string {
	switch r {
	case Sat:
		return "sat"
	case Unsat:
		return "unsat"
	case Unknown:
		return "unknown"
	}
	return fmt.Sprintf("Result(%d)", int(r))
}

// Solver is a Z3 solver. It belongs to one Context and must be closed
// before (or is released together with) that Context.
type Solver struct {
	c   *Context
	s   C.Z3_solver
	err error // first Assert error; reported by Check
}

// NewSolver makes a general-purpose solver (Z3_mk_solver).
func (c *Context) NewSolver() *Solver { return c.newSolver(false) }

// NewSimpleSolver makes Z3's plain SMT solver (Z3_mk_simple_solver), without
// the general solver's tactic front end: cheaper to fill with many
// quantified assertions, for one-shot queries that need no preprocessing.
func (c *Context) NewSimpleSolver() *Solver { return c.newSolver(true) }

func (c *Context) newSolver(simple bool) *Solver {
	s := &Solver{c: c}
	if c.ctx == nil {
		s.err = errClosed
		return s
	}
	c.reset()
	if simple {
		s.s = C.Z3_mk_simple_solver(c.ctx)
	} else {
		s.s = C.Z3_mk_solver(c.ctx)
	}
	if err := c.lastError("NewSolver"); err != nil {
		s.s, s.err = nil, err
		return s
	}
	C.Z3_solver_inc_ref(c.ctx, s.s)
	return s
}

// Close releases the solver. It is idempotent, and a no-op once the Context
// is closed (closing the Context frees its solvers).
func (s *Solver) Close() {
	if s.s == nil {
		return
	}
	if s.c.ctx != nil {
		C.Z3_solver_dec_ref(s.c.ctx, s.s)
	}
	s.s = nil
	if s.err == nil {
		s.err = errors.New("z3: solver is closed")
	}
}

// ready reports whether the solver can call into Z3.
func (s *Solver) ready() bool {
	if s.s == nil || s.c.ctx == nil {
		if s.err == nil {
			s.err = errClosed
		}
		return false
	}
	return true
}

// SetBool sets a Boolean solver parameter (Z3_solver_set_params), such as
// "smt.mbqi". An unknown name is reported by the next Check.
func (s *Solver) SetBool(name string, v bool) {
	if !s.ready() {
		return
	}
	ctx := s.c.ctx
	s.c.reset()
	p := C.Z3_mk_params(ctx)
	C.Z3_params_inc_ref(ctx, p)
	defer C.Z3_params_dec_ref(ctx, p)
	C.Z3_params_set_bool(ctx, p, s.c.symbol(name), C.bool(v))
	C.Z3_solver_set_params(ctx, s.s, p)
	if err := s.c.lastError("SetBool " + name); err != nil && s.err == nil {
		s.err = err
	}
}

// SetTimeout sets the solver's "timeout" parameter (milliseconds). d <= 0
// removes the timeout.
func (s *Solver) SetTimeout(d time.Duration) {
	ms := uint64(math.MaxUint32) // Z3's "no timeout"
	if d > 0 {
		ms = uint64((d + time.Millisecond - 1) / time.Millisecond)
	}
	s.SetUint("timeout", ms)
}

// SetResourceLimit sets the solver's "rlimit" parameter: the number of
// Z3's resource units (a count of its basic steps) one Check may spend
// before it gives up with Unknown. Unlike a timeout it does not depend on
// the machine or its load, so the same query under the same limit gets the
// same answer everywhere. 0 removes the limit.
func (s *Solver) SetResourceLimit(units uint64) { s.SetUint("rlimit", units) }

// SetUint sets an unsigned solver parameter (Z3_solver_set_params). Values
// above Z3's 32-bit range are clamped. An unknown name is reported by the
// next Check.
func (s *Solver) SetUint(name string, v uint64) {
	if !s.ready() {
		return
	}
	v = min(v, math.MaxUint32)
	ctx := s.c.ctx
	s.c.reset()
	p := C.Z3_mk_params(ctx)
	C.Z3_params_inc_ref(ctx, p)
	defer C.Z3_params_dec_ref(ctx, p)
	C.Z3_params_set_uint(ctx, p, s.c.symbol(name), C.uint(v))
	C.Z3_solver_set_params(ctx, s.s, p)
	if err := s.c.lastError("SetUint " + name); err != nil && s.err == nil {
		s.err = err
	}
}

// Statistic returns one of the solver's statistics after a Check, such as
// "rlimit count" (resource units spent) or "quant instantiations".
func (s *Solver) Statistic(key string) (float64, bool) {
	if !s.ready() {
		return 0, false
	}
	ctx := s.c.ctx
	s.c.reset()
	st := C.Z3_solver_get_statistics(ctx, s.s)
	if s.c.lastError("Statistic") != nil {
		return 0, false
	}
	C.Z3_stats_inc_ref(ctx, st)
	defer C.Z3_stats_dec_ref(ctx, st)
	for i := C.uint(0); i < C.Z3_stats_size(ctx, st); i++ {
		if C.GoString(C.Z3_stats_get_key(ctx, st, i)) != key {
			continue
		}
		if C.Z3_stats_is_uint(ctx, st, i) {
			return float64(C.Z3_stats_get_uint_value(ctx, st, i)), true
		}
		return float64(C.Z3_stats_get_double_value(ctx, st, i)), true
	}
	return 0, false
}

// Assert adds the Boolean formula a to the solver. Errors (an invalid or
// non-Boolean a) are reported by the next Check.
func (s *Solver) Assert(a AST) {
	s.assert("Assert", a, nil)
}

// AssertTracked asserts a under the Boolean tracking constant called name
// (Z3_solver_assert_and_track) so that UnsatCore can report it. Using the
// same name twice tracks both formulas with the same constant.
func (s *Solver) AssertTracked(a AST, name string) {
	if !s.ready() {
		return
	}
	p := s.c.Const(name, s.c.BoolSort())
	s.assert("AssertTracked "+name, a, &p)
}

func (s *Solver) assert(op string, a AST, track *AST) {
	if !s.ready() {
		return
	}
	if a.a == nil || (track != nil && track.a == nil) {
		if s.err == nil {
			cause := s.c.err
			if cause == nil {
				cause = errInvalid
			}
			s.err = fmt.Errorf("z3: %s: invalid formula: %w", op, cause)
		}
		return
	}
	s.c.reset()
	if track == nil {
		C.Z3_solver_assert(s.c.ctx, s.s, a.a)
	} else {
		C.Z3_solver_assert_and_track(s.c.ctx, s.s, a.a, track.a)
	}
	if err := s.c.lastError(op); err != nil && s.err == nil {
		s.err = err
	}
}

// interruptEvery is how often the Check watcher repeats Z3_interrupt after
// cancellation, covering an interrupt that lands before Z3 starts listening.
const interruptEvery = 20 * time.Millisecond

// Check decides the satisfiability of the assertions (Z3_solver_check). If
// ctx is cancelled while Z3 runs, a watcher goroutine interrupts the context
// and Check returns (Unknown, ctx.Err()). An earlier Assert or SetTimeout
// failure is returned as the error without running Z3.
func (s *Solver) Check(ctx context.Context) (Result, error) {
	if !s.ready() || s.err != nil {
		return Unknown, s.err
	}
	if err := ctx.Err(); err != nil {
		return Unknown, err
	}
	var (
		stop chan struct{}
		wg   sync.WaitGroup
	)
	if done := ctx.Done(); done != nil {
		stop = make(chan struct{})
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case <-stop:
				return
			case <-done:
			}
			t := time.NewTicker(interruptEvery)
			defer t.Stop()
			for {
				s.c.Interrupt()
				select {
				case <-stop:
					return
				case <-t.C:
				}
			}
		}()
	}
	s.c.reset()
	r := C.Z3_solver_check(s.c.ctx, s.s)
	callErr := s.c.lastError("Check")
	if stop != nil {
		close(stop)
		wg.Wait()
	}
	if err := ctx.Err(); err != nil {
		return Unknown, err
	}
	if callErr != nil {
		return Unknown, callErr
	}
	switch r {
	case C.Z3_L_TRUE:
		return Sat, nil
	case C.Z3_L_FALSE:
		return Unsat, nil
	}
	return Unknown, nil
}

// ReasonUnknown explains the last Unknown result, e.g. "timeout",
// "canceled" or "incomplete quantifiers".
func (s *Solver) ReasonUnknown() string {
	if !s.ready() {
		return ""
	}
	s.c.reset()
	r := C.GoString(C.Z3_solver_get_reason_unknown(s.c.ctx, s.s))
	if s.c.lastError("ReasonUnknown") != nil {
		return ""
	}
	return r
}

// UnsatCore returns the sorted names of the tracking constants (see
// AssertTracked) in the unsat core of the last Unsat check, or nil if there
// is none.
func (s *Solver) UnsatCore() []string {
	if !s.ready() {
		return nil
	}
	ctx := s.c.ctx
	s.c.reset()
	vec := C.Z3_solver_get_unsat_core(ctx, s.s)
	if s.c.lastError("UnsatCore") != nil || vec == nil {
		return nil
	}
	C.Z3_ast_vector_inc_ref(ctx, vec)
	defer C.Z3_ast_vector_dec_ref(ctx, vec)
	n := int(C.Z3_ast_vector_size(ctx, vec))
	if n == 0 {
		return nil
	}
	names := make([]string, 0, n)
	for i := 0; i < n; i++ {
		a := C.Z3_ast_vector_get(ctx, vec, C.uint(i))
		if C.Z3_is_app(ctx, a) {
			decl := C.Z3_get_app_decl(ctx, C.Z3_to_app(ctx, a))
			names = append(names, C.GoString(C.Z3_get_symbol_string(ctx, C.Z3_get_decl_name(ctx, decl))))
		} else {
			names = append(names, C.GoString(C.Z3_ast_to_string(ctx, a)))
		}
	}
	sort.Strings(names)
	return names
}
