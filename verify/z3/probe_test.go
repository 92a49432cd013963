package z3

import (
	"context"
	"testing"
	"time"
)

const fermat = `(declare-const x Int) (declare-const y Int) (declare-const z Int) (assert (and (> x 0) (> y 0) (> z 0) (= (+ (* x x x) (* y y y)) (* z z z))))`

func TestProbe(t *testing.T) {
	c := NewContext()
	defer c.Close()
	t.Log(Version())
	// interrupt when idle, then check easy
	c.Interrupt()
	s := c.NewSolver()
	s.Assert(c.Eq(c.Int(1), c.Int(1)))
	r, err := s.Check(context.Background())
	t.Log("after idle interrupt:", r, err, s.ReasonUnknown())
	r, err = s.Check(context.Background())
	t.Log("second:", r, err, s.ReasonUnknown())
	// parse errors
	for _, txt := range []string{"(assert (= a b", "(assert (foo 1))", "(declare-const a Int)(assert (= a true))", "(assert (! (= 1 1) :named n1))", "(declare-const a Int)(assert (= a 1))(check-sat)(assert (= a 2))", "(push)(assert true)(pop)(assert false)"} {
		as, err := c.ParseSMTLIB2(txt, nil, nil)
		var ss []string
		for _, a := range as {
			ss = append(ss, c.String(a))
		}
		t.Logf("%q -> %q err=%v", txt, ss, err)
	}
	// timeout
	as, err := c.ParseSMTLIB2(fermat, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	s2 := c.NewSolver()
	s2.SetTimeout(300 * time.Millisecond)
	for _, a := range as {
		s2.Assert(a)
	}
	st := time.Now()
	r, err = s2.Check(context.Background())
	t.Log("timeout:", r, err, s2.ReasonUnknown(), time.Since(st))
	s3 := c.NewSolver()
	for _, a := range as {
		s3.Assert(a)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	st = time.Now()
	r, err = s3.Check(ctx)
	cancel()
	t.Log("interrupt:", r, err, s3.ReasonUnknown(), time.Since(st))
	r, err = s.Check(context.Background())
	t.Log("after interrupt, easy:", r, err, s.ReasonUnknown())
	c.Interrupt()
	r, err = s.Check(context.Background())
	t.Log("after explicit idle interrupt, easy:", r, err, s.ReasonUnknown())
	r, err = s2.Check(context.Background())
	t.Log("after explicit idle interrupt, hard w/ timeout:", r, err, s2.ReasonUnknown())
	// sort error
	x := c.Eq(c.Int(1), c.BoolSort().zeroConst(c))
	t.Log("sort err:", x, c.Err())
}

func (s Sort) zeroConst(c *Context) AST { return c.Const("bb", s) }
