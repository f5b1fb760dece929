package model

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/sparsetune/sparsetune/features"
	"github.com/sparsetune/sparsetune/model/onnxpb"
)

// A head answered by trees (GCN.Trees) is stored in the model file as
// ONNX-ML's TreeEnsembleClassifier node on the graph input "global",
// beside the network, with two more graph outputs: the label and the
// probabilities. So any ONNX runtime that has the ai.onnx.ml domain can
// run the trees of a sparsetune model, and onnx's checker checks them.
// This package reads the node back into Trees and evaluates it itself;
// the network's runtimes never see it (splitTrees).
const (
	mlDomain       = "ai.onnx.ml"
	mlOpsetVersion = 3
	treesOpType    = "TreeEnsembleClassifier"
	// metaTreeHeads (optional) lists the heads answered by trees.
	metaTreeHeads = "sparsetune.tree_heads"
	// metaBlendMargins (optional) lists HEAD=MARGIN for the heads with
	// trees that ask their network too when unsure (GCN.BlendMargins).
	metaBlendMargins = "sparsetune.blend_margins"
	// metaPackedTrees (optional) says where the file carries heads'
	// trees packed for scoring (packedTrees) as well as in their nodes:
	// HEAD=OFFSET:LENGTH, in head order, the bytes of the file that are
	// the raw_data of the initializer packedTreesName(HEAD), of type
	// UINT8, which no node reads. A sealed file's trees are scored there,
	// as they lie; the network's runtimes never see the initializers.
	metaPackedTrees   = "sparsetune.packed_trees"
	packedTreesPrefix = "trees_packed_"
)

func packedTreesName(head string) string { return packedTreesPrefix + head }

// formatBlendMargins writes margins as metaBlendMargins holds them, in
// head order.
func formatBlendMargins(margins map[string]float64, heads []Head, trees map[string]*Trees) (string, error) {
	var parts []string
	for _, h := range heads {
		m, ok := margins[h.Name]
		if !ok {
			continue
		}
		if trees[h.Name] == nil {
			return "", fmt.Errorf("head %s has a blend margin and no trees", h.Name)
		}
		if !(m > 0) {
			return "", fmt.Errorf("head %s: blend margin %g, expected a positive number or +Inf", h.Name, m)
		}
		parts = append(parts, h.Name+"="+strconv.FormatFloat(m, 'g', -1, 64))
	}
	if len(parts) != len(margins) {
		return "", fmt.Errorf("blend margins for %d heads, of which %d are heads of the model", len(margins), len(parts))
	}
	return strings.Join(parts, ","), nil
}

// parseBlendMargins reads the value of metaBlendMargins: each head must
// have trees, each margin be positive (+Inf allowed).
func parseBlendMargins(v string, treeHeads []string) (map[string]float64, error) {
	if v == "" {
		return nil, nil
	}
	out := map[string]float64{}
	for _, part := range strings.Split(v, ",") {
		h, ms, ok := strings.Cut(part, "=")
		m, err := strconv.ParseFloat(ms, 64)
		switch {
		case !ok || err != nil || !(m > 0):
			return nil, fmt.Errorf("metadata %s: %q, expected HEAD=MARGIN with a positive margin", metaBlendMargins, part)
		case !slices.Contains(treeHeads, h):
			return nil, fmt.Errorf("metadata %s names %q, which has no trees", metaBlendMargins, h)
		}
		if _, dup := out[h]; dup {
			return nil, fmt.Errorf("metadata %s names %q twice", metaBlendMargins, h)
		}
		out[h] = m
	}
	return out, nil
}

func treesNodeName(head string) string   { return "trees_" + head }
func treesLabelName(head string) string  { return "trees_label_" + head }
func treesOutputName(head string) string { return "trees_probs_" + head }

