package model

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"google.golang.org/protobuf/proto"

	"github.com/sparsetune/sparsetune/features"
	"github.com/sparsetune/sparsetune/graphenc"
	"github.com/sparsetune/sparsetune/model/onnxpb"
)

// FormatVersion is the version of sparsetune's model files: the inputs,
// outputs and metadata this package writes and expects. A file of another
// version is refused.
const FormatVersion = 1

// The ONNX versions the export targets: those Debian 12's ONNX 1.12
// checker accepts (IR <= 8, opset <= 17) and onnx-go v0.5.0 runs.
const (
	irVersion    = 8
	opsetVersion = 13
)

// Metadata keys of a model file.
const (
	metaVersion      = "sparsetune.format_version"
	metaOp           = "sparsetune.op"
	metaBudget       = "sparsetune.budget"
	metaHidden       = "sparsetune.hidden"
	metaMLP          = "sparsetune.mlp"
	metaHeads        = "sparsetune.heads"
	metaClasses      = "sparsetune.classes." // + head name
	metaFeatures     = "sparsetune.features"
	metaNodeFeatures = "sparsetune.node_features"
	metaMean         = "sparsetune.feature_mean"
	metaStd          = "sparsetune.feature_std"
	metaTrainMin     = "sparsetune.train_min"
	metaTrainMax     = "sparsetune.train_max"
	// metaRuleHeads (optional) lists the heads for which evaluation did
	// not find the network's picks faster than the hand rule's: a
	// prediction for them is the rule's (GCN.RuleHeads).
	metaRuleHeads = "sparsetune.rule_heads"
	// metaCPUInnerLoops (optional) lists the inner loops of the builds
	// that measured the cpu head's labels (GCN.CPUInnerLoops).
	metaCPUInnerLoops = "sparsetune.cpu_inner_loops"
	// metaCPUModels + a cpu head's name (optional) lists the processors
	// whose times trained that head (GCN.CPUModels), cpuModelSep between
	// them (a processor's name may hold commas).
	metaCPUModels = "sparsetune.cpu_models."
	cpuModelSep   = "|"
	// metaLabelRanks + a head's name (optional) lists the ranks at which
	// that head's labels were timed (GCN.LabelRanks), comma separated.
	metaLabelRanks = "sparsetune.label_ranks."
	// metaFeatureRevision is features.Revision of the build that
	// trained the model; absent in files written before revision 2,
	// which read as revision 1.
	metaFeatureRevision = "sparsetune.feature_revision"
)

// Input names of a model file, in graph-input order (onnx-go addresses
// inputs by position, so they come first and in this order).
var inputNames = []string{"adj", "row_feat", "col_feat", "row_mask", "col_mask", "global"}

func outputName(head string) string { return "probs_" + head }

// graphBuilder accumulates the nodes and initializers of an ONNX graph.
type graphBuilder struct {
	nodes []*onnxpb.NodeProto
	inits []*onnxpb.TensorProto
	n     int
}

// init adds a float32 constant of the given shape and returns its name.
func (b *graphBuilder) init(name string, dims []int, data []float64) string {
	d := make([]float32, len(data))
	for i, v := range data {
		d[i] = float32(v)
	}
	shape := make([]int64, len(dims))
	for i, v := range dims {
		shape[i] = int64(v)
	}
	b.inits = append(b.inits, &onnxpb.TensorProto{Name: proto.String(name), Dims: shape,
		DataType: proto.Int32(int32(onnxpb.TensorProto_FLOAT)), FloatData: d})
	return name
}

// constant adds a constant filled with v.
func (b *graphBuilder) constant(name string, rows, cols int, v float64) string {
	d := make([]float64, rows*cols)
	for i := range d {
		d[i] = v
	}
	return b.init(name, []int{rows, cols}, d)
}

// op adds a node and returns the name of its output.
func (b *graphBuilder) op(opType string, attrs []*onnxpb.AttributeProto, inputs ...string) string {
	b.n++
	out := fmt.Sprintf("%s_%d", strings.ToLower(opType), b.n)
	b.nodes = append(b.nodes, &onnxpb.NodeProto{Name: proto.String(fmt.Sprintf("n%d", b.n)), OpType: proto.String(opType),
		Input: inputs, Output: []string{out}, Attribute: attrs})
	return out
}

func (b *graphBuilder) matMul(x, y string) string { return b.op("MatMul", nil, x, y) }
func (b *graphBuilder) add(x, y string) string    { return b.op("Add", nil, x, y) }
func (b *graphBuilder) mul(x, y string) string    { return b.op("Mul", nil, x, y) }
func (b *graphBuilder) relu(x string) string      { return b.op("Relu", nil, x) }

