// Package safetext prints names that come from input files so that they
// cannot drive the terminal. Such names are a FlexFlow rule's, a machine
// file's, and an ONNX model's operator and output names. A name with control
// characters (ESC, \r, …) or invalid UTF-8 is shown quoted, with those
// characters escaped. Any other name is shown as it is.
// docs/design.md's package map lists it.
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