// treesNode returns t as a TreeEnsembleClassifier node reading "global"
// and the value infos of its two outputs. Node ids count from 0 in each
// tree; a leaf carries one class weight, its value.
func treesNode(head string, t *Trees) (*onnxpb.NodeProto, []*onnxpb.ValueInfoProto) {
	var treeIDs, nodeIDs, featIDs, trueIDs, falseIDs, cTree, cNode, cID []int64
	var modes [][]byte
	var values, weights []float32
	for j, root := range t.Roots {
		end := int32(len(t.Feature))
		if j+1 < len(t.Roots) {
			end = t.Roots[j+1]
		}
		for i := root; i < end; i++ {
			treeIDs = append(treeIDs, int64(j))
			nodeIDs = append(nodeIDs, int64(i-root))
			if f := t.Feature[i]; f >= 0 {
				featIDs = append(featIDs, int64(f))
				modes = append(modes, []byte("BRANCH_LEQ"))
				values = append(values, t.Threshold[i])
				trueIDs = append(trueIDs, int64(t.Left[i]-root))
				falseIDs = append(falseIDs, int64(t.Right[i]-root))
				continue
			}
			featIDs = append(featIDs, 0)
			modes = append(modes, []byte("LEAF"))
			values = append(values, 0)
			trueIDs = append(trueIDs, 0)
			falseIDs = append(falseIDs, 0)
			cTree = append(cTree, int64(j))
			cNode = append(cNode, int64(i-root))
			cID = append(cID, int64(t.RootClass[j]))
			weights = append(weights, t.Value[i])
		}
	}
	var labels [][]byte
	for _, c := range t.Classes {
		labels = append(labels, []byte(c))
	}
	ints := func(name string, v []int64) *onnxpb.AttributeProto {
		return &onnxpb.AttributeProto{Name: proto.String(name), Type: onnxpb.AttributeProto_INTS.Enum(), Ints: v}
	}
	floats := func(name string, v []float32) *onnxpb.AttributeProto {
		return &onnxpb.AttributeProto{Name: proto.String(name), Type: onnxpb.AttributeProto_FLOATS.Enum(), Floats: v}
	}
	strs := func(name string, v [][]byte) *onnxpb.AttributeProto {
		return &onnxpb.AttributeProto{Name: proto.String(name), Type: onnxpb.AttributeProto_STRINGS.Enum(), Strings: v}
	}
	node := &onnxpb.NodeProto{
		Name: proto.String(treesNodeName(head)), OpType: proto.String(treesOpType), Domain: proto.String(mlDomain),
		Input: []string{"global"}, Output: []string{treesLabelName(head), treesOutputName(head)},
		Attribute: []*onnxpb.AttributeProto{
			floats("base_values", slices.Clone(t.Base)),
			ints("class_ids", cID),
			ints("class_nodeids", cNode),
			ints("class_treeids", cTree),
			floats("class_weights", weights),
			strs("classlabels_strings", labels),
			ints("nodes_falsenodeids", falseIDs),
			ints("nodes_featureids", featIDs),
			strs("nodes_modes", modes),
			ints("nodes_nodeids", nodeIDs),
			ints("nodes_treeids", treeIDs),
			ints("nodes_truenodeids", trueIDs),
			floats("nodes_values", values),
			{Name: proto.String("post_transform"), Type: onnxpb.AttributeProto_STRING.Enum(), S: []byte("SOFTMAX")},
		},
	}
	label := &onnxpb.ValueInfoProto{Name: proto.String(treesLabelName(head)), Type: &onnxpb.TypeProto{Value: &onnxpb.TypeProto_TensorType{
		TensorType: &onnxpb.TypeProto_Tensor{ElemType: proto.Int32(int32(onnxpb.TensorProto_STRING)),
			Shape: &onnxpb.TensorShapeProto{Dim: []*onnxpb.TensorShapeProto_Dimension{{Value: &onnxpb.TensorShapeProto_Dimension_DimValue{DimValue: 1}}}}}}}}
	probs := &onnxpb.ValueInfoProto{Name: proto.String(treesOutputName(head)), Type: tensorType(1, len(t.Classes))}
	return node, []*onnxpb.ValueInfoProto{label, probs}
}

