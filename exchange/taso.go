package exchange

import (
	"errors"
	"fmt"
	"io"

	"google.golang.org/protobuf/encoding/protowire"

	"rulebook/rules"
)

// The taso-pb format is TASO's RuleCollection protobuf (its rules.proto,
// read and written here at the wire level):
//
//	RuleCollection { repeated Rule rule = 1; }
//	Rule      { repeated Operator srcOp = 1; repeated Operator dstOp = 2; repeated MapOutput mappedOutput = 3; }
//	Operator  { int32 type = 1; repeated Tensor input = 2; repeated Parameter para = 3; }
//	Tensor    { int32 opId = 1; int32 tsId = 2; }
//	Parameter { int32 key = 1; int32 value = 2; }
//	MapOutput { int32 srcOpId = 1; int32 dstOpId = 2; int32 srcTsId = 3; int32 dstTsId = 4; }
//
// The operator types and parameter keys, and what is kept of them, are
// described at importer.operator and exportParams.

// ReadTASO reads a TASO rule collection. Rules that our operators cannot
// express are skipped and reported; a malformed file is an error naming
// the byte offset and the place in the file ("taso.pb: byte 1234: rule 17:
// srcOp 2: input 1: truncated varint": rules counted from 1, as imports
// name them, operators and operands from 0, as opIds count). A truncated
// file is an error unless it ends exactly between two rules, which the
// format cannot tell from a shorter collection.
func ReadTASO(name string, data []byte, reg *rules.Registry) (*Foreign, error) {
	st := style{file: name, data: data}
	d := pbDecoder{st: st, data: data}
	xs, err := d.collection()
	if err != nil {
		return nil, err
	}
	return importRules(reg, st, xs)
}

// WriteTASO writes rules as a TASO rule collection. Rules the format cannot
// carry are left out and returned with the reason ("rule N" counts rs from
// 1): an output that is a graph input, and conv2d groups TASO would infer
// differently (see exportParams). Graph input i is written as opId -(i+1).
func WriteTASO(w io.Writer, rs []*rules.Rule) ([]Skip, error) {
	xs, skipped := exportRules(rs, tasoFormat, rules.BaseDegree)
	var b []byte
	for i := range xs {
		b = protowire.AppendTag(b, 1, protowire.BytesType)
		b = protowire.AppendBytes(b, encodeRule(&xs[i]))
	}
	_, err := w.Write(b)
	return skipped, err
}

func appendInt32(b []byte, num protowire.Number, v int) []byte {
	b = protowire.AppendTag(b, num, protowire.VarintType)
	return protowire.AppendVarint(b, uint64(int64(int32(v))))
}

func appendMessage(b []byte, num protowire.Number, m []byte) []byte {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendBytes(b, m)
}

func encodeRule(x *xRule) []byte {
	var b []byte
	for s, ops := range [][]xOp{x.src, x.dst} {
		for _, op := range ops {
			var o []byte
			o = appendInt32(o, 1, int(op.typ))
			for _, t := range op.in {
				var m []byte
				m = appendInt32(m, 1, t.op)
				m = appendInt32(m, 2, t.ts)
				o = appendMessage(o, 2, m)
			}
			for _, p := range op.para {
				var m []byte
				m = appendInt32(m, 1, int(p.key))
				m = appendInt32(m, 2, p.value)
				o = appendMessage(o, 3, m)
			}
			b = appendMessage(b, protowire.Number(s+1), o)
		}
	}
	for _, o := range x.out {
		var m []byte
		m = appendInt32(m, 1, o.srcOp)
		m = appendInt32(m, 2, o.dstOp)
		m = appendInt32(m, 3, o.srcTs)
		m = appendInt32(m, 4, o.dstTs)
		b = appendMessage(b, 3, m)
	}
	return b
}

// pbDecoder decodes the RuleCollection wire format, keeping byte offsets.
type pbDecoder struct {
	st   style
	data []byte
}

// pbField is one field of a message: a varint's value, or the bounds of a
// length-delimited value (end is where the value should end; when the data
// stops earlier, short is set and end is the end of the data).
type pbField struct {
	num   protowire.Number
	typ   protowire.Type
	val   uint64
	start int
	end   int
	at    int
	short bool
	name  string // the field's place, for errors
}

