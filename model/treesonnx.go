package model

import (
	"encoding/binary"
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
)

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
}

// headTrees are one head's trees in a model file, read from the node's
// bytes when first asked for (Info.Trees). A file of the expected shape
// but with trees this reader refuses (a hand-edited node) then fails at
// that head's first prediction, with the same error a load that reads
// every head would give.
type headTrees struct {
	once    sync.Once
	raw     []byte   // the node's bytes, until read
	classes []string // the head's
	t       *Trees
	err     error
}

func (h *headTrees) get() (*Trees, error) {
	h.once.Do(func() {
		n, err := decodeMLNode(h.raw, true)
		if err == nil {
			h.t, err = parseTreesNode(n)
		}
		if err == nil && !slices.Equal(h.t.Classes, h.classes) {
			h.t, err = nil, fmt.Errorf("node %s: classes %v, the head's are %v", n.name, h.t.Classes, h.classes)
		}
		h.err, h.raw = err, nil
	})
	return h.t, h.err
}

// parseTrees checks the ai.onnx.ml nodes splitTrees cut out of a model
// file against the heads the metadata lists as answered by trees (value
// of metaTreeHeads): each such head has one TreeEnsembleClassifier node
// on the input "global" with its two outputs, there is no other
// ai.onnx.ml node, and the outputs cut out are exactly the trees' two per
// head. Each head's trees are read by headTrees.get.
//
// With all, every head's trees are read now, one goroutine each: that is
// most of a file's load (74,176 tree nodes in the embedded MTTKRP file),
// and errors are reported as a reading in head order would. Without it
// (a sealed file, whose bytes are the writer's), a process reads only the
// heads it predicts with.
func parseTrees(raw [][]byte, outputs []string, list string, heads []Head, all bool) (map[string]*headTrees, error) {
	nodes := map[string]*mlNode{}
	raws := map[string][]byte{}
	for _, b := range raw {
		n, err := decodeMLNode(b, false)
		if err != nil {
			return nil, err
		}
		if n.opType != treesOpType {
			return nil, fmt.Errorf("node %s: operator %s.%s (the trees are TreeEnsembleClassifier nodes)", n.name, mlDomain, n.opType)
		}
		nodes[n.name], raws[n.name] = n, b
	}
	out := map[string]*headTrees{}
	var want, order []string
	if list != "" {
		for _, h := range strings.Split(list, ",") {
			k := slices.IndexFunc(heads, func(x Head) bool { return x.Name == h })
			if k < 0 {
				return nil, fmt.Errorf("metadata %s names %q, which is not a head (%s)", metaTreeHeads, h, strings.Join(headNames(heads), ","))
			}
			n := nodes[treesNodeName(h)]
			if n == nil {
				return nil, fmt.Errorf("metadata %s names %q, but the graph has no node %s", metaTreeHeads, h, treesNodeName(h))
			}
			if !slices.Equal(n.input, []string{"global"}) || !slices.Equal(n.output, []string{treesLabelName(h), treesOutputName(h)}) {
				return nil, fmt.Errorf("node %s: inputs %v and outputs %v, expected [global] and [%s %s]", n.name, n.input, n.output, treesLabelName(h), treesOutputName(h))
			}
			out[h] = &headTrees{raw: raws[n.name], classes: heads[k].Classes}
			order = append(order, h)
			delete(nodes, n.name)
			want = append(want, treesLabelName(h), treesOutputName(h))
		}
	}
	for name := range nodes {
		return nil, fmt.Errorf("node %s: trees of a head that metadata %s does not list", name, metaTreeHeads)
	}
	if !slices.Equal(outputs, want) {
		return nil, fmt.Errorf("graph outputs %v for the trees, expected %v", outputs, want)
	}
	if all {
		var wg sync.WaitGroup
		for _, h := range out {
			wg.Go(func() { h.get() })
		}
		wg.Wait()
		for _, h := range order {
			if _, err := out[h].get(); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
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

// splitTrees returns the model file data without its ai.onnx.ml nodes
// and without the graph outputs whose names start with "trees_", the
// nodes it removed, undecoded, and the names of the outputs it removed.
// A file with neither comes back as it is, not copied. Fields other than
// those are copied byte for byte, in order.
func splitTrees(data []byte) (network []byte, nodes [][]byte, outputs []string, err error) {
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
			g.kept = append(g.kept, field)
			g.size += len(field)
			return nil
		})
		size += protowire.SizeTag(num) + protowire.SizeVarint(uint64(g.size)) + g.size
		return err
	})
	if err != nil || !removed {
		return data, nil, nil, err
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
	return network, nodes, outputs, err
}

// stringField returns the last value of the string field num of message
// b, as protobuf reads a repeated scalar field into a singular one.
func stringField(b []byte, num protowire.Number) (string, error) {
	var s string
	err := forEachField(b, func(n protowire.Number, typ protowire.Type, v []byte) error {
		if n == num && typ == protowire.BytesType {
			s = string(v)
		}
		return nil
	})
	return s, err
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