// parseTreesNode reads a TreeEnsembleClassifier node as treesNode writes
// it: every tree's nodes in id order from 0, children after their parent,
// each leaf with one class weight and all of a tree's leaves adding to
// one class, softmax applied. Anything else is refused with an error
// naming what differs, not read approximately.
func parseTreesNode(n *mlNode) (*Trees, error) {
	a := n.attrs
	if pt := a["post_transform"]; pt == nil || string(pt.s) != "SOFTMAX" {
		return nil, fmt.Errorf("node %s: post_transform must be SOFTMAX", n.name)
	}
	for _, name := range []string{"base_values", "class_ids", "class_nodeids", "class_treeids", "class_weights", "classlabels_strings",
		"nodes_falsenodeids", "nodes_featureids", "nodes_modes", "nodes_nodeids", "nodes_treeids", "nodes_truenodeids", "nodes_values"} {
		if a[name] == nil {
			return nil, fmt.Errorf("node %s: no attribute %s", n.name, name)
		}
	}
	t := &Trees{Base: a["base_values"].floats}
	for i := range a["classlabels_strings"].spans {
		t.Classes = append(t.Classes, string(a["classlabels_strings"].str(i)))
	}
	treeIDs, nodeIDs := a["nodes_treeids"].ints, a["nodes_nodeids"].ints
	feat, modes, vals := a["nodes_featureids"].ints, a["nodes_modes"], a["nodes_values"].floats
	trueIDs, falseIDs := a["nodes_truenodeids"].ints, a["nodes_falsenodeids"].ints
	nn := len(treeIDs)
	if len(nodeIDs) != nn || len(feat) != nn || len(modes.spans) != nn || len(vals) != nn || len(trueIDs) != nn || len(falseIDs) != nn {
		return nil, fmt.Errorf("node %s: node attributes of different lengths", n.name)
	}
	t.Feature, t.Threshold, t.Value = make([]int32, 0, nn), make([]float32, 0, nn), make([]float32, 0, nn)
	t.Left, t.Right = make([]int32, 0, nn), make([]int32, 0, nn)
	root := int32(0)
	for i := range nn {
		if i == 0 || treeIDs[i] != treeIDs[i-1] {
			if int(treeIDs[i]) != len(t.Roots) || nodeIDs[i] != 0 {
				return nil, fmt.Errorf("node %s: tree %d node %d out of order (trees numbered from 0, each tree's nodes from 0)", n.name, treeIDs[i], nodeIDs[i])
			}
			root = int32(i)
			t.Roots = append(t.Roots, root)
			t.RootClass = append(t.RootClass, -1)
		} else if int(nodeIDs[i]) != i-int(root) {
			return nil, fmt.Errorf("node %s: tree %d node %d out of order", n.name, treeIDs[i], nodeIDs[i])
		}
		switch string(modes.str(i)) {
		case "BRANCH_LEQ":
			if int(feat[i]) >= features.Count {
				return nil, fmt.Errorf("node %s: tree %d node %d splits on feature %d of %d", n.name, treeIDs[i], nodeIDs[i], feat[i], features.Count)
			}
			t.Feature = append(t.Feature, feat[i])
			t.Left = append(t.Left, root+trueIDs[i])
			t.Right = append(t.Right, root+falseIDs[i])
			if feat[i] < 0 || trueIDs[i] <= 0 || falseIDs[i] <= 0 || int(trueIDs[i]) >= nn || int(falseIDs[i]) >= nn {
				return nil, fmt.Errorf("node %s: tree %d node %d: feature %d, children %d and %d", n.name, treeIDs[i], nodeIDs[i], feat[i], trueIDs[i], falseIDs[i])
			}
		case "LEAF":
			t.Feature = append(t.Feature, -1)
			t.Left = append(t.Left, -1)
			t.Right = append(t.Right, -1)
		default:
			return nil, fmt.Errorf("node %s: node mode %q (this reader takes BRANCH_LEQ and LEAF)", n.name, modes.str(i))
		}
		t.Threshold = append(t.Threshold, vals[i])
		t.Value = append(t.Value, 0)
	}
	cTree, cNode, cID, w := a["class_treeids"].ints, a["class_nodeids"].ints, a["class_ids"].ints, a["class_weights"].floats
	if len(cNode) != len(cTree) || len(cID) != len(cTree) || len(w) != len(cTree) {
		return nil, fmt.Errorf("node %s: class attributes of different lengths", n.name)
	}
	seen := make([]bool, nn)
	for e := range cTree {
		j := cTree[e]
		if j < 0 || int(j) >= len(t.Roots) {
			return nil, fmt.Errorf("node %s: class weight for tree %d of %d", n.name, j, len(t.Roots))
		}
		i := int(t.Roots[j]) + int(cNode[e])
		if cNode[e] < 0 || i >= nn || treeIDs[i] != j || t.Feature[i] >= 0 || seen[i] {
			return nil, fmt.Errorf("node %s: class weight on tree %d node %d, which is not a leaf weighted once", n.name, j, cNode[e])
		}
		if cID[e] < 0 || int(cID[e]) >= len(t.Classes) {
			return nil, fmt.Errorf("node %s: class weight of tree %d for class %d of %d", n.name, j, cID[e], len(t.Classes))
		}
		if c := t.RootClass[j]; c >= 0 && c != cID[e] {
			return nil, fmt.Errorf("node %s: tree %d adds to classes %d and %d (this reader takes one class per tree)", n.name, j, c, cID[e])
		}
		seen[i] = true
		t.RootClass[j] = cID[e]
		t.Value[i] = w[e]
	}
	for i := range nn {
		if t.Feature[i] < 0 && !seen[i] {
			return nil, fmt.Errorf("node %s: tree %d node %d is a leaf with no class weight", n.name, treeIDs[i], nodeIDs[i])
		}
	}
	if err := t.Check(features.Count); err != nil {
		return nil, fmt.Errorf("node %s: %w", n.name, err)
	}
	t.pack()
	return t, nil
}

// treeSet are a model file's trees by head (Info.Trees).
type treeSet struct {
	mu    sync.Mutex // held by AllTrees
	heads map[string]*headTrees
	order []string // the heads as metaTreeHeads lists them
	// graph reads the file's graph (ONNXModel.graph), which gives each
	// head its node's bytes; nil for a file whose graph was read at
	// load.
	graph func() error
	// trusted says that the file is part of the executable (parseONNX):
	// its packed trees are scored without being checked first.
	trusted bool
}

// headTrees are one head's trees in a model file: its node, read when
// first asked for (Info.Trees), and the same trees packed for scoring
// when the file carries them (metaPackedTrees), used where they lie. A
// file of the expected shape but with trees this reader refuses (a
// hand-edited node) then fails at that head's first prediction, with
// the same error a load that reads every head would give.
type headTrees struct {
	set     *treeSet
	name    string
	classes []string // the head's

	once sync.Once
	raw  []byte // the node's bytes (parseNodes), until read
	t    *Trees
	err  error

	packed   []byte // the packed layout's bytes in the file, or nil
	viewOnce sync.Once
	view     *packedTrees
	viewErr  error
}

