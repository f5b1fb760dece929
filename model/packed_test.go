package model

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/sparsetune/sparsetune/features"
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
	p, err := viewPacked(slices.Clone(good), k, features.Count)
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
			_, err := viewPacked(c.edit(slices.Clone(good)), k, features.Count)
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
		p, err := viewPacked(b, k, features.Count)
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
