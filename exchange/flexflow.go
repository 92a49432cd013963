package exchange

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"rulebook/rules"
)

// The flexflow-json format is FlexFlow's JSON rendering of TASO's
// RuleCollection (see taso.go): every object carries its type in "_t",
// rules have a "name", operator types and parameter keys are spelled with
// their enum names ("OP_EW_ADD", "PM_AXIS"), and values are integers:
//
//	{"_t": "RuleCollection", "rule": [{"_t": "Rule", "name": "taso_rule_0",
//	  "srcOp": [{"_t": "Operator", "type": "OP_RELU",
//	             "input": [{"_t": "Tensor", "opId": -1, "tsId": 0}], "para": []}],
//	  "dstOp": [...],
//	  "mappedOutput": [{"_t": "MapOutput", "srcOpId": 0, "srcTsId": 0, "dstOpId": 0, "dstTsId": 0}]}]}
//
// Each operator's FlexFlow name and parameter names are in its registry
// row (rules.Op.FlexFlow): TASO's enum names, with one misspelling
// FlexFlow's converter writes read too. FlexFlow's parallel operators
// (OP_PARTITION, OP_COMBINE, OP_REPLICATE, OP_REDUCE with PM_PARALLEL_DIM
// and PM_PARALLEL_DEGREE) and OP_LINEAR (PM_ACTI) are ours in the
// parallel set; replicate's and reduce's PM_PARALLEL_DIM is read and
// dropped, as our tensors have one replica dimension.

// ReadFlexFlow reads FlexFlow's JSON rule collection. Rules with operators
// we lack are skipped, and Unknown counts those operators; a malformed file
// is an error naming the file, line and column and what was expected
// ("ff.json:12:5: rule[3].srcOp[0].input: expected an array of Tensor
// objects"). Objects must have the keys of their type and no others ("_t"
// may be left out); a missing "name" makes the rule "rule N".
func ReadFlexFlow(name string, data []byte, reg *rules.Registry) (*Foreign, error) {
	st := style{file: name, data: data, json: true}
	r := &jsonReader{st: st, data: data, dec: json.NewDecoder(bytes.NewReader(data))}
	r.dec.UseNumber()
	xs, err := r.collection()
	if err != nil {
		return nil, err
	}
	return importRules(reg, st, xs)
}

// WriteFlexFlow writes rules as FlexFlow's JSON, laid out as FlexFlow's
// converter lays it out (keys sorted, two-space indent). Rules are named
// "rulebook_rule_N", N counting rs from 1; the rules it cannot carry are
// those WriteTASO cannot, and are returned likewise. Parallel rules are
// written at rules.BaseDegree (see WriteFlexFlowAt).
func WriteFlexFlow(w io.Writer, rs []*rules.Rule) ([]Skip, error) {
	return WriteFlexFlowAt(w, rs, rules.BaseDegree)
}