// get returns the head's trees, reading the file's graph first if it
// has not been.
func (h *headTrees) get() (*Trees, error) {
	if h.set.graph != nil {
		if err := h.set.graph(); err != nil {
			return nil, err
		}
	}
	h.once.Do(h.read)
	return h.t, h.err
}

// read parses the head's node, once (get).
func (h *headTrees) read() {
	n, err := decodeMLNode(h.raw, true)
	if err == nil {
		h.t, err = parseTreesNode(n)
	}
	if err == nil && !slices.Equal(h.t.Classes, h.classes) {
		h.t, err = nil, fmt.Errorf("node %s: classes %v, the head's are %v", n.name, h.t.Classes, h.classes)
	}
	h.err, h.raw = err, nil
}

// treeScorer is what a prediction needs of a head's trees.
type treeScorer interface {
	Probs(x []float64) []float64
}

// scorer returns the head's trees as a prediction scores them: their
// packed bytes where the file lies, checked once (viewPacked), when it
// carries them, else the trees read from their node. The packed trees of
// a trusted file, an embedded model, are not checked: reading all of
// them took 200-400 µs of a one-shot command's first decision, for bytes
// the tests check whole (TestEmbeddedModelsWhole).
func (h *headTrees) scorer() (treeScorer, error) {
	if h.packed == nil {
		t, err := h.get()
		if err != nil {
			return nil, err
		}
		return t, nil
	}
	h.viewOnce.Do(func() { h.view, h.viewErr = viewPacked(h.packed, len(h.classes), features.Count, !h.set.trusted) })
	if h.viewErr != nil {
		return nil, fmt.Errorf("head %s: %w", h.name, h.viewErr)
	}
	return h.view, nil
}

// treeHeads returns the trees of the heads that the value of
// metaTreeHeads lists, each of them a head that does not defer to the
// rule, none read yet.
func treeHeads(list string, heads []Head, ruleHeads []string) (*treeSet, error) {
	set := &treeSet{heads: map[string]*headTrees{}}
	if list == "" {
		return set, nil
	}
	for _, h := range strings.Split(list, ",") {
		k := slices.IndexFunc(heads, func(x Head) bool { return x.Name == h })
		switch {
		case k < 0:
			return nil, fmt.Errorf("metadata %s names %q, which is not a head (%s)", metaTreeHeads, h, strings.Join(headNames(heads), ","))
		case slices.Contains(ruleHeads, h):
			return nil, fmt.Errorf("head %s is listed both in %s and in %s", h, metaRuleHeads, metaTreeHeads)
		case set.heads[h] != nil:
			return nil, fmt.Errorf("metadata %s names %q twice", metaTreeHeads, h)
		}
		set.heads[h] = &headTrees{set: set, name: h, classes: heads[k].Classes}
		set.order = append(set.order, h)
	}
	return set, nil
}

// locatePacked reads the value of metaPackedTrees, HEAD=OFFSET:LENGTH
// for heads with trees, and gives each its bytes of data (the file
// before its checksum).
func (s *treeSet) locatePacked(v string, data []byte) error {
	if v == "" {
		return nil
	}
	for _, part := range strings.Split(v, ",") {
		h, where, _ := strings.Cut(part, "=")
		offs, lens, _ := strings.Cut(where, ":")
		off, err1 := strconv.ParseUint(offs, 10, 31)
		n, err2 := strconv.ParseUint(lens, 10, 31)
		ht := s.heads[h]
		switch {
		case err1 != nil || err2 != nil || off+n > uint64(len(data)):
			return fmt.Errorf("metadata %s: %q, expected HEAD=OFFSET:LENGTH inside the file's %d bytes", metaPackedTrees, part, len(data))
		case ht == nil:
			return fmt.Errorf("metadata %s names %q, which has no trees", metaPackedTrees, h)
		case ht.packed != nil:
			return fmt.Errorf("metadata %s names %q twice", metaPackedTrees, h)
		}
		ht.packed = data[off : off+n : off+n]
	}
	return nil
}