// transpose swaps the two axes; onnx-go needs perm spelled out.
func (b *graphBuilder) transpose(x string) string {
	return b.op("Transpose", []*onnxpb.AttributeProto{{Name: proto.String("perm"), Type: onnxpb.AttributeProto_INTS.Enum(), Ints: []int64{1, 0}}}, x)
}

func tensorType(dims ...int) *onnxpb.TypeProto {
	var shape []*onnxpb.TensorShapeProto_Dimension
	for _, d := range dims {
		shape = append(shape, &onnxpb.TensorShapeProto_Dimension{Value: &onnxpb.TensorShapeProto_Dimension_DimValue{DimValue: int64(d)}})
	}
	return &onnxpb.TypeProto{Value: &onnxpb.TypeProto_TensorType{TensorType: &onnxpb.TypeProto_Tensor{
		ElemType: proto.Int32(int32(onnxpb.TensorProto_FLOAT)), Shape: &onnxpb.TensorShapeProto{Dim: shape}}}}
}

// formatFloats writes floats so that parsing them gives the same float64.
func formatFloats(v []float64) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = strconv.FormatFloat(x, 'g', -1, 64)
	}
	return strings.Join(s, ",")
}

// ExportONNX returns the GCN as a standard ONNX model (IR 8, opset 13) of
// fixed shapes, using only operators onnx-go v0.5.0 runs correctly
// (MatMul, Add, Sub, Mul, Relu, Transpose, Concat, Softmax) and no
// broadcasting: biases are stored expanded, masks widened by rank-1
// MatMuls, and the constant scales of the layers folded into the weights.
// The bytes are deterministic, and end in a checksum of the bytes before
// it (seal), which loading checks. Each head's trees are written twice:
// as an ai.onnx.ml node, which other runtimes can run, and packed for
// scoring (metaPackedTrees), which this package reads in place.
func (g *GCN) ExportONNX() ([]byte, error) {
	c := g.Config
	if err := c.validate(); err != nil {
		return nil, err
	}
	layers, heads, n := c.views(g.Params)
	if n != len(g.Params) {
		return nil, fmt.Errorf("export: %d weights for a config that needs %d", len(g.Params), n)
	}
	br, bc, f, h, nf := c.Budget.Rows, c.Budget.Cols, graphenc.NodeFeatures, c.Hidden, features.Count
	fbr, fbc := float64(br), float64(bc)
	nn := fbr + fbc
	b := &graphBuilder{}

	adjT := b.transpose("adj")
	onesH := b.constant("ones_1x_hidden", 1, h, 1)
	onesR, onesC := b.constant("ones_rows_x1", br, 1, 1), b.constant("ones_cols_x1", bc, 1, 1)
	maskR := b.matMul(b.transpose("row_mask"), onesH) // [Br, H]: the mask down each column
	maskC := b.matMul(b.transpose("col_mask"), onesH)

	r, cc := "row_feat", "col_feat"
	var readouts []string
	in := f
	for l, w := range layers {
		p := fmt.Sprintf("layer%d_", l+1)
		scaled := func(m matrix, s float64) []float64 {
			d := make([]float64, len(m.d))
			for i, v := range m.d {
				d[i] = s * v
			}
			return d
		}
		// R·W1r + (1·s − R)·W3/N = R·(W1r − W3/N) + (1·s)·W3/N.
		w1r, w1c := scaled(w.w1r, 1), scaled(w.w1c, 1)
		for i, v := range w.w3.d {
			w1r[i] -= v / nn
			w1c[i] -= v / nn
		}
		w1rN := b.init(p+"w1_rows", []int{in, h}, w1r)
		w1cN := b.init(p+"w1_cols", []int{in, h}, w1c)
		w2r := b.init(p+"w2_for_rows", []int{in, h}, scaled(w.w2, 1/fbc))
		w2c := b.init(p+"w2_for_cols", []int{in, h}, scaled(w.w2, 1/fbr))
		w3 := b.init(p+"w3", []int{in, h}, scaled(w.w3, 1/nn))
		bias := b.init(p+"bias", []int{1, h}, w.b.d)

		ac := b.matMul("adj", cc)
		atr := b.matMul(adjT, r)
		// s is the masked sum of every node's features: the readout of
		// the layer before, when there is one.
		var s string
		if n := len(readouts); n > 0 {
			s = b.add(readouts[n-2], readouts[n-1])
		} else {
			s = b.add(b.matMul("row_mask", r), b.matMul("col_mask", cc))
		}
		// The global term and the bias are the same row for every node:
		// compute it once, [1, H], and spread it down the nodes with a
		// rank-1 product (onnx-go does not broadcast).
		g := b.add(b.matMul(s, w3), bias)
		preR := b.add(b.add(b.matMul(r, w1rN), b.matMul(ac, w2r)), b.matMul(onesR, g))
		preC := b.add(b.add(b.matMul(cc, w1cN), b.matMul(atr, w2c)), b.matMul(onesC, g))
		r, cc = b.mul(b.relu(preR), maskR), b.mul(b.relu(preC), maskC)
		readouts = append(readouts, b.matMul("row_mask", r), b.matMul("col_mask", cc))
		in = h
	}
	invStd := make([]float64, nf)
	for i, s := range g.Std {
		invStd[i] = 1 / s
	}
	gn := b.mul(b.op("Sub", nil, "global", b.init("global_mean", []int{1, nf}, g.Mean[:])), b.init("global_inv_std", []int{1, nf}, invStd))
	z := b.op("Concat", []*onnxpb.AttributeProto{{Name: proto.String("axis"), Type: onnxpb.AttributeProto_INT.Enum(), I: proto.Int64(1)}},
		append(readouts, gn)...)

	var outputs []*onnxpb.ValueInfoProto
	for k, w := range heads {
		hd := c.Heads[k]
		p := "head_" + hd.Name + "_"
		// The readouts' 1/Br and 1/Bc scales are folded into M1's rows.
		m1 := make([]float64, len(w.m1.d))
		copy(m1, w.m1.d)
		for i := range 4 * h {
			s := 1 / fbr
			if (i/h)%2 == 1 {
				s = 1 / fbc
			}
			for j := range c.MLP[0] {
				m1[i*c.MLP[0]+j] *= s
			}
		}
		h1 := b.relu(b.add(b.matMul(z, b.init(p+"m1", []int{w.m1.r, w.m1.c}, m1)), b.init(p+"c1", []int{1, c.MLP[0]}, w.c1.d)))
		h2 := b.relu(b.add(b.matMul(h1, b.init(p+"m2", []int{w.m2.r, w.m2.c}, w.m2.d)), b.init(p+"c2", []int{1, c.MLP[1]}, w.c2.d)))
		logits := b.add(b.matMul(h2, b.init(p+"m3", []int{w.m3.r, w.m3.c}, w.m3.d)), b.init(p+"c3", []int{1, len(hd.Classes)}, w.c3.d))
		b.nodes = append(b.nodes, &onnxpb.NodeProto{Name: proto.String("softmax_" + hd.Name), OpType: proto.String("Softmax"),
			Input: []string{logits}, Output: []string{outputName(hd.Name)},
			Attribute: []*onnxpb.AttributeProto{{Name: proto.String("axis"), Type: onnxpb.AttributeProto_INT.Enum(), I: proto.Int64(1)}}})
		outputs = append(outputs, &onnxpb.ValueInfoProto{Name: proto.String(outputName(hd.Name)), Type: tensorType(1, len(hd.Classes))})
	}

	inputs := []*onnxpb.ValueInfoProto{
		{Name: proto.String("adj"), Type: tensorType(br, bc)},
		{Name: proto.String("row_feat"), Type: tensorType(br, f)},
		{Name: proto.String("col_feat"), Type: tensorType(bc, f)},
		{Name: proto.String("row_mask"), Type: tensorType(1, br)},
		{Name: proto.String("col_mask"), Type: tensorType(1, bc)},
		{Name: proto.String("global"), Type: tensorType(1, nf)},
	}
	var headNames []string
	meta := map[string]string{
		metaVersion:         strconv.Itoa(FormatVersion),
		metaOp:              c.Op,
		metaBudget:          fmt.Sprintf("%dx%d", br, bc),
		metaHidden:          strconv.Itoa(h),
		metaMLP:             fmt.Sprintf("%d,%d", c.MLP[0], c.MLP[1]),
		metaFeatures:        strings.Join(features.Names[:], ","),
		metaFeatureRevision: strconv.Itoa(features.Revision),
		metaNodeFeatures:    strings.Join(graphenc.NodeFeatureNames[:], ","),
		metaMean:            formatFloats(g.Mean[:]),
		metaStd:             formatFloats(g.Std[:]),
		metaTrainMin:        formatFloats(g.TrainMin[:]),
		metaTrainMax:        formatFloats(g.TrainMax[:]),
	}
	for _, hd := range c.Heads {
		headNames = append(headNames, hd.Name)
		meta[metaClasses+hd.Name] = strings.Join(hd.Classes, ",")
	}
	meta[metaHeads] = strings.Join(headNames, ",")
	for _, h := range g.RuleHeads {
		if !slices.Contains(headNames, h) {
			return nil, fmt.Errorf("rule head %q is not one of the heads %s", h, strings.Join(headNames, ","))
		}
	}
	if len(g.RuleHeads) > 0 {
		meta[metaRuleHeads] = strings.Join(g.RuleHeads, ",")
	}
	if len(g.CPUInnerLoops) > 0 {
		meta[metaCPUInnerLoops] = strings.Join(g.CPUInnerLoops, ",")
	}
	for _, h := range headNames { // a cpu head's; rows of other heads may be recorded too
		if models := g.CPUModels[h]; IsCPUHead(h) && len(models) > 0 {
			meta[metaCPUModels+h] = strings.Join(models, cpuModelSep)
		}
	}
	for _, h := range headNames {
		ranks := g.LabelRanks[h]
		if len(ranks) == 0 {
			continue
		}
		if err := checkRanks(ranks); err != nil {
			return nil, fmt.Errorf("label ranks of head %s: %w", h, err)
		}
		meta[metaLabelRanks+h] = joinInts(ranks)
	}
	opsets := []*onnxpb.OperatorSetIdProto{{Domain: proto.String(""), Version: proto.Int64(opsetVersion)}}
	var treeHeads []string
	for _, hd := range c.Heads { // in head order, so the file does not depend on map order
		t := g.Trees[hd.Name]
		if t == nil {
			continue
		}
		if slices.Contains(g.RuleHeads, hd.Name) {
			return nil, fmt.Errorf("head %s defers to the rule and has trees: one answer per head", hd.Name)
		}
		if err := t.Check(nf); err != nil {
			return nil, fmt.Errorf("head %s: %w", hd.Name, err)
		}
		if !slices.Equal(t.Classes, hd.Classes) {
			return nil, fmt.Errorf("head %s: trees of classes %v, the head's are %v", hd.Name, t.Classes, hd.Classes)
		}
		node, outs := treesNode(hd.Name, t)
		b.nodes = append(b.nodes, node)
		outputs = append(outputs, outs...)
		treeHeads = append(treeHeads, hd.Name)
	}
	if len(treeHeads) != len(g.Trees) {
		return nil, fmt.Errorf("trees for %d heads, of which %d are heads of the model", len(g.Trees), len(treeHeads))
	}
	if len(g.BlendMargins) > 0 {
		v, err := formatBlendMargins(g.BlendMargins, c.Heads, g.Trees)
		if err != nil {
			return nil, err
		}
		meta[metaBlendMargins] = v
	}
	if len(treeHeads) > 0 {
		meta[metaTreeHeads] = strings.Join(treeHeads, ",")
		opsets = append(opsets, &onnxpb.OperatorSetIdProto{Domain: proto.String(mlDomain), Version: proto.Int64(mlOpsetVersion)})
	}
	var props []*onnxpb.StringStringEntryProto
	for _, k := range sortedKeys(meta) {
		props = append(props, &onnxpb.StringStringEntryProto{Key: proto.String(k), Value: proto.String(meta[k])})
	}
	m := &onnxpb.ModelProto{
		IrVersion:       proto.Int64(irVersion),
		OpsetImport:     opsets,
		ProducerName:    proto.String("sparsetune"),
		ProducerVersion: proto.String(strconv.Itoa(FormatVersion)),
		DocString:       proto.String("SPT-GCN format predictor for " + c.Op + "; see sparsetune's docs/model.md"),
		ModelVersion:    proto.Int64(FormatVersion),
		MetadataProps:   props,
		Graph: &onnxpb.GraphProto{Name: proto.String("spt_gcn_" + c.Op), Node: b.nodes, Initializer: b.inits,
			Input: inputs, Output: outputs},
	}
	data, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
	if err != nil {
		return nil, err
	}
	names, packs := packableHeads(treeHeads, g.Trees)
	if data, err = withPackedTrees(data, names, packs); err != nil {
		return nil, err
	}
	return seal(data), nil
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// joinInts writes v as comma-separated decimals.
func joinInts(v []int) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, ",")
}
