// Package exchange reads and writes rule sets in the formats users
// exchange: rulebook's own JSON and s-expression files, TASO's
// RuleCollection protobuf and FlexFlow's JSON rendering of it, and Graphviz
// pictures. Export writes a released version in any of them; Import brings
// a rule file into the store.
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
	fmt.Fprintf(bw, "; rulebook rules, version %s, hash %s, %d rules\n", h.Version, h.Hash, len(rs))
	for _, r := range rs {
		fmt.Fprintf(bw, "%s => %s", r.Src, r.Dst)
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

// WriteDot draws each rule as a Graphviz cluster pair: source on the left,
// target on the right, inputs shared.
func WriteDot(w io.Writer, reg *rules.Registry, rs []rules.Text) error {
	bw := bufio.NewWriter(w)
	fmt.Fprintln(bw, "digraph rules {\n  rankdir=BT;\n  node [shape=box, fontname=\"monospace\"];")
	for k, r := range rs {
		checked, err := r.Checked(reg)
		if err != nil {
			return fmt.Errorf("rule %d: %w", k, err)
		}
		parsed := checked.Rule()
		fmt.Fprintf(bw, "  subgraph cluster_%d {\n    label=%q;\n", k, fmt.Sprintf("rule %d", k+1))
		for i := 0; i < parsed.NumInputs; i++ {
			fmt.Fprintf(bw, "    r%d_in%d [label=\"?%c\", shape=ellipse];\n", k, i, 'a'+i%26)
		}
		for side, g := range []*rules.Graph{&parsed.Src, &parsed.Dst} {
			writeDotSide(bw, k, []string{"src", "dst"}[side], g)
		}
		fmt.Fprintln(bw, "  }")
	}
	fmt.Fprintln(bw, "}")
	return bw.Flush()
}

func writeDotSide(w io.Writer, k int, side string, g *rules.Graph) {
	ref := func(v rules.Value) string {
		if v.IsInput() {
			return fmt.Sprintf("r%d_in%d", k, v.Input())
		}
		return fmt.Sprintf("r%d_%s%d", k, side, v.Node)
	}
	// An edge says which operand it feeds (order matters for concat and
	// matmul) and, from a split, which output it carries.
	label := func(from rules.Value, operand, arity int) string {
		var parts []string
		if !from.IsInput() && g.Nodes[from.Node].Op.Outputs > 1 {
			parts = append(parts, fmt.Sprintf("out %d", from.Out))
		}
		if arity > 1 {
			parts = append(parts, fmt.Sprintf("arg %d", operand))
		}
		return strings.Join(parts, ", ")
	}
	name := map[string]string{"src": "source", "dst": "target"}[side]
	fmt.Fprintf(w, "    subgraph cluster_%d_%s {\n      label=%q; style=dashed;\n", k, side, name)
	for j, n := range g.Nodes {
		text := n.Op.Name
		for i, p := range n.Params {
			text += " " + n.Op.Params[i].Format(p)
		}
		fmt.Fprintf(w, "      r%d_%s%d [label=%q];\n", k, side, j, text)
	}
	for i := range g.Outputs {
		fmt.Fprintf(w, "      r%d_%s_out%d [label=\"output %d\", shape=plaintext];\n", k, side, i, i)
	}
	fmt.Fprintln(w, "    }")
	for j, n := range g.Nodes {
		for a, v := range n.Args {
			fmt.Fprintf(w, "    %s -> r%d_%s%d [label=%q];\n", ref(v), k, side, j, label(v, a, len(n.Args)))
		}
	}
	for i, o := range g.Outputs {
		fmt.Fprintf(w, "    %s -> r%d_%s_out%d [label=%q];\n", ref(o), k, side, i, label(o, 0, 1))
	}
}