// parseNodes checks the ai.onnx.ml nodes and packed trees splitTrees cut
// out of a model file against the heads the metadata lists as answered
// by trees: each such head has one TreeEnsembleClassifier node on the
// input "global" with its two outputs, there is no other ai.onnx.ml
// node, the outputs cut out are exactly the trees' two per head, and
// each packed initializer is where metaPackedTrees says, for a head it
// names. Each head's node is read by headTrees.get.
//
// With all, every head's trees are read now, one goroutine each: that is
// most of a file's load (74,176 tree nodes in the embedded MTTKRP file),
// and errors are reported as a reading in head order would; and each
// head's packed bytes must be what packTrees makes of its node. Without
// it (a sealed file, whose bytes are the writer's), a process reads only
// the heads it predicts with.
func (s *treeSet) parseNodes(raw [][]byte, outputs []string, packed map[string][]byte, all bool) error {
	nodes := map[string]*mlNode{}
	raws := map[string][]byte{}
	for _, b := range raw {
		n, err := decodeMLNode(b, false)
		if err != nil {
			return err
		}
		if n.opType != treesOpType {
			return fmt.Errorf("node %s: operator %s.%s (the trees are TreeEnsembleClassifier nodes)", n.name, mlDomain, n.opType)
		}
		nodes[n.name], raws[n.name] = n, b
	}
	var want []string
	for _, h := range s.order {
		n := nodes[treesNodeName(h)]
		if n == nil {
			return fmt.Errorf("metadata %s names %q, but the graph has no node %s", metaTreeHeads, h, treesNodeName(h))
		}
		if !slices.Equal(n.input, []string{"global"}) || !slices.Equal(n.output, []string{treesLabelName(h), treesOutputName(h)}) {
			return fmt.Errorf("node %s: inputs %v and outputs %v, expected [global] and [%s %s]", n.name, n.input, n.output, treesLabelName(h), treesOutputName(h))
		}
		s.heads[h].raw = raws[n.name]
		delete(nodes, n.name)
		want = append(want, treesLabelName(h), treesOutputName(h))
	}
	for name := range nodes {
		return fmt.Errorf("node %s: trees of a head that metadata %s does not list", name, metaTreeHeads)
	}
	if !slices.Equal(outputs, want) {
		return fmt.Errorf("graph outputs %v for the trees, expected %v", outputs, want)
	}
	for name, b := range packed {
		h, _ := strings.CutPrefix(name, packedTreesPrefix)
		ht := s.heads[h]
		if ht == nil || ht.packed == nil {
			return fmt.Errorf("initializer %s: packed trees of a head that metadata %s does not list", name, metaPackedTrees)
		}
		if len(b) != len(ht.packed) || len(b) > 0 && &b[0] != &ht.packed[0] {
			return fmt.Errorf("initializer %s is not where metadata %s says", name, metaPackedTrees)
		}
	}
	for _, h := range s.order {
		if s.heads[h].packed != nil && packed[packedTreesName(h)] == nil {
			return fmt.Errorf("metadata %s names %q, but the graph has no initializer %s", metaPackedTrees, h, packedTreesName(h))
		}
	}
	if !all {
		return nil
	}
	var wg sync.WaitGroup
	for _, h := range s.heads {
		wg.Go(func() { h.once.Do(h.read) })
	}
	wg.Wait()
	for _, h := range s.order {
		ht := s.heads[h]
		if ht.err != nil {
			return ht.err
		}
		if ht.packed == nil {
			continue
		}
		// read packed the node's trees (parseTreesNode).
		if p := ht.t.packed; p == nil || !bytes.Equal(p.all, ht.packed) {
			return fmt.Errorf("initializer %s: the packed trees differ from node %s", packedTreesName(h), treesNodeName(h))
		}
	}
	return nil
}

// The tree nodes are read straight from the file's bytes rather than
// through the generated protobuf types: the generated decoder appends a
// repeated scalar the file writes unpacked one element at a time and
// allocates every node's mode string, which made reading the embedded
// MTTKRP model (34,098 tree nodes) take 10 ms instead of 0.5. splitTrees
// cuts the tree nodes and their outputs out of the file, so protobuf
// decodes only the network (and onnx-go is given exactly that), and
// decodeMLNode decodes each tree node into slices sized once.

// Field numbers of onnx.proto used below.
const (
	fieldModelGraph    = 7  // ModelProto.graph
	fieldGraphNode     = 1  // GraphProto.node
	fieldGraphOutput   = 12 // GraphProto.output
	fieldGraphInit     = 5  // GraphProto.initializer
	fieldTensorDims    = 1  // TensorProto.dims
	fieldTensorType    = 2  // TensorProto.data_type
	fieldTensorName    = 8  // TensorProto.name
	fieldTensorRaw     = 9  // TensorProto.raw_data
	fieldTensorDoc     = 12 // TensorProto.doc_string
	fieldValueInfoName = 1  // ValueInfoProto.name
	fieldNodeInput     = 1  // NodeProto.input
	fieldNodeOutput    = 2  // NodeProto.output
	fieldNodeName      = 3  // NodeProto.name
	fieldNodeOpType    = 4  // NodeProto.op_type
	fieldNodeAttribute = 5  // NodeProto.attribute
	fieldNodeDomain    = 7  // NodeProto.domain
	fieldAttrName      = 1  // AttributeProto.name
	fieldAttrS         = 4  // AttributeProto.s
	fieldAttrFloats    = 7  // AttributeProto.floats
	fieldAttrInts      = 8  // AttributeProto.ints
	fieldAttrStrings   = 9  // AttributeProto.strings
)

// mlNode is an ai.onnx.ml node as decodeMLNode reads it. Byte slices
// alias the file.
type mlNode struct {
	name, opType  string
	input, output []string
	attrs         map[string]*mlAttr
}

