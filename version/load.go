package version

import (
	"context"
	"fmt"
	"os"
	"strings"

	"rulebook/exchange"
	"rulebook/internal/infile"
	"rulebook/rules"
	"rulebook/store"
)

// ErrTampered reports a version whose rules no longer hash to the content
// hash it was released with.
var ErrTampered = store.ErrTampered

// Registry is the operator set stored rules are read with: every operator
// the store may hold, the parallel ones included.
func Registry() *rules.Registry { return rules.All() }

// Set is one released version of the rules, hash-checked.
type Set struct {
	// Name is how the version was named when loaded: its tag, FILE:TAG
	// for another database, or "FILE (tag)" for a bundle.
	Name  string
	Tag   string // the tag it was released as
	Hash  string // SHA-256 over the sorted canonical texts (store.ContentHash)
	Rules []*rules.Rule
	Texts []string // canonical "SRC => DST", parallel to Rules
	// RuleHashes are the rules' content hashes (rules.Text.Hash), the same
	// from a bundle as from the store. IDs are the store's rule ids, nil
	// for a bundle.
	RuleHashes []string
	IDs        []int64
}

// Load loads a released version by tag or hash prefix. The store
// re-checks its content hash.
func Load(ctx context.Context, db *store.Store, ref string) (*Set, error) {
	v, stored, err := db.VersionRules(ctx, ref)
	if err != nil {
		return nil, err
	}
	in := make([]rules.Text, len(stored))
	ids := make([]int64, len(stored))
	for i, r := range stored {
		in[i], ids[i] = r.Text, r.ID
	}
	s, err := newSet(fmt.Sprintf("version %s", v.Tag), v.Tag, v.Hash, in)
	if s != nil {
		s.Name, s.IDs = v.Tag, ids
	}
	return s, err
}

// IsBundle tells a bundle file from a tag or hash prefix: it ends in
// .json and exists.
func IsBundle(ref string) bool {
	if !strings.HasSuffix(ref, ".json") {
		return false
	}
	_, err := os.Stat(ref)
	return err == nil
}

// LoadBundle reads a version exported with 'rulebook export --format json'.
// It checks that the rules hash to the hash the file records, so that no
// database is needed and a bundle edited by hand is refused.
func LoadBundle(path string) (*Set, error) {
	data, err := infile.ReadFile(path, infile.Bundle)
	if err != nil {
		return nil, err
	}
	h, in, err := exchange.ReadJSON(path, data)
	if err != nil {
		return nil, err
	}
	if h.Hash == "" {
		return nil, fmt.Errorf("%s: the bundle records no content hash; export a released version with 'rulebook export --version TAG --format json'", path)
	}
	s, err := newSet(path, h.Version, h.Hash, in)
	if s != nil {
		s.Name = fmt.Sprintf("%s (%s)", path, s.Tag)
	}
	return s, err
}

// newSet checks the texts read from source and their content hash.
func newSet(source, tag, hash string, in []rules.Text) (*Set, error) {
	reg := Registry()
	s := &Set{Tag: tag, Hash: hash}
	for i, r := range in {
		checked, err := r.Checked(reg)
		if err != nil {
			return nil, fmt.Errorf("%s: rule %d: %w", source, i+1, err)
		}
		parsed, text := checked.Rule().Oriented()
		s.Rules = append(s.Rules, parsed)
		s.Texts = append(s.Texts, text.String())
		s.RuleHashes = append(s.RuleHashes, text.Hash())
	}
	if got := store.ContentHash(s.Texts); got != hash {
		return nil, fmt.Errorf("%s: its %d rules hash to %.12s…, but it records %.12s…: %w", source, len(s.Texts), got, hash, ErrTampered)
	}
	return s, nil
}
