package exchange

import (
	"bytes"
	"slices"
	"testing"

	"rulebook/rules"
)

var sample = []rules.Text{
	{Src: "(transpose (transpose ?a))", Dst: "?a", Inputs: "?a:4x4"},
	{Src: "(let ((%0 (concat 0 ?a ?b))) (outputs (split0 0 %0) (split1 0 %0)))", Dst: "(outputs ?a ?b)", Inputs: "?a:2x4 ?b:2x4"},
	{Src: "(conv2d 1 same none 1 (pool_avg 3 1 same ?a) ?b)", Dst: "(pool_avg 3 1 same (conv2d 1 same none 1 ?a ?b))", Cond: "(kernel ?b 1 1)",
		Inputs: "?a:1x4x5x5 ?b:2x4x1x1"},
}

func TestJSONAndSexprRoundTrip(t *testing.T) {
	h := Header{Version: "v1", Hash: "abc"}
	var js, sx bytes.Buffer
	if err := WriteJSON(&js, h, sample); err != nil {
		t.Fatal(err)
	}
	if err := WriteSexpr(&sx, h, sample); err != nil {
		t.Fatal(err)
	}
	gotH, fromJSON, err := ReadJSON("x.json", js.Bytes())
	if err != nil || gotH != h {
		t.Fatalf("json: %v %+v", err, gotH)
	}
	fromSexpr, err := ReadSexpr("x.sexpr", sx.Bytes(), rules.Default())
	if err != nil {
		t.Fatal(err)
	}
	// A checked Text carries its parsed rule: compare the written fields.
	plain := func(t rules.Text) rules.Text {
		return rules.Text{Src: t.Src, Dst: t.Dst, Cond: t.Cond, Inputs: t.Inputs, Constants: t.Constants}
	}
	for i, want := range sample {
		if fromJSON[i] != want || plain(fromSexpr[i]) != want {
			t.Errorf("rule %d: json %+v, sexpr %+v, want %+v", i, fromJSON[i], fromSexpr[i], want)
		}
	}
}

func FuzzReadJSON(f *testing.F) {
	var js bytes.Buffer
	WriteJSON(&js, Header{}, sample)
	f.Add(js.Bytes())
	for _, seed := range deepSeeds(f, "json") {
		f.Add(seed)
	}
	reg := rules.Default()
	f.Fuzz(func(t *testing.T, data []byte) {
		h, texts, err := ReadJSON("fuzz.json", data)
		Read("fuzz.json", data, reg, "json") // must not panic parsing its rules
		if err != nil {
			return
		}
		var again bytes.Buffer
		if err := WriteJSON(&again, h, texts); err != nil {
			t.Fatal(err)
		}
		h2, texts2, err := ReadJSON("again.json", again.Bytes())
		if err != nil || h2 != h || !slices.Equal(texts2, texts) {
			t.Fatalf("written again, %+v %q reads as %+v %q: %v", h, texts, h2, texts2, err)
		}
	})
}

func FuzzReadSexpr(f *testing.F) {
	var sx bytes.Buffer
	WriteSexpr(&sx, Header{}, sample)
	f.Add(sx.Bytes())
	for _, seed := range deepSeeds(f, "sexpr") {
		f.Add(seed)
	}
	reg := rules.Default()
	plain := func(ts []rules.Text) []rules.Text {
		out := make([]rules.Text, len(ts))
		for i, t := range ts {
			out[i] = rules.Text{Src: t.Src, Dst: t.Dst, Cond: t.Cond, Inputs: t.Inputs, Constants: t.Constants}
		}
		return out
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		texts, err := ReadSexpr("fuzz.sexpr", data, reg)
		if err != nil {
			return
		}
		var again bytes.Buffer
		if err := WriteSexpr(&again, Header{}, texts); err != nil {
			t.Fatal(err)
		}
		texts2, err := ReadSexpr("again.sexpr", again.Bytes(), reg)
		if err != nil || !slices.Equal(plain(texts2), plain(texts)) {
			t.Fatalf("written again, %q reads as %q: %v", plain(texts), plain(texts2), err)
		}
	})
}

// TestConditionedRulesNotForeign checks that TASO's and FlexFlow's
// formats, which cannot say a rule holds only for some shapes, skip a
// conditioned rule rather than write it as one that holds everywhere.
func TestConditionedRulesNotForeign(t *testing.T) {
	reg := rules.Default()
	cond, err := sample[2].Checked(reg)
	if err != nil {
		t.Fatal(err)
	}
	writers := map[string]func(*bytes.Buffer, []*rules.Rule) ([]Skip, error){
		"TASO":     func(b *bytes.Buffer, rs []*rules.Rule) ([]Skip, error) { return WriteTASO(b, rs) },
		"FlexFlow": func(b *bytes.Buffer, rs []*rules.Rule) ([]Skip, error) { return WriteFlexFlow(b, rs) },
	}
	for name, write := range writers {
		var b bytes.Buffer
		skipped, err := write(&b, []*rules.Rule{cond.Rule()})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(skipped) != 1 || !bytes.Contains([]byte(skipped[0].Reason), []byte("condition")) {
			t.Errorf("%s: skipped %+v, want the conditioned rule skipped for its condition", name, skipped)
		}
	}
}
