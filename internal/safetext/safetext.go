// Package safetext prints names that come from input files (a FlexFlow
// rule's name, a machine file's name, an ONNX model's operator and output
// names) so that they cannot drive the terminal: a name with control
// characters (ESC, \r, …) or invalid UTF-8 is shown quoted, with those
// characters escaped, and any other name as it is.
package safetext

import (
	"strconv"
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
