package compare

// This file compares two released versions of our own rules, wherever
// each is kept: in the database at hand, in another database, or in a
// bundle exported with 'rulebook export --format json'.

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"rulebook/internal/english"
	"rulebook/optimizer"
	"rulebook/store"
)

// Version is a released version of our rules, hash-checked, with the name
// a comparison gives it.
type Version struct {
	Name string
	*optimizer.RuleSet
}

// LoadVersion loads the version ref names, re-checking its content hash:
// an exported bundle (a .json file, named "v1.json (v1)"), FILE:TAG for a
// version of another database (named "FILE:v1"; tags hold no ':'), or a tag
// or hash prefix of the database at dbPath (named by its tag).
func LoadVersion(ctx context.Context, dbPath, ref string) (Version, error) {
	if optimizer.IsBundle(ref) {
		rs, err := optimizer.LoadBundle(ref)
		if err != nil {
			return Version{}, err
		}
		return Version{fmt.Sprintf("%s (%s)", ref, rs.Version), rs}, nil
	}
	if strings.HasSuffix(ref, ".json") {
		return Version{}, fmt.Errorf("%s: no such bundle file", ref)
	}
	prefix := ""
	if i := strings.LastIndex(ref, ":"); i > 0 {
		dbPath, ref, prefix = ref[:i], ref[i+1:], ref[:i+1]
		if _, err := os.Stat(dbPath); err != nil {
			return Version{}, fmt.Errorf("%s: no such database (in FILE:TAG, FILE is a rulebook database)", dbPath)
		}
	}
	db, err := store.OpenExisting(ctx, dbPath)
	if err != nil {
		return Version{}, err
	}
	defer db.Close()
	rs, err := optimizer.LoadVersion(ctx, db, ref)
	if err != nil && prefix != "" {
		return Version{}, fmt.Errorf("%s: %w", dbPath, err)
	}
	if err != nil {
		return Version{}, err
	}
	return Version{prefix + rs.Version, rs}, nil
}

// VersionDiff is what version B adds to version A and removes from it, as
// canonical rule texts.
type VersionDiff struct {
	A, B           Version
	Added, Removed []string
}

// DiffVersions compares two versions.
func DiffVersions(a, b Version) VersionDiff {
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
