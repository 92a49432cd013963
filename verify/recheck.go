package verify

import (
	"context"
	"errors"
	"fmt"

	"rulebook/fingerprint"
	"rulebook/rules"
)

// ErrNotTrue is matched (errors.Is) by Recheck's error for a rule that is
// false at the shapes it records.
var ErrNotTrue = errors.New("the rule is false")

// recheckDraws is how many float draws Recheck evaluates per rule: the
// uniform draws and the first one-signed ones, enough for relu-like rules
// (fingerprint.Draw).
const recheckDraws = 20

// Recheck evaluates every rule of a loaded rule set on float64 draws at
// the shapes it records, by the evaluator rather than the prover, so that
// a version or bundle whose rules were changed after release, and whose
// content hash was recomputed to match, is refused before a model is
// rewritten with them. A hash only shows that nobody changed the rules
// since whoever wrote the hash; this shows that each one holds. It costs
// milliseconds per rule (docs/design.md); texts name the rules in the
// error.
func Recheck(ctx context.Context, rs []*rules.Rule, texts []string) error {
	in := fingerprint.Inputs{Seed: 0x5eed}
	for i, r := range rs {
		for _, at := range atDegrees(r) {
			if FloatTestable(at.rule) != nil {
				continue
			}
			for d := range recheckDraws {
				if err := ctx.Err(); err != nil {
					return err
				}
				if why, found := differs(at.rule, in, fingerprint.Draw(d)); found {
					return fmt.Errorf("rule %d, %s: %w at %s%s: %s", i+1, texts[i], ErrNotTrue, at.prefix, shapeList(at.rule.InputShapes), why)
				}
			}
		}
	}
	return nil
}
