package model

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/sparsetune/sparsetune/features"
	"github.com/sparsetune/sparsetune/hetero"
	"github.com/sparsetune/sparsetune/model/onnxpb"
)

// TestViewPacked: the bytes packTrees writes read back as the same
// ensemble, scoring as the node arrays do, and each way a byte can
// break the layout's rules is refused with an error saying which rule,
// before anything is scored.
func TestViewPacked(t *testing.T) {
	_, tr := treesGCN(t, TreeOptions{Rounds: 20, Depth: 4})
	tr.pack()
	if tr.packed == nil {
		t.Fatal("not packed")
	}
	good := tr.packed.all
	k := len(tr.Classes)
	p, err := viewPacked(slices.Clone(good), k, features.Count, true)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for range 200 {
		x := make([]float64, features.Count)
		for f := range x {
			x[f] = 4 * rng.Float64()
		}
		want := tr.Probs(x)
		if got := p.Probs(x); !slices.Equal(got, want) {
			t.Fatalf("viewed layout: probabilities %v, the trees' %v", got, want)
		}
	}

	le := binary.LittleEndian
	baseLen := (4*k + 7) &^ 7
	nTrees := len(tr.Roots)
	node := func(i int) int { return packedHeader + baseLen + 8*nTrees + 8*i }
	tree := func(j int) int { return packedHeader + baseLen + 8*j }
	// The first inner node and the first leaf of tree 1.
	first := int(le.Uint32(good[tree(1):]))
	leaf := first
	for le.Uint64(good[node(leaf):])>>32&0xff != leafFeature {
		leaf++
	}
	for _, c := range []struct {
		name string
		edit func(b []byte) []byte
		want string
	}{
		{"magic", func(b []byte) []byte { b[0] = 'x'; return b }, "no header"},
		{"short", func(b []byte) []byte { return b[:10] }, "no header"},
		{"classes", func(b []byte) []byte { le.PutUint32(b[4:], uint32(k+1)); return b }, "classes, the head has"},
		{"cut", func(b []byte) []byte { return b[:len(b)-8] }, "bytes for"},
		{"pad", func(b []byte) []byte { b[20] = 1; return b }, "bytes for"},
		{"no trees", func(b []byte) []byte {
			le.PutUint32(b[8:], 0)
			le.PutUint32(b[12:], uint32((len(b)-packedHeader-baseLen)/8))
			return b
		}, "0 trees"},
		{"depth", func(b []byte) []byte { le.PutUint32(b[16:], maxPackedDepth+1); return b }, "depth"},
		{"base", func(b []byte) []byte { le.PutUint32(b[packedHeader:], math.Float32bits(float32(math.NaN()))); return b }, "starts at"},
		{"tree order", func(b []byte) []byte { le.PutUint32(b[tree(1):], 0); return b }, "tree 0: nodes"},
		{"tree class", func(b []byte) []byte { le.PutUint32(b[tree(1)+4:], uint32(k)); return b }, "class"},
		{"child", func(b []byte) []byte { b[node(first)+5]++; return b }, "children from"},
		{"feature", func(b []byte) []byte { b[node(first)+4] = byte(features.Count); return b }, "feature"},
		{"shallower", func(b []byte) []byte { le.PutUint32(b[16:], le.Uint32(b[16:])-1); return b }, "at depth"},
		{"leaf child", func(b []byte) []byte { b[node(leaf)+5]++; return b }, "leaf"},
		{"leaf value", func(b []byte) []byte {
			le.PutUint32(b[node(leaf):], math.Float32bits(float32(math.Inf(1))))
			return b
		}, "leaf"},
		{"inner as leaf", func(b []byte) []byte { b[node(first)+4] = leafFeature; return b }, "leaf"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := viewPacked(c.edit(slices.Clone(good)), k, features.Count, true)
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "packed trees: ") {
				t.Errorf("error %v, want one saying %q", err, c.want)
			}
		})
	}
}

