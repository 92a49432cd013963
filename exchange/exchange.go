// Package exchange reads and writes rule sets in the formats users exchange.
// These are rulebook's own JSON and s-expression files, TASO's
// RuleCollection protobuf, FlexFlow's JSON rendering of it, and Graphviz
// pictures. Export writes a released version in any of them, and Import
// brings a rule file into the store. docs/rules.md ("Rule text") gives the
// grammar of rule text, and docs/design.md ("Data flow") where files come in.
package exchange

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"

	"rulebook/rules"
)

// Header describes where a rule set comes from.
type Header struct {
	Version string `json:"version,omitempty"`
	Hash    string `json:"hash,omitempty"`
}

// jsonFormat names the JSON layout, so a reader can refuse others.
const jsonFormat = "rulebook-rules/1"

type jsonFile struct {
	Format string `json:"format"`
	Header
	Rules []rules.Text `json:"rules"`
}

// WriteJSON writes a rule set as JSON.
func WriteJSON(w io.Writer, h Header, rs []rules.Text) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(jsonFile{Format: jsonFormat, Header: h, Rules: rs})
}

// ReadJSON reads a rule set written by WriteJSON; errors name the file and
// the line and column. The rules are as decoded, plain fields: Checked
// parses them.
func ReadJSON(name string, data []byte) (Header, []rules.Text, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var f jsonFile
	if err := dec.Decode(&f); err != nil {
		return Header{}, nil, jsonError(name, data, err)
	}
	if f.Format != jsonFormat {
		return Header{}, nil, fmt.Errorf("%s: expected \"format\": %q, got %q", name, jsonFormat, f.Format)
	}
	for i, r := range f.Rules {
		if r.Src == "" || r.Dst == "" {
			return Header{}, nil, fmt.Errorf("%s: rules[%d]: expected both \"src\" and \"dst\"", name, i)
		}
	}
	return f.Header, f.Rules, nil
}

// jsonKind says in JSON's words what a Go type is read from.
func jsonKind(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Struct, reflect.Map:
		return "an object"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	}
	return "a number"
}

func jsonError(name string, data []byte, err error) error {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		return fmt.Errorf("%s:%s: %v", name, position(data, syn.Offset), err)
	case errors.As(err, &typ):
		return fmt.Errorf("%s:%s: %s: expected %s, got JSON %s", name, position(data, typ.Offset), typ.Field, jsonKind(typ.Type), typ.Value)
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return fmt.Errorf("%s:%s: the JSON ends early (truncated file?)", name, position(data, int64(len(data))))
	}
	return fmt.Errorf("%s: %v", name, err)
}

// position turns a byte offset into "line:col".
func position(data []byte, off int64) string {
	if off > int64(len(data)) {
		off = int64(len(data))
	}
	line := 1 + bytes.Count(data[:off], []byte("\n"))
	col := int(off) - bytes.LastIndexByte(data[:off], '\n')
	return fmt.Sprintf("%d:%d", line, col)
}

// WriteSexpr writes one rule per line, its shapes in a trailing comment
// ("; ?a:2x4 ?b:4x4 | 4x4").
func WriteSexpr(w io.Writer, h Header, rs []rules.Text) error {
	bw := bufio.NewWriter(w)
	hash := ""
	if h.Hash != "" {
		hash = ", hash " + h.Hash
	}
	fmt.Fprintf(bw, "; rulebook rules, version %s%s, %d rules\n", h.Version, hash, len(rs))
	for _, r := range rs {
		fmt.Fprint(bw, r.String())
		if r.Inputs != "" || r.Constants != "" {
			fmt.Fprintf(bw, "  ; %s | %s", r.Inputs, r.Constants)
		}
		fmt.Fprintln(bw)
	}
	return bw.Flush()
}

// sexprNameKey opens a comment line that names the rules below it, up to
// the next such line: "; name: ewadd is associative".
const sexprNameKey = "name:"

// ReadSexpr reads a file written by WriteSexpr; each rule must parse, and
// errors name the file, line and column.
func ReadSexpr(name string, data []byte, reg *rules.Registry) ([]rules.Text, error) {
	texts, _, err := readSexprNamed(name, data, reg)
	return texts, err
}

// readSexprNamed is ReadSexpr that also returns, for each rule, the name
// the nearest "; name:" comment line above it gives ("" if none does).
func readSexprNamed(name string, data []byte, reg *rules.Registry) ([]rules.Text, []string, error) {
	var out []rules.Text
	var names []string
	current := ""
	for i, line := range strings.Split(string(data), "\n") {
		text, comment, _ := strings.Cut(line, ";")
		if strings.TrimSpace(text) == "" {
			if n, ok := strings.CutPrefix(strings.TrimSpace(comment), sexprNameKey); ok {
				current = strings.TrimSpace(n)
			}
			continue
		}
		var inputs, constants string
		if in, cs, ok := strings.Cut(comment, "|"); ok {
			inputs, constants = strings.TrimSpace(in), strings.TrimSpace(cs)
		}
		r, err := rules.ParseText(reg, text, inputs, constants)
		if err != nil {
			var syn *rules.SyntaxError
			if errors.As(err, &syn) {
				return nil, nil, fmt.Errorf("%s:%d:%d: %s", name, i+1, syn.Col, syn.Msg)
			}
			return nil, nil, fmt.Errorf("%s:%d: %v", name, i+1, err)
		}
		out = append(out, r)
		names = append(names, current)
	}
	return out, names, nil
}
