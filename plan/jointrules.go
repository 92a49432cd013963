package plan

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"sort"

	"rulebook/rules"
	"rulebook/training"
	"rulebook/version"
)

// The joint search stands on the pinned version's proved rules: a layout
// that moves a product's data is open to the search only where the
// version holds the rule that says the layout computes the same tensor.
// Each is an identity at every degree d between a product and the
// product of its pieces, in the registry's parallel operators.

// layoutRule is one parallelization a layout style applies.
type layoutRule struct {
	what string
	text string
}

// The rules behind the layouts, in the registry's names. linear is
// FlexFlow's x (…, in) times w (in, out) on rank-3 activations, so the
// feature axis is 2.
var (
	batchRule = layoutRule{"a product's rows cut over data-parallel replicas, its weight copied",
		fmt.Sprintf("(%[1]s none (%[2]s 0 d ?a) (%[3]s d ?b)) => (%[2]s 0 d (%[1]s none ?a ?b))", rules.NameLinear, rules.NamePartition, rules.NameReplicate)}
	columnRule = layoutRule{"a product's output columns cut, its input copied (Megatron's column cut)",
		fmt.Sprintf("(%[1]s none (%[3]s d ?a) (%[2]s 1 d ?b)) => (%[2]s 2 d (%[1]s none ?a ?b))", rules.NameLinear, rules.NamePartition, rules.NameReplicate)}
	fuseRule = layoutRule{"a product fused with the relu that follows it",
		fmt.Sprintf("(%[2]s (%[1]s none ?a ?b)) => (%[1]s relu ?a ?b)", rules.NameLinear, rules.NameRelu)}
	rowRule = layoutRule{"a product's contraction cut, its output summed (Megatron's row cut)",
		fmt.Sprintf("(%[1]s none (%[2]s 2 d ?a) (%[2]s 0 d ?b)) => (%[3]s d (%[1]s none ?a ?b))", rules.NameLinear, rules.NameCombine, rules.NameReduce)}
	// The attention's heads cut, Megatron's: the weights (the scores'
	// product, its scale and mask, the softmax) and the product by V, each
	// cut along the heads, dimension 1 of [B, H, S, D].
	attnSoftmaxRule = layoutRule{"attention's weights cut by heads, queries and keys alike",
		fmt.Sprintf("(%[1]s (%[2]s 1 d ?a) (%[2]s 1 d ?b)) => (%[2]s 1 d (%[1]s ?a ?b))", rules.NameAttnSoftmax, rules.NamePartition)}
	attnMixRule = layoutRule{"attention's output cut by heads, weights and values alike",
		fmt.Sprintf("(%[1]s (%[2]s 1 d ?a) (%[2]s 1 d ?b)) => (%[2]s 1 d (%[1]s ?a ?b))", rules.NameAttnMix, rules.NamePartition)}
	// lookupBatchRule is an embedding lookup's data parallelism: the
	// indices cut by batch, the table copied.
	lookupBatchRule = layoutRule{"a lookup's indices cut over data-parallel replicas, its table copied",
		fmt.Sprintf("(%[1]s (%[2]s 0 d ?a) (%[3]s d ?b)) => (%[2]s 0 d (%[1]s ?a ?b))", rules.NameEmbedding, rules.NamePartition, rules.NameReplicate)}
	// batchNormChannelRule is batch normalisation's channel cut, the only
	// cut its statistics allow.
	batchNormChannelRule = layoutRule{"a batch normalisation's channels cut, each normalised on its own",
		fmt.Sprintf("(%[1]s (%[2]s 1 d ?a)) => (%[2]s 1 d (%[1]s ?a))", rules.NameBatchNorm, rules.NamePartition)}
	// followRules are the element-wise operators proved to keep a cut,
	// by the registry's name
	followRules = map[string]layoutRule{
		rules.NameRelu: {"relu keeps its input's cut",
			fmt.Sprintf("(%[1]s (%[2]s 2 d ?a)) => (%[2]s 2 d (%[1]s ?a))", rules.NameRelu, rules.NamePartition)},
		rules.NameEwadd: {"an addition of two inputs cut alike is cut alike",
			fmt.Sprintf("(%[1]s (%[2]s 2 d ?a) (%[2]s 2 d ?b)) => (%[2]s 2 d (%[1]s ?a ?b))", rules.NameEwadd, rules.NamePartition)},
	}
)

