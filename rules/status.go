package rules

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
