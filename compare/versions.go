package compare

// This file compares two released versions of our own rules, wherever
// each is kept (version.Open): in the database at hand, in another
// database, or in a bundle exported with 'rulebook export --format json'.

import (
	"fmt"
	"io"
	"slices"

	"rulebook/internal/english"
	"rulebook/store"
	"rulebook/version"
)

// VersionDiff is what version B adds to version A and removes from it, as
// canonical rule texts.
type VersionDiff struct {
	A, B           *version.Set
	Added, Removed []string
}

// DiffVersions compares two versions.
func DiffVersions(a, b *version.Set) VersionDiff {
	added, removed := store.DiffTexts(slices.Sorted(slices.Values(a.Texts)), slices.Sorted(slices.Values(b.Texts)))
	return VersionDiff{A: a, B: b, Added: added, Removed: removed}
}

// WriteText prints the difference as 'rulebook diff' does: a summary line,
// then each added rule after "+ " and each removed one after "- ".
func (d VersionDiff) WriteText(w io.Writer) {
	fmt.Fprintf(w, "%s (%.12s, %s) -> %s (%.12s, %s): %d added, %d removed\n",
		d.A.Name, d.A.Hash, english.Nouns(len(d.A.Texts), "rule"), d.B.Name, d.B.Hash, english.Nouns(len(d.B.Texts), "rule"), len(d.Added), len(d.Removed))
	for _, r := range d.Added {
		fmt.Fprintln(w, "+ "+r)
	}
	for _, r := range d.Removed {
		fmt.Fprintln(w, "- "+r)
	}
}
