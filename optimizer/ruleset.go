package optimizer

// This file loads the version of the rules an optimization uses, from the
// store or from an exported bundle, and refuses one whose rules do not
// match its hash.

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

// ErrTampered reports a rule set whose rules no longer hash to the content
// hash it was released with.
var ErrTampered = store.ErrTampered

// RuleSet is one released version of the rules, hash-checked.
type RuleSet struct {
	Version string // the tag it was released as
	Hash    string // SHA-256 over the sorted canonical texts (store.ContentHash)
	Rules   []*rules.Rule
	Texts   []string // canonical "SRC => DST", parallel to Rules
	// RuleHashes are the rules' content hashes (rules.Text.Hash), the same
	// from a bundle as from the store; IDs are the store's rule ids, nil
	// for a bundle.
	RuleHashes []string
	IDs        []int64
}

// LoadVersion loads a released version by tag or hash prefix; the store
// re-checks its content hash.
func LoadVersion(ctx context.Context, db *store.Store, ref string) (*RuleSet, error) {
	v, stored, err := db.VersionRules(ctx, ref)
	if err != nil {
		return nil, err
	}
	in := make([]rules.Text, len(stored))
	ids := make([]int64, len(stored))
	for i, r := range stored {
		in[i], ids[i] = r.Text, r.ID
	}
	rs, err := newRuleSet(fmt.Sprintf("version %s", v.Tag), v.Tag, v.Hash, in)
	if rs != nil {
		rs.IDs = ids
	}
	return rs, err
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

// LoadBundle reads a version exported with 'rulebook export --format json'
// and checks that its rules hash to the hash the file records, so that no
// database is needed and a bundle edited by hand is refused.
func LoadBundle(path string) (*RuleSet, error) {
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
	return newRuleSet(path, h.Version, h.Hash, in)
}

// newRuleSet checks the texts read from source (as plain fields) and their
// content hash.
func newRuleSet(source, tag, hash string, in []rules.Text) (*RuleSet, error) {
	reg := rules.Default()
	rs := &RuleSet{Version: tag, Hash: hash}
	for i, r := range in {
		checked, err := r.Checked(reg)
		if err != nil {
			return nil, fmt.Errorf("%s: rule %d: %w", source, i+1, err)
		}
		parsed, text := checked.Rule().Oriented()
		rs.Rules = append(rs.Rules, parsed)
		rs.Texts = append(rs.Texts, text.String())
		rs.RuleHashes = append(rs.RuleHashes, text.Hash())
	}
	if got := store.ContentHash(rs.Texts); got != hash {
		return nil, fmt.Errorf("%s: its %d rules hash to %.12s…, but it records %.12s…: %w", source, len(rs.Texts), got, hash, ErrTampered)
	}
	return rs, nil
}
