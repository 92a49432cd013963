// Package english writes counts as English words for the tool's reports,
// such as "1 rule" and "2 rules". docs/design.md's package map lists it.
package english

import "fmt"

// Nouns counts n of a noun, "1 rule", "2 rules"; with a plural form,
// "1 is", "2 are".
func Nouns(n int, noun string, plural ...string) string {
	switch {
	case n == 1:
		return fmt.Sprintf("%d %s", n, noun)
	case len(plural) > 0:
		return fmt.Sprintf("%d %s", n, plural[0])
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