// mlAttr is the part of an AttributeProto a tree node uses. Its strings
// are spans of raw, the attribute's bytes, rather than slices: a tree
// node's modes are 30,000 strings, and slices, holding pointers, would be
// scanned by the garbage collector.
type mlAttr struct {
	s      []byte
	ints   []int32 // int64 values saturated to int32: ids and counts are small
	floats []float32
	raw    []byte
	spans  []span
}

type span struct{ off, end int32 }

// str returns string i of a.
func (a *mlAttr) str(i int) []byte { return a.raw[a.spans[i].off:a.spans[i].end] }

// forEachField calls f with each field of the message b, its wire type
// and its value's bytes (for a varint or fixed field, the encoded
// value), stopping at the first error.
func forEachField(b []byte, f func(num protowire.Number, typ protowire.Type, v []byte) error) error {
	return forEachRawField(b, func(num protowire.Number, typ protowire.Type, v, _ []byte) error { return f(num, typ, v) })
}

// forEachRawField is forEachField that also gives f the field's bytes
// whole, tag and length included, a slice of b.
func forEachRawField(b []byte, f func(num protowire.Number, typ protowire.Type, v, raw []byte) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		m := protowire.ConsumeFieldValue(num, typ, b[n:])
		if m < 0 {
			return protowire.ParseError(m)
		}
		v := b[n : n+m]
		if typ == protowire.BytesType {
			var k int
			v, k = protowire.ConsumeBytes(v)
			if k < 0 {
				return protowire.ParseError(k)
			}
		}
		if err := f(num, typ, v, b[:n+m]); err != nil {
			return err
		}
		b = b[n+m:]
	}
	return nil
}

// splitTrees returns the model file data without its ai.onnx.ml nodes,
// without the graph outputs whose names start with "trees_" and without
// the packed trees' initializers; the nodes it removed, undecoded; the
// names of the outputs it removed; and the packed trees by initializer
// name, their raw_data as slices of data. A file with none of them comes
// back as it is, not copied. Fields other than those are copied byte for
// byte, in order.
func splitTrees(data []byte) (network []byte, nodes [][]byte, outputs []string, packed map[string][]byte, err error) {
	// Each graph field's kept fields, as raw byte ranges of its value,
	// and their length: the file is then copied once, into a buffer of
	// its final size (grown by appends, the copy was most of a load).
	type graph struct {
		kept [][]byte
		size int
	}
	var graphs []*graph
	removed := false
	size := 0 // of the network
	err = forEachRawField(data, func(num protowire.Number, typ protowire.Type, v, raw []byte) error {
		if num != fieldModelGraph || typ != protowire.BytesType {
			size += len(raw)
			return nil
		}
		g := &graph{}
		graphs = append(graphs, g)
		err := forEachRawField(v, func(num protowire.Number, typ protowire.Type, fv, field []byte) error {
			if typ == protowire.BytesType && num == fieldGraphNode {
				domain, err := stringField(fv, fieldNodeDomain)
				if err != nil {
					return err
				}
				if domain == mlDomain {
					nodes, removed = append(nodes, fv), true
					return nil
				}
			}
			if typ == protowire.BytesType && num == fieldGraphOutput {
				name, err := stringField(fv, fieldValueInfoName)
				if err != nil {
					return err
				}
				if strings.HasPrefix(name, "trees_") {
					outputs, removed = append(outputs, name), true
					return nil
				}
			}
			if typ == protowire.BytesType && num == fieldGraphInit {
				name, err := stringField(fv, fieldTensorName)
				if err != nil {
					return err
				}
				if strings.HasPrefix(name, packedTreesPrefix) {
					if packed[name] != nil {
						return fmt.Errorf("two initializers %s", name)
					}
					raw, err := bytesField(fv, fieldTensorRaw)
					if err != nil {
						return err
					}
					if packed == nil {
						packed = map[string][]byte{}
					}
					packed[name], removed = raw[:len(raw):len(raw)], true
					return nil
				}
			}
			g.kept = append(g.kept, field)
			g.size += len(field)
			return nil
		})
		size += protowire.SizeTag(num) + protowire.SizeVarint(uint64(g.size)) + g.size
		return err
	})
	if err != nil || !removed {
		return data, nil, nil, nil, err
	}
	k := 0
	network = make([]byte, 0, size)
	err = forEachField(data, func(num protowire.Number, typ protowire.Type, v []byte) error {
		network = protowire.AppendTag(network, num, typ)
		switch {
		case num == fieldModelGraph && typ == protowire.BytesType:
			g := graphs[k]
			k++
			network = protowire.AppendVarint(network, uint64(g.size))
			for _, f := range g.kept {
				network = append(network, f...)
			}
		case typ == protowire.BytesType:
			network = protowire.AppendBytes(network, v)
		default:
			network = append(network, v...)
		}
		return nil
	})
	return network, nodes, outputs, packed, err
}

