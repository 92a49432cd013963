package store

import (
	"slices"
	"strings"
)

// Comments maps each axiom of the set to its comment, as the set's text
// records them: one axiom a line, name, comment and formula.
func (a AxiomSet) Comments() map[string]string {
	comments := map[string]string{}
	for _, line := range strings.Split(a.Text, "\n") {
		if f := strings.SplitN(line, "\t", 3); len(f) == 3 {
			comments[f[0]] = f[1]
		}
	}
	return comments
}

// DiffTexts lists the rule texts that version to adds to version from and
// those it removes; both lists are sorted, as LoadVersion returns them.
func DiffTexts(from, to []string) (added, removed []string) {
	return missingFrom(to, from), missingFrom(from, to)
}

// missingFrom lists the texts of a that b lacks.
func missingFrom(a, b []string) []string {
	var out []string
	for _, x := range a {
		if _, found := slices.BinarySearch(b, x); !found {
			out = append(out, x)
		}
	}
	return out
}
