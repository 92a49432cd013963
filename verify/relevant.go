package verify

import (
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"rulebook/axioms"
	"rulebook/rules"
)

// Which axioms Z3 gets for a rule. The parallel operators (rules.SetParallel)
// appear in no rule of the default set, and an axiom about them can take
// part in a proof only if its parallel operators can meet the rule's terms.
// Leaving the others out keeps every proof of the default set exactly as it
// was before the parallel axioms existed (the same assertions, parsed in
// the same order, with the same declarations), and spares a parallel rule
// the axioms it cannot use.

// DegreeVarName is the Z3 Int constant that stands for a rule's degree
// variable d; the goal asserts d ≥ 1, so a proof holds for every degree.
const DegreeVarName = "d"

// parallelOpSymbols is the set of the parallel operators' Z3 symbols.
func parallelOpSymbols() map[string]bool {
	out := map[string]bool{}
	for _, op := range rules.All().Ops() {
		if op.Set == rules.SetParallel {
			for _, sym := range op.Z3 {
				out[sym] = true
			}
		}
	}
	return out
}

// imageOpSymbols is the set of the Z3 symbols of the operators on NCHW
// images and their kernels (result rank 4): conv2d, the pools, enlarge and
// the kernel constants.
func imageOpSymbols() map[string]bool {
	out := map[string]bool{}
	for _, op := range rules.All().Ops() {
		if op.Ranks.Result == 4 {
			for _, sym := range op.Z3 {
				out[sym] = true
			}
		}
	}
	return out
}

// symbolsIn adds to out the symbols of set (the parallel operators', or
// the image operators') that t applies.
func symbolsIn(t *axioms.Term, set, out map[string]bool) map[string]bool {
	if out == nil {
		out = map[string]bool{}
	}
	if !t.IsVar && set[t.Sym] {
		out[t.Sym] = true
	}
	for _, a := range t.Args {
		symbolsIn(a, set, out)
	}
	return out
}

// ruleParallelSymbols lists the Z3 symbols of the parallel operators a rule
// applies.
func ruleParallelSymbols(r *rules.Rule) map[string]bool {
	out := map[string]bool{}
	for _, g := range []*rules.Graph{&r.Src, &r.Dst} {
		for _, n := range g.Nodes {
			if n.Op.Set == rules.SetParallel {
				for _, sym := range n.Op.Z3 {
					out[sym] = true
				}
			}
		}
	}
	return out
}

// RelevantAxioms lists, in the set's order, the axioms Z3 gets for a rule
// whose terms apply the parallel operators in present: those that can take
// part in E-matching. An axiom fires on a term that matches one of its
// patterns, and a pattern is a sub-term of the axiom that holds every
// variable the axiom quantifies; so the axiom can fire once the parallel
// operators of one such sub-term can occur, and firing brings in the
// parallel operators of its other terms. An operator can occur when the
// rule applies it or an axiom that can fire brings it in. Every axiom
// without parallel operators can fire.
func RelevantAxioms(set *axioms.Set, present map[string]bool) []*axioms.Axiom {
	can := map[string]bool{}
	for s := range present {
		can[s] = true
	}
	dims := dimensionKeys{}
	for k := range present {
		dims.addKey(k)
	}
	within := func(syms map[string]bool) bool {
		for s := range syms {
			if !can[s] && !dims.can(s) {
				return false
			}
		}
		return true
	}
	par, img := parallelOpSymbols(), imageOpSymbols()
	// The image operators a term can apply: the rule's (present names one
	// with parameters "sym@N", attention's without as "sym"), and those an
	// axiom that can fire on them brings in.
	canImg := map[string]bool{}
	for k := range present {
		if sym, _, _ := strings.Cut(k, "@"); img[sym] {
			canImg[sym] = true
		}
	}
	imageWithin := func(syms map[string]bool) bool {
		for s := range syms {
			if !canImg[s] {
				return false
			}
		}
		return true
	}
	syms := make([]axiomSymbols, len(set.Axioms))
	for i, a := range set.Axioms {
		syms[i].all = symbolsIn(a.RHS, par, symbolsIn(a.LHS, par, nil))
		syms[i].allImage = symbolsIn(a.RHS, img, symbolsIn(a.LHS, img, nil))
		syms[i].parallel = filepath.Base(a.File) == parallelFile
		for _, t := range possiblePatterns(a) {
			pattern := symbolsIn(t, par, nil)
			if syms[i].parallel {
				literalDimensions(t, par, pattern)
			}
			syms[i].patterns = append(syms[i].patterns, pattern)
			syms[i].images = append(syms[i].images, symbolsIn(t, img, nil))
		}
	}
	// A parallel axiom about convolutions or pools fires only where one
	// can occur: partition(relu(x)) never meets conv2d's batch cut, nor
	// batchnorm's channel cut, whose pattern (partition 1 d x) holds no
	// image operator. The other files' axioms are given whole, as before,
	// but bring in image operators only where their patterns can match.
	someImage := func(syms map[string]bool) bool {
		for s := range syms {
			if canImg[s] {
				return true
			}
		}
		return len(syms) == 0
	}
	fires, imaging := make([]bool, len(set.Axioms)), make([]bool, len(set.Axioms))
	for grew := true; grew; {
		grew = false
		for i, a := range syms {
			if !fires[i] && a.canMatch(within, imageWithin, someImage) {
				fires[i], grew = true, true
				for s := range a.all {
					can[s] = true
				}
				dims.bringIn(set.Axioms[i].LHS, par)
				dims.bringIn(set.Axioms[i].RHS, par)
			}
			if fires[i] && !imaging[i] && slices.ContainsFunc(a.images, imageWithin) {
				imaging[i], grew = true, true
				for s := range a.allImage {
					canImg[s] = true
				}
			}
		}
	}
	var out []*axioms.Axiom
	for i, a := range set.Axioms {
		if fires[i] {
			out = append(out, a)
		}
	}
	return out
}