// packableHeads returns the heads, of those given, whose trees pack
// (packTrees), and their packed layouts.
func packableHeads(heads []string, trees map[string]*Trees) ([]string, []*packedTrees) {
	var names []string
	var packs []*packedTrees
	for _, h := range heads {
		t := trees[h]
		t.pack()
		if t.packed != nil {
			names, packs = append(names, h), append(packs, t.packed)
		}
	}
	return names, packs
}

// withPackedTrees returns the model file data (a file without a
// checksum or packed trees) with each head's packed trees (heads and
// packs side by side) added as a UINT8 initializer at the end of its
// graph, and metaPackedTrees saying where their bytes lie appended to
// its metadata. Nothing else changes: the fields before and after the
// graph, and the graph's own, are copied byte for byte.
func withPackedTrees(data []byte, heads []string, packs []*packedTrees) ([]byte, error) {
	if len(heads) == 0 {
		return data, nil
	}
	start, end := -1, -1 // of the graph field, tag included
	var graph []byte
	err := forEachRawField(data, func(num protowire.Number, typ protowire.Type, v, raw []byte) error {
		if num != fieldModelGraph || typ != protowire.BytesType {
			return nil
		}
		if start >= 0 {
			return errors.New("two graphs")
		}
		start = cap(data) - cap(raw)
		end, graph = start+len(raw), v
		return nil
	})
	if err != nil {
		return nil, err
	}
	if start < 0 {
		return nil, errors.New("no graph")
	}
	// The initializers, and where in them each layout starts.
	var inits []byte
	at := make([]int, len(heads))
	for k, h := range heads {
		b := packs[k].all
		var t []byte
		t = protowire.AppendTag(t, fieldTensorDims, protowire.VarintType)
		t = protowire.AppendVarint(t, uint64(len(b)))
		t = protowire.AppendTag(t, fieldTensorType, protowire.VarintType)
		t = protowire.AppendVarint(t, uint64(onnxpb.TensorProto_UINT8))
		t = protowire.AppendTag(t, fieldTensorName, protowire.BytesType)
		t = protowire.AppendString(t, packedTreesName(h))
		t = protowire.AppendTag(t, fieldTensorRaw, protowire.BytesType)
		t = protowire.AppendVarint(t, uint64(len(b)))
		rawAt := len(t)
		t = append(t, b...)
		t = protowire.AppendTag(t, fieldTensorDoc, protowire.BytesType)
		t = protowire.AppendString(t, "sparsetune: the trees of node "+treesNodeName(h)+" laid out for scoring (metadata "+metaPackedTrees+"); no node reads it")
		inits = protowire.AppendTag(inits, fieldGraphInit, protowire.BytesType)
		inits = protowire.AppendVarint(inits, uint64(len(t)))
		at[k] = len(inits) + rawAt
		inits = append(inits, t...)
	}
	out := make([]byte, 0, len(data)+len(inits)+64*len(heads)+64)
	out = append(out, data[:start]...)
	out = protowire.AppendTag(out, fieldModelGraph, protowire.BytesType)
	out = protowire.AppendVarint(out, uint64(len(graph)+len(inits)))
	out = append(out, graph...)
	base := len(out)
	out = append(out, inits...)
	out = append(out, data[end:]...)
	parts := make([]string, len(heads))
	for k, h := range heads {
		parts[k] = fmt.Sprintf("%s=%d:%d", h, base+at[k], len(packs[k].all))
	}
	return appendMetadata(out, metaPackedTrees, strings.Join(parts, ",")), nil
}

// stringField returns the last value of the string field num of message
// b, as protobuf reads a repeated scalar field into a singular one.
func stringField(b []byte, num protowire.Number) (string, error) {
	v, err := bytesField(b, num)
	return string(v), err
}

// bytesField returns the last value of the bytes field num of message b,
// a slice of b.
func bytesField(b []byte, num protowire.Number) ([]byte, error) {
	var last []byte
	err := forEachField(b, func(n protowire.Number, typ protowire.Type, v []byte) error {
		if n == num && typ == protowire.BytesType {
			last = v
		}
		return nil
	})
	return last, err
}