// convRules are a convolution's batch and output-channel cuts, at its
// parameters: the version proves them one parameter set at a time, as
// generated (stride 1, same padding), so a convolution of another stride
// or padding finds none.
func convRules(a rules.ConvAttrs) (batch, channel layoutRule) {
	conv := a.Term()
	batch = layoutRule{"a convolution's images cut over data-parallel replicas, its kernel copied",
		fmt.Sprintf("(%[1]s (%[2]s 0 d ?a) (%[3]s d ?b)) => (%[2]s 0 d (%[1]s ?a ?b))", conv, rules.NamePartition, rules.NameReplicate)}
	channel = layoutRule{"a convolution's output channels cut, its input copied",
		fmt.Sprintf("(%[1]s (%[3]s d ?a) (%[2]s 0 d ?b)) => (%[2]s 1 d (%[1]s ?a ?b))", conv, rules.NamePartition, rules.NameReplicate)}
	return batch, channel
}

// Substitutions are the rules of the pinned version the joint search may
// apply, by the layout they justify; a nil field is a layout the version
// does not prove.
type Substitutions struct {
	Version            string
	Batch, Column, Row *AppliedRule
	// Fuse is the product's fusion with a following relu.
	Fuse *AppliedRule
	// Follow are the element-wise operators' rules, by registry name.
	Follow map[string]*AppliedRule
	// ConvBatch and ConvChannel are the convolutions' batch and
	// output-channel cuts, by their parameters.
	ConvBatch, ConvChannel map[rules.ConvAttrs]*AppliedRule
	// AttnSoftmax and AttnMix are the attention's heads cut.
	AttnSoftmax, AttnMix *AppliedRule
	// LookupBatch is a lookup's data parallelism.
	LookupBatch *AppliedRule
	// BatchNormChannel is batch normalisation's channel cut.
	BatchNormChannel *AppliedRule
	parallel         int
}

// AppliedRule is a rule of the pinned version, as the plan cites it.
type AppliedRule struct {
	What string `json:"what"`
	// ID is the store's rule id (0 from a bundle); Hash its content hash.
	ID   int64  `json:"id,omitempty"`
	Hash string `json:"hash"`
	Rule string `json:"rule"`
	// Operators is how many of the plan's operators the rule lays out.
	Operators int `json:"operators"`
}

// NewSubstitutions finds the layouts' rules in a version, as canonical
// texts (either orientation).
func NewSubstitutions(v *version.Set) (*Substitutions, error) {
	s := &Substitutions{Version: v.Describe(), parallel: v.ParallelRules(), Follow: map[string]*AppliedRule{}}
	find := func(lr layoutRule) (*AppliedRule, error) {
		r, err := rules.ParseRule(rules.All(), lr.text)
		if err != nil {
			return nil, fmt.Errorf("the joint search's rule %q: %w", lr.text, err)
		}
		_, canon := r.Oriented()
		i := slices.Index(v.Texts, canon.String())
		if i < 0 {
			return nil, nil
		}
		a := &AppliedRule{What: lr.what, Hash: v.RuleHashes[i], Rule: v.Texts[i]}
		if v.IDs != nil {
			a.ID = v.IDs[i]
		}
		return a, nil
	}
	var err error
	for _, f := range []struct {
		rule layoutRule
		dst  **AppliedRule
	}{{batchRule, &s.Batch}, {columnRule, &s.Column}, {rowRule, &s.Row}, {fuseRule, &s.Fuse},
		{attnSoftmaxRule, &s.AttnSoftmax}, {attnMixRule, &s.AttnMix}, {lookupBatchRule, &s.LookupBatch},
		{batchNormChannelRule, &s.BatchNormChannel}} {
		if *f.dst, err = find(f.rule); err != nil {
			return nil, err
		}
	}
	s.ConvBatch, s.ConvChannel = map[rules.ConvAttrs]*AppliedRule{}, map[rules.ConvAttrs]*AppliedRule{}
	for _, a := range rules.UngroupedConvs() {
		batch, channel := convRules(a)
		for _, f := range []struct {
			rule layoutRule
			dst  map[rules.ConvAttrs]*AppliedRule
		}{{batch, s.ConvBatch}, {channel, s.ConvChannel}} {
			found, err := find(f.rule)
			if err != nil {
				return nil, err
			}
			if found != nil {
				f.dst[a] = found
			}
		}
	}
	for name, lr := range followRules {
		a, err := find(lr)
		if err != nil {
			return nil, err
		}
		if a != nil {
			s.Follow[name] = a
		}
	}
	return s, nil
}

