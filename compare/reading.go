package compare

import (
	"context"
	"fmt"
	"io"
	"runtime"

	"rulebook/exchange"
	"rulebook/internal/pool"
	"rulebook/internal/safetext"
	"rulebook/rewrite"
	"rulebook/rules"
)

// FlexFlow's rules under its own reading (rules.FlexFlowReading): its
// replicate and reduce act on the dimension they name, concatenating
// copies along it and adding its slices. FlexFlow's file is judged under
// that reading as well as ours, rule by rule, so that what is false in
// ours only because our operators mean something else is told apart from
// what is false in both (docs/parallel.md).

// Reading is a rule's verdict under one reading of its operators.
type Reading string

const (
	ReadingTrue     Reading = "true"
	ReadingValue    Reading = "false in value"
	ReadingLayout   Reading = "false in layout only"
	ReadingTarget   Reading = "target ill-laid-out"
	ReadingUnbound  Reading = "unbound inputs"
	ReadingDegree2  Reading = "true at degree 2 only"
	ReadingNever    Reading = "never applies"
	ReadingTrivial  Reading = "trivial"
	readingNotFound Reading = "not read"
)

// Readings lists the verdicts in the order reports give them.
func Readings() []Reading {
	return []Reading{ReadingTrue, ReadingDegree2, ReadingValue, ReadingLayout, ReadingTarget, ReadingUnbound, ReadingNever, ReadingTrivial}
}

// ReadingResult is one rule of FlexFlow's file under FlexFlow's reading,
// beside its verdict under ours.
type ReadingResult struct {
	Name           string
	Theirs, Ours   Reading
	Counterexample string // where it fails under FlexFlow's reading
	// Reached says that our version contains or implies the rule.
	Reached bool
}

// mismatchReading names a sweep's failure.
func mismatchReading(m rules.Mismatch) Reading {
	switch m {
	case rules.LayoutDiffers:
		return ReadingLayout
	case rules.TargetIllLaidOut:
		return ReadingTarget
	}
	return ReadingValue
}

// OurReading is a verdict of Compare as a Reading.
func OurReading(v Verdict) Reading {
	switch {
	case v.Relation == Trivial:
		return ReadingTrivial
	case len(v.Free) > 0:
		return ReadingUnbound
	case v.Relation == Falsified:
		return mismatchReading(v.Kind)
	case v.Relation == DegreeTwoOnly:
		return ReadingDegree2
	case v.Relation == Missed && v.Why.Cause == NeverApplies:
		return ReadingNever
	}
	return ReadingTrue
}

// JudgeReading judges one rule read with FlexFlow's reading: trivial,
// reading inputs its source never binds, never applying, or swept at every
// combined cut of its inputs at degrees 2, 3 and 4 (judge).
func JudgeReading(ctx context.Context, r *rules.Rule) (Reading, string, error) {
	switch {
	case rewrite.Key(&r.Src) == rewrite.Key(&r.Dst):
		return ReadingTrivial, "", nil
	case len(FreeInputs(r)) > 0:
		return ReadingUnbound, "", nil
	}
	j, err := judge(ctx, r, true)
	switch {
	case err != nil:
		return "", "", err
	case j.Vacuous:
		return ReadingNever, j.Counterexample, nil
	case j.Relation == Falsified:
		return mismatchReading(j.Kind), j.Counterexample, nil
	case j.Relation == DegreeTwoOnly:
		return ReadingDegree2, j.Counterexample, nil
	}
	return ReadingTrue, "", nil
}

// FlexFlowReading reads FlexFlow's file at path again under FlexFlow's
// reading and judges each rule, beside the verdicts vs Compare gave it
// under ours (matched by name). The rules are judged on GOMAXPROCS
// goroutines: each is a sweep of its own, as long as Compare's.
func FlexFlowReading(ctx context.Context, path string, vs []Verdict) ([]ReadingResult, error) {
	f, _, err := exchange.ReadFileContext(ctx, path, "flexflow-json", rules.FlexFlowReading())
	if err != nil {
		return nil, err
	}
	byName := map[string]Verdict{}
	for _, v := range vs {
		byName[v.Name] = v
	}
	out := make([]ReadingResult, len(f.Rules))
	err = pool.Each(ctx, runtime.GOMAXPROCS(0), len(f.Rules), func(_, i int) error {
		n := f.Rules[i]
		res := ReadingResult{Name: n.Name, Ours: readingNotFound}
		if v, ok := byName[n.Name]; ok {
			res.Ours, res.Reached = OurReading(v), v.Relation == Contained || v.Relation == Implied
		}
		var err error
		if res.Theirs, res.Counterexample, err = JudgeReading(ctx, n.Rule); err != nil {
			return fmt.Errorf("%s: %w", n.Name, err)
		}
		out[i] = res
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// WriteReadings prints how many rules each reading finds true, false and
// so on, the rules true under FlexFlow's reading that ours reaches, and
// one example of each verdict.
func WriteReadings(w io.Writer, rs []ReadingResult) {
	theirs, ours, both, reached := map[Reading]int{}, map[Reading]int{}, 0, 0
	example := map[Reading]ReadingResult{}
	for _, r := range rs {
		theirs[r.Theirs]++
		ours[r.Ours]++
		if _, ok := example[r.Theirs]; !ok {
			example[r.Theirs] = r
		}
		if r.Theirs == ReadingTrue && r.Ours == ReadingTrue {
			both++
			if r.Reached {
				reached++
			}
		}
	}
	fmt.Fprintf(w, "  FlexFlow's own reading (replicate and reduce on the dimension they name), against ours:\n")
	for _, k := range Readings() {
		fmt.Fprintf(w, "    %-22s %4d  (ours %d)\n", k, theirs[k], ours[k])
	}
	fmt.Fprintf(w, "    true under both: %d, of which the version contains or implies %d\n", both, reached)
	for _, k := range Readings() {
		if e, ok := example[k]; ok && e.Counterexample != "" {
			fmt.Fprintf(w, "    e.g. %s, %s: %s\n", safetext.Name(e.Name), k, e.Counterexample)
		}
	}
}
