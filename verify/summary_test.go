package verify

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"rulebook/axioms"
	"rulebook/rules"
)

// verify lists the first ShownUnproved rules of each status not proved
// and counts the rest (issue 25: it printed every unknown rule).
func TestSummaryListsFewUnproved(t *testing.T) {
	s := &Summary{Rules: 40, Counts: map[rules.Status]int{Unknown: 25, Refuted: 2, Proved: 13}}
	for i := 25; i > 0; i-- {
		s.Unproved = append(s.Unproved, Unproved{ID: int64(100 + i), Status: Unknown, Reason: "budget", Rule: fmt.Sprintf("rule %d", i)})
	}
	s.Unproved = append(s.Unproved, Unproved{ID: 7, Status: Refuted, Rule: "false 1"}, Unproved{ID: 3, Status: Refuted, Rule: "false 2"})
	var out strings.Builder
	s.WriteText(&out, &axioms.Set{Hash: "h", Dir: "axioms"}, time.Second)
	text := out.String()
	listed := strings.Count(text, "budget")
	if listed != ShownUnproved || !strings.Contains(text, "… and 15 more unknown: rulebook list --status unknown") ||
		!strings.Contains(text, "false 1") || !strings.Contains(text, "false 2") || strings.Contains(text, "more refuted") {
		t.Errorf("%d unknown rules listed, want %d and a count of the rest, and both refuted:\n%s", listed, ShownUnproved, text)
	}
	if !strings.Contains(text, "   101  unknown") || strings.Contains(text, "   111  unknown") {
		t.Errorf("the first unknown rules by id are not the ones listed:\n%s", text)
	}
}