// WriteFlexFlowAt is WriteFlexFlow with parallel rules written at a
// degree: a rule with the degree variable d at that degree, and a rule
// whose degrees are concrete only if they equal it (it is skipped
// otherwise, with the degree it holds at). Replicate and reduce are written
// with PM_PARALLEL_DIM 0 (our tensors have one replica dimension).
func WriteFlexFlowAt(w io.Writer, rs []*rules.Rule, degree int) ([]Skip, error) {
	xs, skipped := exportRules(rs, flexFlowFormat, degree)
	c := ffCollection{T: "RuleCollection", Rule: []ffRule{}}
	for _, x := range xs {
		fr := ffRule{T: "Rule", Name: x.name, SrcOp: ffOps(x.src), DstOp: ffOps(x.dst), MappedOutput: []ffMap{}}
		for _, m := range x.out {
			fr.MappedOutput = append(fr.MappedOutput, ffMap{T: "MapOutput", DstOpID: m.dstOp, DstTsID: m.dstTs, SrcOpID: m.srcOp, SrcTsID: m.srcTs})
		}
		c.Rule = append(c.Rule, fr)
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return skipped, enc.Encode(c)
}

func ffOps(ops []xOp) []ffOp {
	out := []ffOp{}
	for _, op := range ops {
		fo := ffOp{T: "Operator", Type: op.name, Input: []ffTensor{}, Para: []ffParam{}}
		for _, t := range op.in {
			fo.Input = append(fo.Input, ffTensor{T: "Tensor", OpID: t.op, TsID: t.ts})
		}
		for _, p := range op.para {
			fo.Para = append(fo.Para, ffParam{T: "Parameter", Key: p.key.String(), Value: p.value})
		}
		out = append(out, fo)
	}
	return out
}

// The JSON written, fields in FlexFlow's (sorted) order.
type (
	ffCollection struct {
		T    string   `json:"_t"`
		Rule []ffRule `json:"rule"`
	}
	ffRule struct {
		T            string  `json:"_t"`
		DstOp        []ffOp  `json:"dstOp"`
		MappedOutput []ffMap `json:"mappedOutput"`
		Name         string  `json:"name"`
		SrcOp        []ffOp  `json:"srcOp"`
	}
	ffOp struct {
		T     string     `json:"_t"`
		Input []ffTensor `json:"input"`
		Para  []ffParam  `json:"para"`
		Type  string     `json:"type"`
	}
	ffTensor struct {
		T    string `json:"_t"`
		OpID int    `json:"opId"`
		TsID int    `json:"tsId"`
	}
	ffParam struct {
		T     string `json:"_t"`
		Key   string `json:"key"`
		Value int    `json:"value"`
	}
	ffMap struct {
		T       string `json:"_t"`
		DstOpID int    `json:"dstOpId"`
		DstTsID int    `json:"dstTsId"`
		SrcOpID int    `json:"srcOpId"`
		SrcTsID int    `json:"srcTsId"`
	}
)

// jsonReader walks the token stream, so that every error can point at the
// value it is about.
type jsonReader struct {
	st   style
	data []byte
	dec  *json.Decoder
	// keyPos is where the key whose value is being read starts.
	keyPos int64
}

// peekPos returns where the next token starts: past white space and the
// separators the decoder has not consumed yet.
func (r *jsonReader) peekPos() int64 {
	start := r.dec.InputOffset()
	for start < int64(len(r.data)) && bytes.IndexByte([]byte(" \t\r\n,:"), r.data[start]) >= 0 {
		start++
	}
	return start
}

// next returns the next token and the offset where it starts.
func (r *jsonReader) next() (json.Token, int64, error) {
	start := r.peekPos()
	tok, err := r.dec.Token()
	if err != nil {
		return nil, start, jsonError(r.st.file, r.data, err)
	}
	return tok, start, nil
}

// object reads an object of type what, calling field for each key with
// the decoder positioned at its value; keys in required must appear.
func (r *jsonReader) object(path []string, what string, required []string, field func(key string, path []string) error) error {
	tok, pos, err := r.next()
	if err != nil {
		return err
	}
	if tok != json.Delim('{') {
		return r.st.errorf(pos, path, "expected %s %s object, got %s", article(what), what, describeToken(tok))
	}
	seen := map[string]bool{}
	for r.dec.More() {
		tok, kpos, err := r.next()
		if err != nil {
			return err
		}
		key, _ := tok.(string)
		if seen[key] {
			return r.st.errorf(kpos, path, "key %q appears twice in %s %s object", key, article(what), what)
		}
		seen[key] = true
		r.keyPos = kpos
		if key == "_t" {
			t, tpos, err := r.next()
			if err != nil {
				return err
			}
			if t != what {
				return r.st.errorf(tpos, path, "expected \"_t\": %q, got %s", what, describeToken(t))
			}
			continue
		}
		if err := field(key, append(path[:len(path):len(path)], key)); err != nil {
			return err
		}
	}
	if _, _, err := r.next(); err != nil { // '}'
		return err
	}
	for _, k := range required {
		if !seen[k] {
			return r.st.errorf(pos, path, "expected a key %q in the %s object", k, what)
		}
	}
	return nil
}

func (r *jsonReader) unknownKey(key string, path []string, what string) error {
	return r.st.errorf(r.keyPos, path[:len(path)-1], "unexpected key %q in %s %s object", key, article(what), what)
}

func article(word string) string {
	if strings.ContainsRune("AEIOU", rune(word[0])) {
		return "an"
	}
	return "a"
}

// array reads an array of what objects, calling elem with the path of each.
func (r *jsonReader) array(path []string, what string, elem func(i int, path []string) error) error {
	tok, pos, err := r.next()
	if err != nil {
		return err
	}
	if tok != json.Delim('[') {
		return r.st.errorf(pos, path, "expected an array of %s objects, got %s", what, describeToken(tok))
	}
	last := path[len(path)-1]
	for i := 0; r.dec.More(); i++ {
		p := append(path[:len(path)-1:len(path)-1], fmt.Sprintf("%s[%d]", last, i))
		if err := elem(i, p); err != nil {
			return err
		}
	}
	_, _, err = r.next() // ']'
	return err
}

// integer reads an int32.
func (r *jsonReader) integer(path []string) (int, int64, error) {
	tok, pos, err := r.next()
	if err != nil {
		return 0, pos, err
	}
	n, ok := tok.(json.Number)
	if !ok {
		return 0, pos, r.st.errorf(pos, path, "expected an integer, got %s", describeToken(tok))
	}
	v, err := strconv.ParseInt(string(n), 10, 32)
	if err != nil {
		return 0, pos, r.st.errorf(pos, path, "expected a 32-bit integer, got %s", n)
	}
	return int(v), pos, nil
}

func (r *jsonReader) str(path []string) (string, int64, error) {
	tok, pos, err := r.next()
	if err != nil {
		return "", pos, err
	}
	s, ok := tok.(string)
	if !ok {
		return "", pos, r.st.errorf(pos, path, "expected a string, got %s", describeToken(tok))
	}
	return s, pos, nil
}

func describeToken(tok json.Token) string {
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			return "an object"
		case '[':
			return "an array"
		}
		return fmt.Sprintf("%q", string(t))
	case string:
		return strconv.Quote(t)
	case json.Number:
		return "the number " + string(t)
	case bool:
		return strconv.FormatBool(t)
	case nil:
		return "null"
	}
	return fmt.Sprint(tok)
}

