package exchange

import (
	"bytes"
	"fmt"
	"path/filepath"
	"strings"

	"rulebook/rules"
)

// Foreign is a rule set read from a foreign format: TASO's RuleCollection
// protobuf (ReadTASO) or FlexFlow's JSON rendering of it (ReadFlexFlow).
//
// Reading is all or nothing for the file and rule by rule for meaning. A
// file that breaks the schema or its graph structure is an error naming the
// place: malformed data, an operand naming an operator that is not earlier
// in its list, a negative tsId, a rule without mappedOutput, an output
// naming a missing operator. A well-formed rule that means something our
// operators cannot say is skipped with the reason: unknown operators,
// unsupported parameters, a wrong operand count, an output index the
// operator does not have, more than maxOutputs outputs.
type Foreign struct {
	Rules   []Named        // importable rules, in file order
	Skipped []Skip         // rules that could not be imported, with why
	Unknown map[string]int // unknown operator name -> occurrences (in skipped rules)
	// Notes say what the import read and did not keep: FlexFlow's
	// PM_PARALLEL_DIM of replicate and reduce.
	Notes []string
}

// Named is an imported rule with its name in the file: FlexFlow's "name",
// or "rule N" (counted from 1) where the format has no names. The rule is
// neither oriented nor canonical: the caller decides (r.Oriented()).
type Named struct {
	Name string
	Rule *rules.Rule
}

// Formats are the rule file formats Read understands.
var Formats = []string{"json", "sexpr", "taso-pb", "flexflow-json"}

// GuessFormat names the format of a rule file from its extension and, for
// JSON, its content: FlexFlow's files are RuleCollections.
func GuessFormat(name string, data []byte) string {
	switch strings.ToLower(filepath.Ext(name)) {
	case ".pb":
		return "taso-pb"
	case ".json":
		if bytes.Contains(data[:min(len(data), 4096)], []byte(`"RuleCollection"`)) {
			return "flexflow-json"
		}
		return "json"
	}
	return "sexpr"
}

// Read reads a rule file in any of Formats. Rules of rulebook's own formats
// are named "rule N", with the name a sexpr file's "; name:" line gives
// them in parentheses, and come canonical, with their shapes; foreign rules
// come as their readers leave them.
func Read(name string, data []byte, reg *rules.Registry, format string) (*Foreign, error) {
	switch format {
	case "taso-pb":
		return ReadTASO(name, data, reg)
	case "flexflow-json":
		return ReadFlexFlow(name, data, reg)
	case "json", "sexpr":
		texts, given, err := readOwn(name, data, reg, format)
		if err != nil {
			return nil, err
		}
		f := &Foreign{Unknown: map[string]int{}}
		for i, t := range texts {
			if err := t.Rule().CheckParallelShapes(); err != nil {
				return nil, fmt.Errorf("%s: %s: %w", name, ownRuleName(i, given), err)
			}
			canon, _ := t.Rule().Oriented()
			f.Rules = append(f.Rules, Named{Name: ownRuleName(i, given), Rule: canon})
		}
		return f, nil
	}
	return nil, fmt.Errorf("unknown rule file format %q: expected one of %s", format, strings.Join(Formats, ", "))
}

// ownRuleName names rule i of one of our files: "rule N", or
// "rule N (NAME)" where the file names it.
func ownRuleName(i int, given []string) string {
	if i < len(given) && given[i] != "" {
		return fmt.Sprintf("rule %d (%s)", i+1, given[i])
	}
	return fmt.Sprintf("rule %d", i+1)
}

// readOwn reads rulebook's own json or sexpr format, every rule checked,
// with the names a sexpr file gives its rules (none for json).
func readOwn(name string, data []byte, reg *rules.Registry, format string) ([]rules.Text, []string, error) {
	if format == "sexpr" {
		return readSexprNamed(name, data, reg)
	}
	_, texts, err := ReadJSON(name, data)
	if err != nil {
		return nil, nil, err
	}
	for i, t := range texts {
		if texts[i], err = t.Checked(reg); err != nil {
			return nil, nil, fmt.Errorf("%s: rule %d: %w", name, i+1, err)
		}
	}
	return texts, nil, nil
}
