package exchange

import (
	"fmt"
	"strings"

	"rulebook/rules"
)

// The schema TASO's protobuf and FlexFlow's JSON share.
//
// Both formats are renderings of TASO's RuleCollection: a rule is two
// operator lists (srcOp, dstOp) whose operands name an earlier operator of
// the same list and one of its outputs (opId, tsId), or a graph input (a
// negative opId; inputs are told apart by opId and tsId), plus the list of
// output pairs (mappedOutput). Operator types and parameter keys are TASO's
// numbers; FlexFlow writes the same enums by name. Which operator and
// which keys each type is, in either spelling, the registry says
// (rules.Op's TASO and FlexFlow forms).

type xTensor struct {
	op, ts int
	pos    int64
}

type xParam struct {
	key   rules.TASOParam // -1 for a FlexFlow name TASO lacks
	value int
	name  string // FlexFlow's key name, "" in TASO files
}

type xOp struct {
	typ  rules.TASOType // TASO's operator type, -1 in FlexFlow files
	name string         // FlexFlow's type name, "" in TASO files
	in   []xTensor
	para []xParam
	pos  int64
}

type xMap struct {
	srcOp, srcTs, dstOp, dstTs int
	pos                        int64
}

type xRule struct {
	name     string // FlexFlow's "name"; "" in TASO files
	src, dst []xOp
	out      []xMap
	pos      int64
}

// paramName names a parameter as the file does, for reasons.
func paramName(p xParam) string {
	if p.name != "" {
		return p.name
	}
	return p.key.String()
}

// maxOutputs bounds the outputs of an imported rule: canonical forms try
// the orders of outputs that look alike, which grows factorially (TASO's
// rules have one or two). Rule text allows as many.
const maxOutputs = rules.MaxOutputs

// style says how a format names places in a file, for errors.
type style struct {
	file string
	data []byte
	json bool
}

// elem names the i-th element of a list: "srcOp[2]" in JSON, "srcOp 2" in
// protobuf.
func (s style) elem(list string, i int) string {
	if s.json {
		return fmt.Sprintf("%s[%d]", list, i)
	}
	return fmt.Sprintf("%s %d", list, i)
}

// ruleName names rule i (counted from 0) for errors: JSON paths count from
// 0 ("rule[3]"), protobuf errors name rules as imports do ("rule 4").
func (s style) ruleName(i int) string {
	if s.json {
		return fmt.Sprintf("rule[%d]", i)
	}
	return fmt.Sprintf("rule %d", i+1)
}

func (s style) join(path []string) string {
	if s.json {
		return strings.Join(path, ".")
	}
	return strings.Join(path, ": ")
}

func (s style) errorf(pos int64, path []string, format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	if p := s.join(path); p != "" {
		msg = p + ": " + msg
	}
	if s.json {
		return fmt.Errorf("%s:%s: %s", s.file, position(s.data, pos), msg)
	}
	return fmt.Errorf("%s: byte %d: %s", s.file, pos, msg)
}