// axiomSymbols are the operators of an axiom that decide whether it can
// fire.
type axiomSymbols struct {
	patterns []map[string]bool // parallel operators of each possible pattern
	images   []map[string]bool // and its image operators
	all      map[string]bool
	allImage map[string]bool
	parallel bool // in parallel.smt2
}

// canMatch reports whether one of the axiom's patterns can match: its
// parallel operators can occur, and for a parallel axiom its image
// operators too, and one of the image operators the axiom applies
// anywhere.
func (a axiomSymbols) canMatch(parallel, image, someImage func(map[string]bool) bool) bool {
	if a.parallel && !someImage(a.allImage) {
		return false
	}
	for j, p := range a.patterns {
		if parallel(p) && (!a.parallel || image(a.images[j])) {
			return true
		}
	}
	return false
}

// possiblePatterns lists the applications in an axiom's sides that hold
// every variable it quantifies: the terms Z3 may choose as its pattern.
func possiblePatterns(a *axioms.Axiom) []*axioms.Term {
	var out []*axioms.Term
	var walk func(t *axioms.Term) map[string]bool
	walk = func(t *axioms.Term) map[string]bool {
		vars := map[string]bool{}
		if t.IsVar {
			vars[t.Sym] = true
			return vars
		}
		for _, arg := range t.Args {
			for v := range walk(arg) {
				vars[v] = true
			}
		}
		if len(t.Args) > 0 && len(vars) == len(a.Vars) {
			out = append(out, t)
		}
		return vars
	}
	walk(a.LHS)
	walk(a.RHS)
	return out
}

// ConditionalAxioms names the axioms that hold only under a layout
// condition (axioms.Axiom.Conditional): Z3 gets them without it, so a
// proof that uses one is tested at other layouts before it stands.
func ConditionalAxioms(set *axioms.Set) map[string]bool {
	out := map[string]bool{}
	for _, a := range set.Axioms {
		if a.Conditional() {
			out[a.Name] = true
		}
	}
	return out
}

// parallelFile is the axiom file of the parallel operator set. Its axioms
// are filtered by the literal dimensions their patterns apply too (see
// dimensionKeys); the default set's files are given whole, as before.
const parallelFile = "parallel.smt2"

// literalDimensions adds to out a key "sym@N" for each application in t of
// an operator outside par whose first operand is the literal N: such a
// pattern can match only a term that applies sym at dimension N.
func literalDimensions(t *axioms.Term, par, out map[string]bool) {
	if !t.IsVar && !par[t.Sym] && len(t.Args) > 0 && t.Args[0].IsInt {
		out[dimensionKey(t.Sym, t.Args[0].Int)] = true
	}
	for _, a := range t.Args {
		literalDimensions(a, par, out)
	}
}

func dimensionKey(sym string, n int) string { return sym + "@" + strconv.Itoa(n) }

// dimensionKeys tracks which operators can be applied at which literal
// first operand: those the rule applies, those a firing axiom writes, and,
// for an axiom that writes an operator at a variable first operand, that
// operator at every literal that can occur (E-matching binds the variable
// to a value some term already holds).
type dimensionKeys struct {
	applied  map[string]bool // "sym@N"
	literals map[int]bool
	anyAt    map[string]bool // operators written at a variable operand
}

func (k *dimensionKeys) addKey(key string) {
	sym, n, ok := strings.Cut(key, "@")
	if !ok {
		return
	}
	v, err := strconv.Atoi(n)
	if err != nil {
		return
	}
	k.add(sym, v)
}

func (k *dimensionKeys) add(sym string, n int) {
	if k.applied == nil {
		k.applied, k.literals, k.anyAt = map[string]bool{}, map[int]bool{}, map[string]bool{}
	}
	k.applied[dimensionKey(sym, n)] = true
	k.literals[n] = true
}

// bringIn records the applications an axiom that fires writes.
func (k *dimensionKeys) bringIn(t *axioms.Term, par map[string]bool) {
	if t.IsVar {
		return
	}
	if k.applied == nil {
		k.applied, k.literals, k.anyAt = map[string]bool{}, map[int]bool{}, map[string]bool{}
	}
	if len(t.Args) > 0 && t.Args[0].IsInt {
		k.add(t.Sym, t.Args[0].Int)
	} else if len(t.Args) > 0 && t.Args[0].IsVar && !par[t.Sym] {
		k.anyAt[t.Sym] = true
	}
	for _, a := range t.Args {
		k.bringIn(a, par)
	}
}

// can reports whether the key "sym@N" can occur.
func (k *dimensionKeys) can(key string) bool {
	sym, n, ok := strings.Cut(key, "@")
	if !ok {
		return false
	}
	v, err := strconv.Atoi(n)
	return err == nil && (k.applied[key] || k.anyAt[sym] && k.literals[v])
}

// ruleDimensionKeys lists "sym@N" for each node of r whose first parameter
// is N, for RelevantAxioms' present set.
func ruleDimensionKeys(r *rules.Rule, out map[string]bool) map[string]bool {
	for _, g := range []*rules.Graph{&r.Src, &r.Dst} {
		for _, n := range g.Nodes {
			if first, ok := firstParam(n.Params); ok && n.Op.Set != rules.SetParallel && len(n.Op.Z3) > 0 {
				out[dimensionKey(n.Op.Z3[0], first)] = true
			}
		}
	}
	return out
}

// firstParam is a node's first parameter, the first argument of its Z3
// term, which literalDimensions reads in axioms.
func firstParam(p []int) (int, bool) {
	if len(p) == 0 {
		return 0, false
	}
	return p[0], true
}