// searchable reports whether the joint search can run: a version is
// pinned and holds parallel rules.
func (s *Substitutions) searchable() bool { return s != nil && s.parallel > 0 }

// why says why the joint search cannot run.
func (s *Substitutions) why() string {
	if s == nil {
		return "it applies the rules of a pinned version; name one with --rules TAG"
	}
	return s.Version + " has no parallel rules to search with"
}

// allows reports whether the version proves the rule behind op's layout
// l: a linear product's column or row cut, or a convolution's
// output-channel cut at its parameters (its input-channel cut has no rule
// yet). Other layouts move no product's data (gathering is the registry's
// combine, all-reducing its reduce and replicate) or are cited as
// unproved (Citations).
func (s *Substitutions) allows(op training.Op, l OpLayout) bool {
	linear := op.Product != nil && op.Product.Linear
	switch l.Style {
	case Colwise:
		return linear && s.Column != nil || s.convRule(s.ConvChannel, op) != nil
	case Rowwise:
		return linear && s.Row != nil
	}
	return true
}

// convRule is op's rule in byParams, if op is a convolution the version
// has one for.
func (s *Substitutions) convRule(byParams map[rules.ConvAttrs]*AppliedRule, op training.Op) *AppliedRule {
	if op.Product == nil || op.Product.Conv == nil {
		return nil
	}
	return byParams[*op.Product.Conv]
}

// allowAll reports whether the version proves every layout's rule (any
// layout without a version: the family is not searched then).
func (s *Substitutions) allowAll(g *training.Graph, ls []OpLayout) bool {
	if s == nil {
		return true
	}
	for i, l := range ls {
		if !s.allows(g.Ops[i], l) {
			return false
		}
	}
	return true
}

// Citations is what the chosen joint plan rests on: each rule applied,
// with the operators it lays out, and by operator type the layouts no
// proved rule covers yet (the registry has no operator for them) and
// those that compute another function than one device would.
type Citations struct {
	Version  string         `json:"version"`
	Applied  []AppliedRule  `json:"applied"`
	Unproved map[string]int `json:"unproved,omitempty"`
	// Changed are layouts no rule can prove, because they change the
	// result: by operator type, what changes.
	Changed map[string]int `json:"changed,omitempty"`
}

// batchNormType is ONNX's batch normalisation, which a training export
// keeps (an inference export folds it into the convolution before it).
const batchNormType = "BatchNormalization"

// ghostBatchNorm is why a batch cut of a batch normalisation is not an
// identity.
const ghostBatchNorm = batchNormType + " (batch cut: each replica normalises by its own part of the batch, as DDP does without SyncBatchNorm)"