// FuzzViewPacked: whatever the bytes, viewPacked refuses them or returns
// an ensemble that scores any features to probabilities, without a panic
// or an endless walk.
func FuzzViewPacked(f *testing.F) {
	_, tr := treesGCN(f, TreeOptions{Rounds: 4, Depth: 3})
	tr.pack()
	f.Add(tr.packed.all)
	deep := &Trees{Classes: []string{"a", "b"}, Base: []float32{0, 0}, Roots: []int32{0}, RootClass: []int32{1}}
	// One tree deeper than maxFixedDepth, walked leaf by leaf.
	for d := range maxFixedDepth + 2 {
		i := int32(len(deep.Feature))
		deep.Feature = append(deep.Feature, int32(d%features.Count), -1)
		deep.Threshold = append(deep.Threshold, float32(d), 0)
		deep.Value = append(deep.Value, 0, float32(d))
		deep.Left = append(deep.Left, i+1, -1)
		deep.Right = append(deep.Right, i+2, -1)
	}
	deep.Feature = append(deep.Feature, -1)
	deep.Threshold, deep.Value = append(deep.Threshold, 0), append(deep.Value, 9)
	deep.Left, deep.Right = append(deep.Left, -1), append(deep.Right, -1)
	if err := deep.Check(features.Count); err != nil {
		f.Fatal(err)
	}
	deep.pack()
	if deep.packed == nil || deep.packed.depth <= maxFixedDepth {
		f.Fatal("the deep ensemble was not packed as such")
	}
	f.Add(deep.packed.all)
	f.Fuzz(func(t *testing.T, b []byte) {
		k := 2
		if len(b) >= 8 {
			k = int(binary.LittleEndian.Uint32(b[4:]) % 64)
		}
		p, err := viewPacked(b, k, features.Count, true)
		if err != nil {
			return
		}
		x := make([]float64, features.Count)
		for _, v := range []float64{0, 1, -1, math.Inf(1), math.NaN()} {
			for i := range x {
				x[i] = v * float64(i)
			}
			sum := 0.0
			for _, q := range p.Probs(x) {
				sum += q
			}
			if !(math.Abs(sum-1) < 1e-9) && !math.IsNaN(sum) {
				t.Fatalf("probabilities sum to %g", sum)
			}
		}
	})
}

