package rules

import (
	"fmt"
	"strings"
)

// Status is where a rule stands: found and checked on concrete inputs
// (candidate), then proved from the axioms, refuted by a counterexample, or
// neither within the solver's limits (unknown). The values are the ones the
// store keeps in its status columns.
type Status string

// Rule statuses.
const (
	StatusCandidate Status = "candidate"
	StatusProved    Status = "proved"
	StatusRefuted   Status = "refuted"
	StatusUnknown   Status = "unknown"
)

// Statuses lists the rule statuses in the order a rule passes them.
func Statuses() []Status {
	return []Status{StatusCandidate, StatusProved, StatusRefuted, StatusUnknown}
}

// CheckStatus reports a status that is none of Statuses.
func CheckStatus(s Status) error {
	var names []string
	for _, known := range Statuses() {
		if s == known {
			return nil
		}
		names = append(names, string(known))
	}
	return fmt.Errorf("unknown status %q (known: %s)", s, strings.Join(names, ", "))
}