// cite counts the rules r's layouts apply to g's operators.
func (s *Substitutions) cite(g *training.Graph, r *Result) *Citations {
	c := &Citations{Version: s.Version, Unproved: map[string]int{}, Changed: map[string]int{}}
	count := map[*AppliedRule]int{}
	heads := s.headsRules(g)
	for i, l := range r.Layouts {
		op := g.Ops[i]
		if r.Strategy.DP > 1 && op.Lookup && op.ParamBytes > 0 {
			// the registry's embedding takes indices of rank 1, as DLRM's are
			if s.LookupBatch != nil && len(g.ValueShape(op.Inputs[1])) == 1 {
				count[s.LookupBatch]++
			} else {
				c.Unproved[op.Type+" (indices cut)"]++
			}
		}
		if r.Strategy.DP > 1 && op.Type == batchNormType {
			c.Changed[ghostBatchNorm]++
		}
		if r.Strategy.DP > 1 && op.Product != nil && op.ParamBytes > 0 {
			switch conv := s.convRule(s.ConvBatch, op); {
			case op.Product.Linear && s.Batch != nil:
				count[s.Batch]++
			case conv != nil:
				count[conv]++
			default:
				c.Unproved[op.Type+" (rows cut)"]++
			}
		}
		switch {
		case l.Fused:
			count[s.Fuse]++
		case l.Style == Colwise && l.Groups > 1:
			// a packed projection's blocks cut alike: the column rule
			// after a permutation the rulebook has no operator for
			c.Unproved[op.Type+" (packed, cut by heads)"]++
		case l.Style == Colwise && op.Product != nil && !op.Product.Linear:
			if a := s.convRule(s.ConvChannel, op); a != nil {
				count[a]++
			} else {
				c.Unproved[op.Type+" (channels cut)"]++
			}
		case l.Style == Colwise:
			count[s.Column]++
		case l.Style == Rowwise:
			count[s.Row]++
		case l.Style == Sharded && l.Axis == 1 && l.Groups <= 1 && heads[i] != nil:
			count[heads[i]]++
		case l.Style == Sharded && op.Type == batchNormType:
			switch {
			case l.Axis != 1:
				c.Changed[fmt.Sprintf("%s (axis %d cut: each piece normalises by its own statistics)", op.Type, l.Axis)]++
			case s.BatchNormChannel != nil:
				count[s.BatchNormChannel]++
			default:
				c.Unproved[op.Type+" (channels cut)"]++
			}
		case l.Style == Sharded:
			if a := s.Follow[registryName(op.Type)]; a != nil {
				count[a]++
			} else {
				c.Unproved[op.Type]++
			}
		}
	}
	applied := []*AppliedRule{s.Batch, s.Column, s.Row, s.Fuse, s.AttnSoftmax, s.AttnMix, s.LookupBatch, s.BatchNormChannel}
	for _, name := range slices.Sorted(maps.Keys(s.Follow)) {
		applied = append(applied, s.Follow[name])
	}
	for _, a := range rules.UngroupedConvs() {
		applied = append(applied, s.ConvBatch[a], s.ConvChannel[a])
	}
	for _, a := range applied {
		if a != nil && count[a] > 0 {
			cp := *a
			cp.Operators = count[a]
			c.Applied = append(c.Applied, cp)
		}
	}
	return c
}

// headsRules are the version's rules for the attention groups' operators
// when cut along the heads (axis 1 of [B, H, S, D]), by operator: the
// product by V is attn_mix, the scores' product and the softmax
// attn_softmax. The scale, mask and dropout between them are element-wise
// (cited as such); a version without the rules gives none.
func (s *Substitutions) headsRules(g *training.Graph) map[int]*AppliedRule {
	out := map[int]*AppliedRule{}
	for _, a := range g.Attentions() {
		last := a.Ops[len(a.Ops)-1]
		if len(g.ValueShape(g.Ops[last].Outputs[0])) != 4 {
			continue
		}
		out[last] = s.AttnMix
		for _, i := range a.Ops[:len(a.Ops)-1] {
			if i == a.Ops[0] || g.Ops[i].Type == "Softmax" {
				out[i] = s.AttnSoftmax
			}
		}
	}
	return out
}

// registryName is the registry's operator for an ONNX operator type, or
// "" where it has none.
func registryName(onnxType string) string {
	if op, ok := rules.All().LookupONNX(onnxType); ok {
		return op.Name
	}
	return ""
}

// Write prints the citations under the comparison.
func (c *Citations) Write(w io.Writer) error {
	fmt.Fprintf(w, "joint plan's substitutions, from %s:\n", c.Version)
	for _, a := range c.Applied {
		id := "rule " + a.Hash[:12]
		if a.ID > 0 {
			id = fmt.Sprintf("rule %d", a.ID)
		}
		fmt.Fprintf(w, "  %s × %d operators: %s\n    %s\n", id, a.Operators, a.What, a.Rule)
	}
	if len(c.Unproved) > 0 {
		types := make([]string, 0, len(c.Unproved))
		for t := range c.Unproved {
			types = append(types, t)
		}
		sort.Strings(types)
		fmt.Fprintf(w, "  laid out by the planner's own rules, no proved rule yet:")
		for _, t := range types {
			fmt.Fprintf(w, " %s ×%d", t, c.Unproved[t])
		}
		fmt.Fprintln(w)
	}
	for _, t := range slices.Sorted(maps.Keys(c.Changed)) {
		fmt.Fprintf(w, "  not the one-device function, so no rule can prove it: %s ×%d\n", t, c.Changed[t])
	}
	return nil
}
