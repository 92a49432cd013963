package version

import (
	"context"
	"fmt"
	"os"
	"strings"

	"rulebook/store"
)

// Open loads the version ref names, re-checking its content hash. A ref is
// an exported bundle (a .json file), FILE:TAG for a version of another
// database (tags hold no ':'), or a tag or hash prefix of the database at
// dbPath. No database is created.
func Open(ctx context.Context, dbPath, ref string) (*Set, error) {
	if IsBundle(ref) {
		return LoadBundle(ref)
	}
	if strings.HasSuffix(ref, ".json") {
		return nil, fmt.Errorf("%s: no such bundle file (a version tag or hash names no file)", ref)
	}
	prefix := ""
	if i := strings.LastIndex(ref, ":"); i > 0 {
		dbPath, ref, prefix = ref[:i], ref[i+1:], ref[:i+1]
		if _, err := os.Stat(dbPath); err != nil {
			return nil, fmt.Errorf("%s: no such database (in FILE:TAG, FILE is a rulebook database)", dbPath)
		}
	}
	db, err := store.OpenExisting(ctx, dbPath)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	s, err := Load(ctx, db, ref)
	if err != nil && prefix != "" {
		return nil, fmt.Errorf("%s: %w", dbPath, err)
	}
	if err != nil {
		return nil, err
	}
	s.Name = prefix + s.Tag
	return s, nil
}

// ParallelRules counts the rules that apply a parallel operator (Unity's
// partition, combine, replicate, reduce or FlexFlow's linear).
func (s *Set) ParallelRules() int {
	n := 0
	for _, r := range s.Rules {
		if r.UsesParallelOps() {
			n++
		}
	}
	return n
}

// Describe names the version in one line: tag, hash prefix and size.
func (s *Set) Describe() string {
	return fmt.Sprintf("%s (%.12s, %d rules)", s.Name, s.Hash, len(s.Rules))
}