func (r *jsonReader) collection() ([]xRule, error) {
	var xs []xRule
	err := r.object(nil, "RuleCollection", []string{"rule"}, func(key string, path []string) error {
		if key != "rule" {
			return r.unknownKey(key, path, "RuleCollection")
		}
		return r.array(path, "Rule", func(i int, path []string) error {
			x, err := r.rule(path)
			xs = append(xs, x)
			return err
		})
	})
	if err != nil {
		return nil, err
	}
	pos := r.peekPos()
	if tok, err := r.dec.Token(); err == nil {
		return nil, r.st.errorf(pos, nil, "unexpected %s after the RuleCollection", describeToken(tok))
	} else if !errors.Is(err, io.EOF) {
		return nil, jsonError(r.st.file, r.data, err)
	}
	return xs, nil
}

func (r *jsonReader) rule(path []string) (xRule, error) {
	var x xRule
	x.pos = r.peekPos()
	err := r.object(path, "Rule", []string{"srcOp", "dstOp", "mappedOutput"}, func(key string, fpath []string) error {
		switch key {
		case "name":
			name, _, err := r.str(fpath)
			x.name = name
			return err
		case "srcOp", "dstOp":
			return r.array(fpath, "Operator", func(i int, opath []string) error {
				op, err := r.operator(opath)
				if key == "srcOp" {
					x.src = append(x.src, op)
				} else {
					x.dst = append(x.dst, op)
				}
				return err
			})
		case "mappedOutput":
			return r.array(fpath, "MapOutput", func(i int, mpath []string) error {
				m := xMap{}
				m.pos = r.peekPos()
				err := r.ints(mpath, "MapOutput", map[string]*int{"srcOpId": &m.srcOp, "srcTsId": &m.srcTs, "dstOpId": &m.dstOp, "dstTsId": &m.dstTs})
				x.out = append(x.out, m)
				return err
			})
		}
		return r.unknownKey(key, fpath, "Rule")
	})
	return x, err
}

func (r *jsonReader) operator(path []string) (xOp, error) {
	op := xOp{typ: -1}
	op.pos = r.peekPos()
	err := r.object(path, "Operator", []string{"type"}, func(key string, fpath []string) error {
		switch key {
		case "type":
			name, _, err := r.str(fpath)
			op.name = name
			return err
		case "input":
			return r.array(fpath, "Tensor", func(i int, tpath []string) error {
				t := xTensor{}
				t.pos = r.peekPos()
				err := r.ints(tpath, "Tensor", map[string]*int{"opId": &t.op, "tsId": &t.ts})
				op.in = append(op.in, t)
				return err
			})
		case "para":
			return r.array(fpath, "Parameter", func(i int, ppath []string) error {
				p := xParam{key: -1}
				err := r.object(ppath, "Parameter", []string{"key", "value"}, func(k string, kpath []string) error {
					switch k {
					case "key":
						name, _, err := r.str(kpath)
						p.name = name
						if key, ok := rules.TASOParamNamed(name); ok {
							p.key = key
						}
						return err
					case "value":
						v, _, err := r.integer(kpath)
						p.value = v
						return err
					}
					return r.unknownKey(k, kpath, "Parameter")
				})
				op.para = append(op.para, p)
				return err
			})
		}
		return r.unknownKey(key, fpath, "Operator")
	})
	return op, err
}

// ints reads an object of integer fields, all required.
func (r *jsonReader) ints(path []string, what string, fields map[string]*int) error {
	var required []string
	for k := range fields {
		required = append(required, k)
	}
	slices.Sort(required)
	return r.object(path, what, required, func(key string, fpath []string) error {
		dst, ok := fields[key]
		if !ok {
			return r.unknownKey(key, fpath, what)
		}
		v, _, err := r.integer(fpath)
		*dst = v
		return err
	})
}
