package safetext

import (
	"strings"
	"testing"
)

// Names with terminal escapes, carriage returns or invalid UTF-8 come
// out quoted with no control character left; plain names (spaces and
// non-ASCII letters included) come out as they are.
func TestName(t *testing.T) {
	cases := []struct{ in, want string }{
		{"taso_rule_12", "taso_rule_12"},
		{"2-core CPU", "2-core CPU"},
		{"größe ×2", "größe ×2"},
		{"\x1b[31mred", `"\x1b[31mred"`},
		{"a\rb", `"a\rb"`},
		{"\x1b[2J", `"\x1b[2J"`},
		{"tab\there", `"tab\there"`},
		{"bad\xffutf8", `"bad\xffutf8"`},
	}
	for _, c := range cases {
		got := Name(c.in)
		if got != c.want {
			t.Errorf("Name(%q) = %s, want %s", c.in, got, c.want)
		}
		if strings.ContainsAny(got, "\x1b\r\t") {
			t.Errorf("Name(%q) keeps a control character: %q", c.in, got)
		}
	}
}

// TestMessage: a message keeps its lines and tabs, and every other
// control character or invalid byte is escaped.
func TestMessage(t *testing.T) {
	cases := []struct{ in, want string }{
		{"open x.onnx: no such file", "open x.onnx: no such file"},
		{"line one\n\tline two", "line one\n\tline two"},
		{"open \x1b[31mred\r.onnx", `open \x1b[31mred\r.onnx`},
		{"bad \xff byte", `bad \xff byte`},
		{"größe ×2 \uFFFD", "größe ×2 \uFFFD"},
	}
	for _, c := range cases {
		if got := Message(c.in); got != c.want {
			t.Errorf("Message(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}
