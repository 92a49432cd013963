// Package safetext prints names that come from input files (a FlexFlow
// rule's name, a machine file's name, an ONNX model's operator and output
// names) so that they cannot drive the terminal: a name with control
// characters (ESC, \r, …) or invalid UTF-8 is shown quoted, with those
// characters escaped, and any other name as it is.
package safetext

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Name is s as it is when every character prints, else s quoted with Go's
// escapes (strconv.Quote): "\x1b[31m" stays visible as text.
func Name(s string) string {
	if !utf8.ValidString(s) {
		return strconv.Quote(s)
	}
	for _, r := range s {
		if !unicode.IsPrint(r) {
			return strconv.Quote(s)
		}
	}
	return s
}

// Message is a message for the terminal (an error, say) with every control
// character but newline and tab, and every byte of invalid UTF-8, written
// as a Go escape: paths and names a user or a file supplied may sit
// anywhere in it.
func Message(s string) string {
	var b strings.Builder
	for i, r := range s {
		switch {
		case r == utf8.RuneError && !strings.HasPrefix(s[i:], "\uFFFD"):
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == '\n' || r == '\t' || unicode.IsPrint(r) || r == ' ':
			b.WriteRune(r)
		default:
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
		}
	}
	return b.String()
}
