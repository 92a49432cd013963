package exchange

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
)

// Skip is a rule that a reader could not import or a writer could not
// write, and why.
type Skip struct{ Name, Reason string }

// unknownPrefix starts the reason of every rule skipped for unknown
// operators; GroupSkips counts those through Foreign.Unknown instead.
const unknownPrefix = "unknown operators "

// SkipGroup is a set of rules skipped for one reason.
type SkipGroup struct {
	Rules  int
	Reason string
	Names  []string // the rules, in order; nil for unknown operators
}

// GroupSkips groups skipped rules by reason, largest group first. Given
// the unknown-operator counts of a Foreign, the rules skipped for unknown
// operators form one group whose reason lists the operators with their
// occurrences, most frequent first ("unknown operators OP_LINEAR ×562,
// OP_REDUCE ×12").
func GroupSkips(skipped []Skip, unknown map[string]int) []SkipGroup {
	var groups []SkipGroup
	if len(unknown) > 0 {
		names := slices.Collect(maps.Keys(unknown))
		sort.Slice(names, func(i, j int) bool {
			a, b := names[i], names[j]
			return unknown[a] > unknown[b] || unknown[a] == unknown[b] && a < b
		})
		parts := make([]string, len(names))
		for i, n := range names {
			parts[i] = fmt.Sprintf("%s ×%d", n, unknown[n])
		}
		g := SkipGroup{Reason: unknownPrefix + strings.Join(parts, ", ")}
		for _, s := range skipped {
			if strings.HasPrefix(s.Reason, unknownPrefix) {
				g.Rules++
			}
		}
		groups = append(groups, g)
	}
	index := map[string]int{}
	for _, s := range skipped {
		if len(unknown) > 0 && strings.HasPrefix(s.Reason, unknownPrefix) {
			continue
		}
		i, ok := index[s.Reason]
		if !ok {
			i = len(groups)
			index[s.Reason] = i
			groups = append(groups, SkipGroup{Reason: s.Reason})
		}
		groups[i].Rules++
		groups[i].Names = append(groups[i].Names, s.Name)
	}
	sort.SliceStable(groups, func(i, j int) bool { return groups[i].Rules > groups[j].Rules })
	return groups
}

// SummarizeSkips describes skipped rules in a few lines, one per group of
// GroupSkips: "590 rules with unknown operators: OP_REPLICATE ×866, …",
// then "3 rules: REASON (rule 4, rule 9, rule 12, …)".
func SummarizeSkips(skipped []Skip, unknown map[string]int) []string {
	var lines []string
	for _, g := range GroupSkips(skipped, unknown) {
		if g.Names == nil {
			lines = append(lines, fmt.Sprintf("%d rules with %s", g.Rules, strings.Replace(g.Reason, unknownPrefix, "unknown operators: ", 1)))
			continue
		}
		shown := strings.Join(g.Names[:min(len(g.Names), 3)], ", ")
		if len(g.Names) > 3 {
			shown += ", …"
		}
		lines = append(lines, fmt.Sprintf("%d rules: %s (%s)", g.Rules, g.Reason, shown))
	}
	return lines
}
