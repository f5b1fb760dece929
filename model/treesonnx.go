package model

import (
	"fmt"
	"slices"
	"strings"

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
// the network's runtimes never see it (stripTrees).
const (
	mlDomain       = "ai.onnx.ml"
	mlOpsetVersion = 3
	treesOpType    = "TreeEnsembleClassifier"
	// metaTreeHeads (optional) lists the heads answered by trees.
	metaTreeHeads = "sparsetune.tree_heads"
)

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
func parseTreesNode(n *onnxpb.NodeProto) (*Trees, error) {
	a := map[string]*onnxpb.AttributeProto{}
	for _, at := range n.Attribute {
		a[at.GetName()] = at
	}
	if pt := a["post_transform"]; pt == nil || string(pt.S) != "SOFTMAX" {
		return nil, fmt.Errorf("node %s: post_transform must be SOFTMAX", n.GetName())
	}
	for _, name := range []string{"base_values", "class_ids", "class_nodeids", "class_treeids", "class_weights", "classlabels_strings",
		"nodes_falsenodeids", "nodes_featureids", "nodes_modes", "nodes_nodeids", "nodes_treeids", "nodes_truenodeids", "nodes_values"} {
		if a[name] == nil {
			return nil, fmt.Errorf("node %s: no attribute %s", n.GetName(), name)
		}
	}
	t := &Trees{Base: slices.Clone(a["base_values"].Floats)}
	for _, c := range a["classlabels_strings"].Strings {
		t.Classes = append(t.Classes, string(c))
	}
	treeIDs, nodeIDs := a["nodes_treeids"].Ints, a["nodes_nodeids"].Ints
	feat, modes, vals := a["nodes_featureids"].Ints, a["nodes_modes"].Strings, a["nodes_values"].Floats
	trueIDs, falseIDs := a["nodes_truenodeids"].Ints, a["nodes_falsenodeids"].Ints
	nn := len(treeIDs)
	if len(nodeIDs) != nn || len(feat) != nn || len(modes) != nn || len(vals) != nn || len(trueIDs) != nn || len(falseIDs) != nn {
		return nil, fmt.Errorf("node %s: node attributes of different lengths", n.GetName())
	}
	root := int32(0)
	for i := range nn {
		if i == 0 || treeIDs[i] != treeIDs[i-1] {
			if treeIDs[i] != int64(len(t.Roots)) || nodeIDs[i] != 0 {
				return nil, fmt.Errorf("node %s: tree %d node %d out of order (trees numbered from 0, each tree's nodes from 0)", n.GetName(), treeIDs[i], nodeIDs[i])
			}
			root = int32(i)
			t.Roots = append(t.Roots, root)
			t.RootClass = append(t.RootClass, -1)
		} else if nodeIDs[i] != int64(i)-int64(root) {
			return nil, fmt.Errorf("node %s: tree %d node %d out of order", n.GetName(), treeIDs[i], nodeIDs[i])
		}
		switch string(modes[i]) {
		case "BRANCH_LEQ":
			if feat[i] >= int64(features.Count) {
				return nil, fmt.Errorf("node %s: tree %d node %d splits on feature %d of %d", n.GetName(), treeIDs[i], nodeIDs[i], feat[i], features.Count)
			}
			t.Feature = append(t.Feature, int32(feat[i]))
			t.Left = append(t.Left, root+int32(trueIDs[i]))
			t.Right = append(t.Right, root+int32(falseIDs[i]))
			if feat[i] < 0 || trueIDs[i] <= 0 || falseIDs[i] <= 0 || trueIDs[i] >= int64(nn) || falseIDs[i] >= int64(nn) {
				return nil, fmt.Errorf("node %s: tree %d node %d: feature %d, children %d and %d", n.GetName(), treeIDs[i], nodeIDs[i], feat[i], trueIDs[i], falseIDs[i])
			}
		case "LEAF":
			t.Feature = append(t.Feature, -1)
			t.Left = append(t.Left, -1)
			t.Right = append(t.Right, -1)
		default:
			return nil, fmt.Errorf("node %s: node mode %q (this reader takes BRANCH_LEQ and LEAF)", n.GetName(), modes[i])
		}
		t.Threshold = append(t.Threshold, vals[i])
		t.Value = append(t.Value, 0)
	}
	cTree, cNode, cID, w := a["class_treeids"].Ints, a["class_nodeids"].Ints, a["class_ids"].Ints, a["class_weights"].Floats
	if len(cNode) != len(cTree) || len(cID) != len(cTree) || len(w) != len(cTree) {
		return nil, fmt.Errorf("node %s: class attributes of different lengths", n.GetName())
	}
	seen := make([]bool, nn)
	for e := range cTree {
		j := cTree[e]
		if j < 0 || j >= int64(len(t.Roots)) {
			return nil, fmt.Errorf("node %s: class weight for tree %d of %d", n.GetName(), j, len(t.Roots))
		}
		i := int64(t.Roots[j]) + cNode[e]
		if cNode[e] < 0 || i >= int64(nn) || treeIDs[i] != j || t.Feature[i] >= 0 || seen[i] {
			return nil, fmt.Errorf("node %s: class weight on tree %d node %d, which is not a leaf weighted once", n.GetName(), j, cNode[e])
		}
		if cID[e] < 0 || cID[e] >= int64(len(t.Classes)) {
			return nil, fmt.Errorf("node %s: class weight of tree %d for class %d of %d", n.GetName(), j, cID[e], len(t.Classes))
		}
		if c := t.RootClass[j]; c >= 0 && int64(c) != cID[e] {
			return nil, fmt.Errorf("node %s: tree %d adds to classes %d and %d (this reader takes one class per tree)", n.GetName(), j, c, cID[e])
		}
		seen[i] = true
		t.RootClass[j] = int32(cID[e])
		t.Value[i] = w[e]
	}
	for i := range nn {
		if t.Feature[i] < 0 && !seen[i] {
			return nil, fmt.Errorf("node %s: tree %d node %d is a leaf with no class weight", n.GetName(), treeIDs[i], nodeIDs[i])
		}
	}
	if err := t.Check(features.Count); err != nil {
		return nil, fmt.Errorf("node %s: %w", n.GetName(), err)
	}
	t.pack()
	return t, nil
}

// stripTrees removes g's tree nodes and their outputs, leaving the
// graph the network's runtimes run. It edits g in place: callers hand it
// a graph parsed for that purpose, so nothing is copied.
func stripTrees(g *onnxpb.GraphProto) {
	g.Node = slices.DeleteFunc(g.Node, func(n *onnxpb.NodeProto) bool { return n.GetDomain() == mlDomain })
	g.Output = slices.DeleteFunc(g.Output, func(vi *onnxpb.ValueInfoProto) bool { return strings.HasPrefix(vi.GetName(), "trees_") })
}

// parseTrees reads the trees of the heads the metadata lists (value of
// metaTreeHeads), checks each against its head's classes, and checks
// that the graph has no other ai.onnx.ml node.
func parseTrees(g *onnxpb.GraphProto, list string, heads []Head) (map[string]*Trees, error) {
	nodes := map[string]*onnxpb.NodeProto{}
	for _, n := range g.Node {
		if n.GetDomain() == mlDomain {
			if n.GetOpType() != treesOpType {
				return nil, fmt.Errorf("node %s: operator %s.%s (the trees are TreeEnsembleClassifier nodes)", n.GetName(), mlDomain, n.GetOpType())
			}
			nodes[n.GetName()] = n
		}
	}
	out := map[string]*Trees{}
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
			if !slices.Equal(n.Input, []string{"global"}) || !slices.Equal(n.Output, []string{treesLabelName(h), treesOutputName(h)}) {
				return nil, fmt.Errorf("node %s: inputs %v and outputs %v, expected [global] and [%s %s]", n.GetName(), n.Input, n.Output, treesLabelName(h), treesOutputName(h))
			}
			t, err := parseTreesNode(n)
			if err != nil {
				return nil, err
			}
			if !slices.Equal(t.Classes, heads[k].Classes) {
				return nil, fmt.Errorf("node %s: classes %v, the head's are %v", n.GetName(), t.Classes, heads[k].Classes)
			}
			out[h] = t
			delete(nodes, n.GetName())
		}
	}
	for name := range nodes {
		return nil, fmt.Errorf("node %s: trees of a head that metadata %s does not list", name, metaTreeHeads)
	}
	return out, nil
}