// int32 decodes a varint as protobuf's int32 (negatives are ten-byte
// sign-extended varints; larger values truncate, as protobuf's own
// decoders do).
func (f *pbField) int32() int { return int(int32(f.val)) }

var wireTypeNames = map[protowire.Type]string{
	protowire.VarintType: "a varint", protowire.Fixed32Type: "a fixed32", protowire.Fixed64Type: "a fixed64",
	protowire.BytesType: "a length-delimited field", protowire.StartGroupType: "a group", protowire.EndGroupType: "a group end",
}

// fields walks the fields of the message in data[start:end], calling f for
// each; label names a field by its number, for errors ("srcOp 2", "opId").
// A length-delimited field that runs past the end of the data is passed on
// with short set, so that f can find the innermost place the data stops;
// the walk then reports the truncation itself.
func (d *pbDecoder) fields(start, end int, path []string, label func(protowire.Number) string, f func(*pbField) error) error {
	for i := start; i < end; {
		at := i
		num, typ, n := protowire.ConsumeTag(d.data[i:end])
		if n < 0 {
			return d.st.errorf(int64(at), path, "%s", wireProblem(n, "field tag"))
		}
		i += n
		fld := pbField{num: num, typ: typ, at: at, name: label(num)}
		sub := path
		if fld.name != "" {
			sub = append(path[:len(path):len(path)], fld.name)
		}
		switch typ {
		case protowire.VarintType:
			v, n := protowire.ConsumeVarint(d.data[i:end])
			if n < 0 {
				return d.st.errorf(int64(i), sub, "%s", wireProblem(n, "varint"))
			}
			fld.val, fld.start, fld.end = v, i, i+n
			i += n
		case protowire.BytesType:
			l, n := protowire.ConsumeVarint(d.data[i:end])
			if n < 0 {
				return d.st.errorf(int64(i), sub, "%s", wireProblem(n, "length"))
			}
			i += n
			fld.start = i
			if l > uint64(end-i) {
				fld.end, fld.short = end, true
				if err := f(&fld); err != nil {
					return err
				}
				return d.st.errorf(int64(end), sub, "truncated: %d bytes long, only %d are left", l, end-i)
			}
			fld.end = i + int(l)
			i += int(l)
		case protowire.Fixed32Type, protowire.Fixed64Type:
			n := protowire.ConsumeFieldValue(num, typ, d.data[i:end])
			if n < 0 {
				return d.st.errorf(int64(i), sub, "%s", wireProblem(n, "field value"))
			}
			fld.start, fld.end = i, i+n
			i += n
		default:
			// Groups are not in the schema; 6 and 7 are no wire type.
			return d.st.errorf(int64(at), path, "field %d: unexpected wire type %d", num, typ)
		}
		if err := f(&fld); err != nil {
			return err
		}
	}
	return nil
}

func wireProblem(n int, what string) string {
	err := protowire.ParseError(n)
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return "truncated " + what
	}
	return fmt.Sprintf("invalid %s: %v", what, err)
}

// expect checks a field's wire type against the schema.
func (d *pbDecoder) expect(f *pbField, path []string, field string, typ protowire.Type) error {
	if f.typ != typ {
		return d.st.errorf(int64(f.at), path, "%s (field %d): expected %s, got %s", field, f.num, wireTypeNames[typ], wireName(f.typ))
	}
	return nil
}

func wireName(t protowire.Type) string {
	if n, ok := wireTypeNames[t]; ok {
		return n
	}
	return fmt.Sprintf("wire type %d", t)
}

func (d *pbDecoder) unexpected(f *pbField, path []string, msg string) error {
	return d.st.errorf(int64(f.at), path, "unexpected field %d (%s) in %s", f.num, wireName(f.typ), msg)
}

func (d *pbDecoder) collection() ([]xRule, error) {
	if len(d.data) == 0 {
		return nil, fmt.Errorf("%s: empty file: expected a TASO RuleCollection", d.st.file)
	}
	var xs []xRule
	label := func(num protowire.Number) string {
		if num == 1 {
			return d.st.ruleName(len(xs))
		}
		return ""
	}
	err := d.fields(0, len(d.data), nil, label, func(f *pbField) error {
		if f.num != 1 {
			return d.unexpected(f, nil, "a RuleCollection (expected rule = 1)")
		}
		path := []string{f.name}
		if err := d.expect(f, path, "rule", protowire.BytesType); err != nil {
			return err
		}
		x, err := d.rule(f, path)
		if err != nil {
			return err
		}
		xs = append(xs, x)
		return nil
	})
	return xs, err
}

