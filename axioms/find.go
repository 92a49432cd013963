package axioms

import (
	"path/filepath"

	"rulebook/rules"
)

// Find reads the axiom folder dir. Without one it reads ./axioms if
// that folder has axiom files, as in the repository, else the set compiled
// into rulebook, so that the default works anywhere.
func Find(dir string, reg *rules.Registry) (*Set, error) {
	if dir != "" {
		return Load(dir, reg)
	}
	if local, _ := filepath.Glob(filepath.Join("axioms", "*.smt2")); len(local) > 0 {
		return Load("axioms", reg)
	}
	return Builtin(reg)
}