// TestPackedTreesInModelFile: an exported file carries its trees packed,
// and a prediction its trees answer reads them where they lie, with the
// trees' probabilities, leaving the graph unread until the network runs;
// a file without a checksum has them checked against their node at load;
// bytes not where the metadata says, packed trees that differ from their
// node, and damaged packed bytes in a sealed file are each refused with
// an error naming the file, and a sealed file whose graph is broken
// still answers from its packed trees and fails where the graph is
// needed.
func TestPackedTreesInModelFile(t *testing.T) {
	g, tr := treesGCN(t, TreeOptions{Rounds: 20, Depth: 4})
	data, err := g.ExportONNX()
	if err != nil {
		t.Fatal(err)
	}
	s := familySummary(t)
	cpu := hetero.Info{Name: "cpu", Kind: hetero.CPU}
	v, _ := s.Global(hetero.SpTTM, 0)
	want := rank(tr.Classes, tr.Probs(v[:]))

	m, err := ParseONNX("sealed.onnx", data)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(m.Info.PackedTrees, []string{"cpu"}) {
		t.Fatalf("packed trees %v, want [cpu]", m.Info.PackedTrees)
	}
	p := GCNPredictor{Model: m}
	pr, err := p.PredictDevice(s, hetero.SpTTM, 0, cpu)
	if err != nil || pr.By != "boosted" || !reflect.DeepEqual(pr.Formats, want) {
		t.Fatalf("prediction from the packed trees: %v, by %q, %v; the trees give %v", err, pr.By, pr.Formats, want)
	}
	if m.prog != nil || m.Info.Weights != 0 {
		t.Error("a prediction the trees answered read the graph")
	}
	p.Class = "gpu"
	if _, err := p.PredictSummary(s, hetero.SpTTM, 0, hetero.GPU); err != nil || m.prog == nil || m.Info.Weights == 0 {
		t.Errorf("the network's head: %v; the graph read: %v", err, m.prog != nil)
	}

	// Without its checksum (the bytes before it, as they are).
	body := data[:m.Info.body]
	if u, err := ParseONNX("unsealed.onnx", body); err != nil || u.Info.Sealed || u.prog == nil {
		t.Errorf("the file without its checksum: %v", err)
	}
	packed := m.Info.trees.heads["cpu"].packed
	at := bytes.Index(body, packed) // where the layout starts in the file
	if at < 0 {
		t.Fatal("the packed trees are not in the file's bytes")
	}
	// A threshold of the packed trees changed: the node says otherwise.
	edited := slices.Clone(body)
	node := at + packedHeader + (4*len(tr.Classes)+7)&^7 + 8*len(tr.Roots)
	edited[node] ^= 1
	if _, err := ParseONNX("edited.onnx", edited); err == nil || !strings.Contains(err.Error(), "initializer trees_packed_cpu: the packed trees differ from node trees_cpu") || !strings.HasPrefix(err.Error(), "model edited.onnx: ") {
		t.Errorf("unsealed file with edited packed trees: %v", err)
	}
	// Written again by protobuf with a longer doc string: every offset
	// after it moves.
	var mp onnxpb.ModelProto
	if err := proto.Unmarshal(body, &mp); err != nil {
		t.Fatal(err)
	}
	mp.DocString = proto.String(mp.GetDocString() + ", edited")
	moved, err := proto.Marshal(&mp)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ParseONNX("moved.onnx", moved); err == nil || !strings.Contains(err.Error(), "initializer trees_packed_cpu is not where metadata sparsetune.packed_trees says") {
		t.Errorf("file written again: %v", err)
	}
	// Sealed with damaged packed trees: the load does not read them; the
	// head's first prediction does, and refuses them.
	damaged := slices.Clone(body)
	damaged[node+5] ^= 0x10 // a child index
	dm, err := ParseONNX("damaged.onnx", seal(damaged))
	if err != nil {
		t.Fatalf("sealed file with damaged packed trees: %v, want them left for their first use", err)
	}
	if _, err := (GCNPredictor{Model: dm}).PredictDevice(s, hetero.SpTTM, 0, cpu); err == nil || !strings.Contains(err.Error(), "head cpu: packed trees: ") || !strings.HasPrefix(err.Error(), "model damaged.onnx: ") {
		t.Errorf("prediction from damaged packed trees: %v", err)
	}
	if err := dm.Check(); err == nil || !strings.Contains(err.Error(), "packed trees: ") {
		t.Errorf("Check of damaged packed trees: %v", err)
	}
	// Sealed with a broken graph (an input renamed in place): the trees
	// answer; the network and Check say what is wrong.
	broken := slices.Clone(body)
	// The graph's input (GraphProto field 11, a ValueInfoProto whose
	// name comes first), not a node's.
	i := 0
	for {
		k := bytes.Index(broken[i+1:], []byte("\n\x03adj"))
		if k < 0 {
			t.Fatal("no graph input adj")
		}
		if i += k + 1; i >= 2 && broken[i-2] == 11<<3|2 {
			break
		}
	}
	broken[i+4] = 'k'
	bm, err := ParseONNX("broken.onnx", seal(broken))
	if err != nil {
		t.Fatalf("sealed file with a broken graph: %v, want it left for its first use", err)
	}
	bp := GCNPredictor{Model: bm}
	if pr, err := bp.PredictDevice(s, hetero.SpTTM, 0, cpu); err != nil || !reflect.DeepEqual(pr.Formats, want) {
		t.Errorf("the trees of a file with a broken graph: %v", err)
	}
	bp.Class = "gpu"
	const graphErr = `model broken.onnx: graph input 1 is "adk", expected "adj"`
	if _, err := bp.PredictSummary(s, hetero.SpTTM, 0, hetero.GPU); err == nil || err.Error() != graphErr {
		t.Errorf("the network of a file with a broken graph: %v, want %q", err, graphErr)
	}
	if err := bm.Check(); err == nil || err.Error() != graphErr {
		t.Errorf("Check of a file with a broken graph: %v, want %q", err, graphErr)
	}
}