func (d *pbDecoder) rule(f *pbField, path []string) (xRule, error) {
	x := xRule{pos: int64(f.at)}
	label := func(num protowire.Number) string {
		switch num {
		case 1:
			return d.st.elem("srcOp", len(x.src))
		case 2:
			return d.st.elem("dstOp", len(x.dst))
		case 3:
			return d.st.elem("mappedOutput", len(x.out))
		}
		return ""
	}
	err := d.fields(f.start, f.end, path, label, func(g *pbField) error {
		if g.name == "" {
			return d.unexpected(g, path, "a Rule (expected srcOp = 1, dstOp = 2, mappedOutput = 3)")
		}
		field := []string{"srcOp", "dstOp", "mappedOutput"}[g.num-1]
		sub := append(path[:len(path):len(path)], g.name)
		if err := d.expect(g, path, field, protowire.BytesType); err != nil {
			return err
		}
		switch g.num {
		case 1, 2:
			op, err := d.operator(g, sub)
			if g.num == 1 {
				x.src = append(x.src, op)
			} else {
				x.dst = append(x.dst, op)
			}
			return err
		}
		m, err := d.mapOutput(g, sub)
		x.out = append(x.out, m)
		return err
	})
	return x, err
}

func (d *pbDecoder) operator(f *pbField, path []string) (xOp, error) {
	op := xOp{pos: int64(f.at)}
	label := func(num protowire.Number) string {
		switch num {
		case 1:
			return "type"
		case 2:
			return d.st.elem("input", len(op.in))
		case 3:
			return d.st.elem("para", len(op.para))
		}
		return ""
	}
	err := d.fields(f.start, f.end, path, label, func(g *pbField) error {
		switch g.num {
		case 1:
			if err := d.expect(g, path, "type", protowire.VarintType); err != nil {
				return err
			}
			op.typ = rules.TASOType(g.int32())
			return nil
		case 2:
			if err := d.expect(g, path, "input", protowire.BytesType); err != nil {
				return err
			}
			t := xTensor{pos: int64(g.at)}
			err := d.ints(g, append(path[:len(path):len(path)], g.name), "a Tensor (expected opId = 1, tsId = 2)", []string{"opId", "tsId"}, &t.op, &t.ts)
			op.in = append(op.in, t)
			return err
		case 3:
			if err := d.expect(g, path, "para", protowire.BytesType); err != nil {
				return err
			}
			var key, value int
			err := d.ints(g, append(path[:len(path):len(path)], g.name), "a Parameter (expected key = 1, value = 2)", []string{"key", "value"}, &key, &value)
			op.para = append(op.para, xParam{key: rules.TASOParam(key), value: value})
			return err
		}
		return d.unexpected(g, path, "an Operator (expected type = 1, input = 2, para = 3)")
	})
	return op, err
}

func (d *pbDecoder) mapOutput(f *pbField, path []string) (xMap, error) {
	m := xMap{pos: int64(f.at)}
	err := d.ints(f, path, "a MapOutput (expected srcOpId = 1, dstOpId = 2, srcTsId = 3, dstTsId = 4)",
		[]string{"srcOpId", "dstOpId", "srcTsId", "dstTsId"}, &m.srcOp, &m.dstOp, &m.srcTs, &m.dstTs)
	return m, err
}

// ints decodes a message whose fields 1, 2, … are the int32s dst, named
// names; absent fields are 0.
func (d *pbDecoder) ints(f *pbField, path []string, what string, names []string, dst ...*int) error {
	label := func(num protowire.Number) string {
		if num >= 1 && int(num) <= len(names) {
			return names[num-1]
		}
		return ""
	}
	return d.fields(f.start, f.end, path, label, func(g *pbField) error {
		if g.name == "" {
			return d.unexpected(g, path, what)
		}
		if err := d.expect(g, path, g.name, protowire.VarintType); err != nil {
			return err
		}
		*dst[g.num-1] = g.int32()
		return nil
	})
}
