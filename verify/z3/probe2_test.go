package z3

import "testing"

func TestProbe2(t *testing.T) {
	c := NewContext()
	defer c.Close()
	as, err := c.ParseSMTLIB2(fermat, nil, nil)
	t.Log(len(as), err)
	for _, a := range as {
		t.Log(c.String(a))
	}
	s := c.NewSolver()
	s.Assert(as[0])
	t.Log(s.err)
	c.reset()
	t.Log(c.lastError("x"))
	s2 := c.NewSolver()
	s2.Assert(c.Eq(c.Int(1), c.Int(1)))
	t.Log(s2.err)
}