// decodeMLNode decodes a NodeProto's name, op type, inputs, outputs and,
// withAttrs, attributes (a node is first checked by its header, and its
// attributes, most of its bytes, are read when needed). A repeated int or float attribute may be packed or not, as
// protobuf requires of a reader; a field of the wrong wire type is an
// error.
func decodeMLNode(b []byte, withAttrs bool) (*mlNode, error) {
	n := &mlNode{attrs: map[string]*mlAttr{}}
	err := forEachField(b, func(num protowire.Number, typ protowire.Type, v []byte) error {
		if typ != protowire.BytesType {
			return nil
		}
		switch num {
		case fieldNodeInput:
			n.input = append(n.input, string(v))
		case fieldNodeOutput:
			n.output = append(n.output, string(v))
		case fieldNodeName:
			n.name = string(v)
		case fieldNodeOpType:
			n.opType = string(v)
		case fieldNodeAttribute:
			if !withAttrs {
				return nil
			}
			name, a, err := decodeMLAttr(v)
			if err != nil {
				return fmt.Errorf("attribute %w", err)
			}
			n.attrs[name] = a
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("node %s: %w", n.name, err)
	}
	return n, nil
}

func decodeMLAttr(b []byte) (string, *mlAttr, error) {
	// A list written unpacked has a field per element: 300,000 of them in
	// the embedded MTTKRP model. So the loop reads one-byte tags and
	// varints itself, and a list is allocated at its first element,
	// large enough for the rest of the attribute (an unpacked int takes
	// at least 2 bytes, a float 5).
	var name string
	a := &mlAttr{raw: b}
	for len(b) > 0 {
		var num protowire.Number
		var typ protowire.Type
		if c := b[0]; c < 0x80 {
			num, typ = protowire.Number(c>>3), protowire.Type(c&7)
			b = b[1:]
		} else {
			var n int
			if num, typ, n = protowire.ConsumeTag(b); n < 0 {
				return "", nil, fmt.Errorf("%s: %w", name, protowire.ParseError(n))
			}
			b = b[n:]
		}
		switch {
		case num == fieldAttrInts && typ == protowire.VarintType:
			x, m := uvarint(b)
			if m < 0 {
				return "", nil, fmt.Errorf("%s: ints: %w", name, protowire.ParseError(m))
			}
			if a.ints == nil {
				a.ints = make([]int32, 0, len(b)/2+1)
			}
			a.ints = append(a.ints, saturate32(x))
			b = b[m:]
			continue
		case num == fieldAttrFloats && typ == protowire.Fixed32Type:
			if len(b) < 4 {
				return "", nil, fmt.Errorf("%s: floats: %w", name, protowire.ParseError(-1))
			}
			if a.floats == nil {
				a.floats = make([]float32, 0, len(b)/5+1)
			}
			a.floats = append(a.floats, math.Float32frombits(binary.LittleEndian.Uint32(b)))
			b = b[4:]
			continue
		case typ != protowire.BytesType:
			if num == fieldAttrName || num == fieldAttrS || num == fieldAttrStrings || num == fieldAttrInts || num == fieldAttrFloats {
				return "", nil, fmt.Errorf("%s: field %d has wire type %d", name, num, typ)
			}
			m := protowire.ConsumeFieldValue(num, typ, b)
			if m < 0 {
				return "", nil, fmt.Errorf("%s: %w", name, protowire.ParseError(m))
			}
			b = b[m:]
			continue
		}
		v, m := protowire.ConsumeBytes(b)
		if m < 0 {
			return "", nil, fmt.Errorf("%s: %w", name, protowire.ParseError(m))
		}
		b = b[m:]
		switch num {
		case fieldAttrName:
			name = string(v)
		case fieldAttrS:
			a.s = v
		case fieldAttrStrings:
			if a.spans == nil {
				a.spans = make([]span, 0, len(b)/3+1)
			}
			end := len(a.raw) - len(b)
			a.spans = append(a.spans, span{int32(end - len(v)), int32(end)})
		case fieldAttrInts:
			if a.ints == nil {
				// One value per byte below 0x80 (a varint's last).
				n := 0
				for _, c := range v {
					n += int(^c >> 7)
				}
				a.ints = make([]int32, 0, n)
			}
			// Ids and counts take one or two bytes: those are read
			// inline, by index (the loop is a quarter of a load).
			for i := 0; i < len(v); {
				c := v[i]
				if c < 0x80 {
					a.ints = append(a.ints, int32(c))
					i++
					continue
				}
				if i+1 < len(v) && v[i+1] < 0x80 {
					a.ints = append(a.ints, int32(c&0x7f)|int32(v[i+1])<<7)
					i += 2
					continue
				}
				x, k := protowire.ConsumeVarint(v[i:])
				if k < 0 {
					return "", nil, fmt.Errorf("%s: ints: %w", name, protowire.ParseError(k))
				}
				a.ints = append(a.ints, saturate32(x))
				i += k
			}
		case fieldAttrFloats:
			if len(v)%4 != 0 {
				return "", nil, fmt.Errorf("%s: floats: packed length %d is not a multiple of 4", name, len(v))
			}
			if a.floats == nil {
				a.floats = make([]float32, 0, len(v)/4)
			}
			for ; len(v) > 0; v = v[4:] {
				a.floats = append(a.floats, math.Float32frombits(binary.LittleEndian.Uint32(v)))
			}
		}
	}
	return name, a, nil
}

// saturate32 returns the int64 varint x as an int32, saturated: a value
// out of int32's range fails the same range checks its saturated value
// does.
func saturate32(x uint64) int32 {
	return int32(min(max(int64(x), math.MinInt32), math.MaxInt32))
}

// uvarint is protowire.ConsumeVarint with the one-byte case inline: tree
// ids are mostly under 128.
func uvarint(b []byte) (uint64, int) {
	if len(b) > 0 && b[0] < 0x80 {
		return uint64(b[0]), 1
	}
	return protowire.ConsumeVarint(b)
}
