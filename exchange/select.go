package exchange

import (
	"fmt"
	"slices"
	"strings"

	"rulebook/rules"
	"rulebook/store"
)

// Selection picks some rules of a version to export. The zero Selection
// picks them all.
type Selection struct {
	// IDs keeps the rules with these store ids, in this order; empty keeps
	// every rule, in the version's order.
	IDs []int64
	// Ops keeps the rules that use every one of these operators (on either
	// side).
	Ops []string
	// Degree is the degree flexflow-json writes parallel rules at, and
	// keeps those valid at (WriteFlexFlowAt); 0 means rules.BaseDegree.
	// It picks nothing in the other formats, which write d as d.
	Degree int
}

// CheckDegree refuses a Degree below 2 or above rules.MaxDegree, or one
// given (given: the flag was set) for a format that writes d as d.
func (s Selection) CheckDegree(format string, given bool) error {
	if !given {
		return nil
	}
	if format != "flexflow-json" {
		return fmt.Errorf("--degree applies to --format flexflow-json only (the other formats write the degree variable d as d)")
	}
	if s.Degree < 2 || s.Degree > rules.MaxDegree {
		return fmt.Errorf("--degree %d: expected an integer from 2 to %d (degree 1 is the identity)", s.Degree, rules.MaxDegree)
	}
	return nil
}

// All reports whether s picks the whole version.
func (s Selection) All() bool { return len(s.IDs) == 0 && len(s.Ops) == 0 }

// String describes s as the export command's flags would ("--id 12,53
// --op conv2d").
func (s Selection) String() string {
	var parts []string
	if len(s.IDs) > 0 {
		ids := make([]string, len(s.IDs))
		for i, id := range s.IDs {
			ids[i] = fmt.Sprint(id)
		}
		parts = append(parts, "--id "+strings.Join(ids, ","))
	}
	if len(s.Ops) > 0 {
		parts = append(parts, "--op "+strings.Join(s.Ops, ","))
	}
	return strings.Join(parts, " ")
}

// Check says which id of s is not a rule id, or which operator reg does
// not know.
func (s Selection) Check(reg *rules.Registry) error {
	for _, id := range s.IDs {
		if id < 1 {
			return fmt.Errorf("--id must be positive rule ids, got %d", id)
		}
	}
	for _, op := range s.Ops {
		if _, ok := reg.Lookup(op); !ok {
			return fmt.Errorf("--op: unknown operator %q (known: %s)", op, strings.Join(reg.Names(), ","))
		}
	}
	return nil
}

// Pick returns the rules of version v (its rules rs) that s selects, or
// says which id is not in v or that no rule is left.
func (s Selection) Pick(v store.Version, rs []store.Rule) ([]store.Rule, error) {
	picked := rs
	if len(s.IDs) > 0 {
		byID := make(map[int64]store.Rule, len(rs))
		for _, r := range rs {
			byID[r.ID] = r
		}
		picked = nil
		seen := map[int64]bool{}
		for _, id := range s.IDs {
			r, ok := byID[id]
			if !ok {
				return nil, fmt.Errorf("--id %d: version %s has no rule %d (pruned, not proved or not there: see 'rulebook show %d')", id, v.Tag, id, id)
			}
			if !seen[id] {
				seen[id] = true
				picked = append(picked, r)
			}
		}
	}
	var out []store.Rule
	for _, r := range picked {
		if usesAll(r, s.Ops) {
			out = append(out, r)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no rule of version %s is selected by %s", v.Tag, s)
	}
	return out, nil
}

func usesAll(r store.Rule, ops []string) bool {
	for _, op := range ops {
		if !slices.Contains(r.Operators, op) {
			return false
		}
	}
	return true
}
