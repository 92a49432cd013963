package enumerate

import (
	"fmt"

	"rulebook/rules"
)

// degreeForm is a candidate found at degree d as it would read at every
// degree: its degree parameters (all d) become the variable d, and its
// input shapes are written at rules.BaseDegree, the convention of d-rules
// (rules/degree.go). Two degrees' candidates are one rule exactly when
// their degree forms have the same text and shapes. ok is false when a
// layout is not a power of d, which leaves the candidate concrete.
func degreeForm(c Candidate, d int) (form Candidate, ok bool) {
	r := &rules.Rule{NumInputs: c.Rule.NumInputs, Src: *c.Rule.Src.WithDegreeVar(d), Dst: *c.Rule.Dst.WithDegreeVar(d)}
	for _, s := range c.Rule.InputShapes {
		t, err := rules.ShapeAtDegree(s, d, rules.BaseDegree)
		if err != nil {
			return Candidate{}, false
		}
		r.InputShapes = append(r.InputShapes, t)
	}
	canon, text := r.Oriented()
	return Candidate{Rule: canon, Text: text, Fingerprint: c.Fingerprint}, true
}

// formKey identifies a degree form by its text alone, as dedupe does: the
// generator records each rule with the shapes of the first pair that gave
// it, and which pair comes first can differ between degrees. The form
// recorded is the one found at the smallest degree.
func formKey(c Candidate) string { return c.Text.String() }

// mergeDegrees joins the generations at each degree. A rule found at every
// degree (two at least) is stored once in its degree form: with d in its
// text if it has degree parameters (counted as generalised), else written
// at the base degree. A rule found at some degrees only keeps its concrete
// degree, as found: "ewadd(x, x) = reduce(2, replicate(2, x))" holds at 2
// alone. Counts add up over the degrees.
func mergeDegrees(results []*Result, degrees []int) *Result {
	out := &Result{Stats: Stats{Degrees: degrees}}
	for _, res := range results {
		addStats(&out.Stats, res.Stats)
	}
	type entry struct {
		form    Candidate
		degrees int
	}
	forms := map[string]*entry{}
	var order []string
	keys := make([][]string, len(results))
	for i, res := range results {
		keys[i] = make([]string, len(res.Candidates))
		for j, c := range res.Candidates {
			form, ok := degreeForm(c, degrees[i])
			if !ok {
				continue
			}
			k := formKey(form)
			keys[i][j] = k
			e := forms[k]
			if e == nil {
				e = &entry{form: form}
				forms[k] = e
				order = append(order, k)
			}
			e.degrees++
		}
	}
	general := func(k string) bool { return len(results) > 1 && k != "" && forms[k].degrees == len(results) }
	var cands []Candidate
	for _, k := range order {
		if general(k) {
			cands = append(cands, forms[k].form)
			if forms[k].form.Rule.HasDegreeVar() {
				out.Stats.Generalised++
			}
		}
	}
	for i, res := range results {
		for j, c := range res.Candidates {
			if !general(keys[i][j]) {
				cands = append(cands, c)
			}
		}
	}
	out.Candidates = dedupe(cands)
	return out
}

// addStats adds one degree's counts; levels add up by size.
func addStats(to *Stats, s Stats) {
	to.Graphs += s.Graphs
	to.Classes += s.Classes
	to.Collisions += s.Collisions
	to.Candidates += s.Candidates
	for _, l := range s.Levels {
		for len(to.Levels) < l.Ops {
			to.Levels = append(to.Levels, LevelStats{Ops: len(to.Levels) + 1})
		}
		t := &to.Levels[l.Ops-1]
		t.Graphs += l.Graphs
		t.NewClasses += l.NewClasses
		t.Members += l.Members
	}
}

// Operators reads the --ops and --degrees flags of generate and build: the
// operator set (rules.SelectOps) and its degrees. A set without degree
// parameters has none to enumerate: it gets nil, and degrees the user gave
// (given) are refused rather than silently unused. Errors name the flag.
func Operators(ops, degrees string, given bool) (*rules.Registry, []int, error) {
	reg, err := rules.SelectOps(ops)
	if err != nil {
		return nil, nil, fmt.Errorf("--ops: %w", err)
	}
	if !reg.HasDegreeParams() {
		if given {
			return nil, nil, fmt.Errorf("--degrees: the operator set has no degree parameters; --degrees applies to sets with parallel operators (--ops parallel)")
		}
		return reg, nil, nil
	}
	ds, err := rules.ParseDegrees(degrees)
	if err != nil {
		return nil, nil, fmt.Errorf("--degrees: %w", err)
	}
	return reg, ds, nil
}
