package model

import (
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/sparsetune/sparsetune/features"
	"github.com/sparsetune/sparsetune/hetero"
	"github.com/sparsetune/sparsetune/model/onnxpb"
)

// treeRows draws n rows of features.Count features and labels them by a
// rule no single split can express: class 0 where f0 + f1 > 1, else class
// 1 where f2 > 0.5, else class 2 (f3 and the rest are noise). Targets
// are one-hot.
func treeRows(rng *rand.Rand, n int) (x, y [][]float64, label []int) {
	for range n {
		v := make([]float64, features.Count)
		for f := range v {
			v[f] = rng.Float64()
		}
		c := 2
		switch {
		case v[0]+v[1] > 1:
			c = 0
		case v[2] > 0.5:
			c = 1
		}
		t := make([]float64, 3)
		t[c] = 1
		x, y, label = append(x, v), append(y, t), append(label, c)
	}
	return x, y, label
}

func treeAccuracy(t *Trees, x [][]float64, label []int) float64 {
	ok := 0
	for i, v := range x {
		p := t.Probs(v)
		if slices.Index(p, slices.Max(p)) == label[i] {
			ok++
		}
	}
	return float64(ok) / float64(len(x))
}

// TestFitTrees: boosting learns a rule of three classes that needs
// several splits, far better than one round does, and is deterministic
// for a seed; probabilities sum to 1; bad options and rows are refused.
func TestFitTrees(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	x, y, _ := treeRows(rng, 3000)
	tx, _, tl := treeRows(rng, 2000)
	classes := []string{"a", "b", "c"}
	one, err := FitTrees(x, y, classes, TreeOptions{Rounds: 1, Depth: 1})
	if err != nil {
		t.Fatal(err)
	}
	tr, err := FitTrees(x, y, classes, TreeOptions{Rounds: 60})
	if err != nil {
		t.Fatal(err)
	}
	a1, a := treeAccuracy(one, tx, tl), treeAccuracy(tr, tx, tl)
	t.Logf("held-out accuracy: one stump %.3f, 60 rounds %.3f (%d nodes)", a1, a, tr.Nodes())
	if a < 0.95 || a1 > 0.8 {
		t.Errorf("held-out accuracy %.3f after 60 rounds (want ≥ 0.95), %.3f after one stump (want < 0.8)", a, a1)
	}
	if err := tr.Check(features.Count); err != nil {
		t.Fatal(err)
	}
	if len(tr.Roots) != 60*3 {
		t.Errorf("%d trees, want one per class and round (180)", len(tr.Roots))
	}
	again, _ := FitTrees(x, y, classes, TreeOptions{Rounds: 60})
	if !slices.Equal(again.Value, tr.Value) || !slices.Equal(again.Threshold, tr.Threshold) {
		t.Error("two fits with one seed differ")
	}
	p := tr.Probs(tx[0])
	if s := p[0] + p[1] + p[2]; math.Abs(s-1) > 1e-9 {
		t.Errorf("probabilities sum to %g", s)
	}
	for _, c := range []struct {
		name string
		o    TreeOptions
		x, y [][]float64
		cl   []string
		want string
	}{
		{"no rows", TreeOptions{}, nil, nil, classes, "no rows"},
		{"one class", TreeOptions{}, x, y, []string{"a"}, "1 classes"},
		{"ragged", TreeOptions{}, append(slices.Clone(x[:2]), x[2][:3]), y[:3], classes, "row 2"},
		{"rate", TreeOptions{Rate: 2}, x, y, classes, "rate"},
		{"depth", TreeOptions{Depth: 40}, x, y, classes, "depth"},
		{"bins", TreeOptions{Bins: 1000}, x, y, classes, "bins"},
	} {
		if _, err := FitTrees(c.x, c.y, c.cl, c.o); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one saying %q", c.name, err, c.want)
		}
	}
}

// TestFitTreesSoftTargets: a soft target spreads probability the way it
// is given: rows whose target is (0.7, 0.3) everywhere get about that.
func TestFitTreesSoftTargets(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var x, y [][]float64
	for range 500 {
		v := make([]float64, 4)
		for f := range v {
			v[f] = rng.Float64()
		}
		x, y = append(x, v), append(y, []float64{0.7, 0.3})
	}
	tr, err := FitTrees(x, y, []string{"a", "b"}, TreeOptions{Rounds: 50})
	if err != nil {
		t.Fatal(err)
	}
	if p := tr.Probs(x[0]); math.Abs(p[0]-0.7) > 0.02 {
		t.Errorf("probabilities %v, want about [0.7 0.3]", p)
	}
}

// treesGCN returns randomGCN with trees fitted (on synthetic rows, with
// options o) for its cpu head.
func treesGCN(t testing.TB, o TreeOptions) (*GCN, *Trees) {
	g := randomGCN(t, 23)
	rng := rand.New(rand.NewPCG(7, 8))
	var x, y [][]float64
	for range 2000 {
		v := make([]float64, features.Count)
		for f := range v {
			v[f] = 4 * rng.Float64()
		}
		c := int(v[1]+v[7]) % 4
		tg := make([]float64, 4)
		tg[c] = 1
		x, y = append(x, v), append(y, tg)
	}
	tr, err := FitTrees(x, y, g.Config.Heads[0].Classes, o)
	if err != nil {
		t.Fatal(err)
	}
	g.Trees = map[string]*Trees{"cpu": tr}
	return g, tr
}

// TestSealedTreesReadWhenNeeded: a sealed file's trees are read at their
// first use, so trees this reader refuses fail a prediction for their
// head, with the error a load of the same file unsealed gives, and the
// other head still predicts; Seal refuses such a file.
func TestSealedTreesReadWhenNeeded(t *testing.T) {
	g, _ := treesGCN(t, TreeOptions{Rounds: 5, Depth: 3})
	data, err := g.ExportONNX()
	if err != nil {
		t.Fatal(err)
	}
	bad := editModel(t, data, func(mp *onnxpb.ModelProto) {
		for _, n := range mp.Graph.Node {
			if n.GetName() != treesNodeName("cpu") {
				continue
			}
			for _, a := range n.Attribute {
				if a.GetName() == "post_transform" {
					a.S = []byte("NONE")
				}
			}
		}
	})
	const want = "post_transform must be SOFTMAX"
	if _, err := ParseONNX("unsealed.onnx", bad); err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("unsealed file with bad trees: %v, want %q at load", err, want)
	}
	if _, _, err := Seal("bad.onnx", bad); err == nil || !strings.Contains(err.Error(), want) || !strings.HasPrefix(err.Error(), "model bad.onnx: ") {
		t.Errorf("Seal of a file with bad trees: %v, want %q", err, want)
	}
	m, err := ParseONNX("sealed.onnx", seal(bad))
	if err != nil {
		t.Fatalf("sealed file: %v, want its trees left for their first use", err)
	}
	s := familySummary(t)
	p := GCNPredictor{Model: m}
	cpu := hetero.Info{Name: "cpu", Kind: hetero.CPU}
	if err := p.Load(cpu); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("Load for the head with bad trees: %v, want %q", err, want)
	}
	if err := p.Load(hetero.Info{Name: "cuda:0", Kind: hetero.GPU, Type: "gpu"}); err != nil {
		t.Errorf("Load for the head without trees: %v", err)
	}
	if _, err := p.PredictDevice(s, hetero.SpTTM, 0, cpu); err == nil || !strings.Contains(err.Error(), want) || !strings.HasPrefix(err.Error(), "model sealed.onnx: ") {
		t.Errorf("prediction from the bad trees: %v, want the file named and %q", err, want)
	}
	if _, err := m.Info.AllTrees(); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("AllTrees: %v, want %q", err, want)
	}
	p.Class = "gpu"
	if _, err := p.PredictSummary(s, hetero.SpTTM, 0, hetero.GPU); err != nil {
		t.Errorf("the head without trees: %v", err)
	}
}

// TestSealedTreesConcurrent: goroutines that first ask for a sealed
// file's trees, packed or from their node, and its network at once read
// the graph and the trees once and agree (run with -race).
func TestSealedTreesConcurrent(t *testing.T) {
	g, tr := treesGCN(t, TreeOptions{Rounds: 5, Depth: 3})
	m := exportParsed(t, g, "trees.onnx")
	s := familySummary(t)
	v, _ := s.Global(hetero.SpTTM, 0)
	want := rank(tr.Classes, tr.Probs(v[:]))
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Go(func() {
			switch i % 4 {
			case 1:
				_, errs[i] = m.Info.AllTrees()
				return
			case 3:
				_, errs[i] = GCNPredictor{Model: m, Class: "gpu"}.PredictSummary(s, hetero.SpTTM, 0, hetero.GPU)
				return
			}
			pr, err := GCNPredictor{Model: m}.PredictDevice(s, hetero.SpTTM, 0, hetero.Info{Name: "cpu", Kind: hetero.CPU})
			if err == nil && !reflect.DeepEqual(pr.Formats, want) {
				err = fmt.Errorf("formats %v, the trees give %v", pr.Formats, want)
			}
			errs[i] = err
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("goroutine %d: %v", i, err)
		}
	}
	if m.Info.TreeNodes != tr.Nodes() {
		t.Errorf("%d tree nodes counted, want %d", m.Info.TreeNodes, tr.Nodes())
	}
}

// TestTreesInModelFile: trees exported with a model come back node for
// node from the file, answer for their head (By "boosted", no graph, no
// network run) with the trees' probabilities, leave the other head to
// the network, and both runtimes still run the network; the file
// describes itself; bad combinations are refused.
func TestTreesInModelFile(t *testing.T) {
	g, tr := treesGCN(t, TreeOptions{Rounds: 20, Depth: 4})
	m := exportParsed(t, g, "trees.onnx")
	trees, err := m.Info.AllTrees()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(m.Info.TreeHeads, []string{"cpu"}) || m.Info.TreeNodes != tr.Nodes() {
		t.Fatalf("tree heads %v with %d nodes, want [cpu] with %d", m.Info.TreeHeads, m.Info.TreeNodes, tr.Nodes())
	}
	back := trees["cpu"]
	for _, c := range []struct {
		name string
		a, b any
	}{
		{"classes", back.Classes, tr.Classes}, {"base", back.Base, tr.Base}, {"roots", back.Roots, tr.Roots},
		{"root classes", back.RootClass, tr.RootClass}, {"features", back.Feature, tr.Feature},
		{"thresholds", back.Threshold, tr.Threshold}, {"values", back.Value, tr.Value},
	} {
		if !reflectEqual(c.a, c.b) {
			t.Errorf("%s differ after the round trip", c.name)
		}
	}
	s := familySummary(t)
	p := GCNPredictor{Model: m}
	pr, err := p.PredictDevice(s, hetero.SpTTM, 0, hetero.Info{Name: "cpu", Kind: hetero.CPU})
	if err != nil {
		t.Fatal(err)
	}
	v, _ := s.Global(hetero.SpTTM, 0)
	want := tr.Probs(v[:])
	if pr.By != "boosted" || pr.Encoding != 0 || len(pr.Formats) != 4 {
		t.Fatalf("tree head: by %q, encoding %v, %d formats", pr.By, pr.Encoding, len(pr.Formats))
	}
	for _, f := range pr.Formats {
		if k := slices.Index(tr.Classes, f.Format); f.Score != want[k] {
			t.Errorf("%s scored %g, the trees give %g", f.Format, f.Score, want[k])
		}
	}
	p.Class = "gpu"
	if pr, err = p.PredictSummary(s, hetero.SpTTM, 0, hetero.GPU); err != nil || pr.By != "" || pr.Encoding == 0 {
		t.Errorf("network head: %+v, %v", pr, err)
	}
	if err := m.UseRuntime("onnx-go"); err != nil {
		t.Fatalf("onnx-go on a file with trees: %v", err)
	}
	if _, err := p.PredictSummary(s, hetero.SpTTM, 0, hetero.GPU); err != nil {
		t.Fatalf("onnx-go: %v", err)
	}
	// Read back into a GCN (tune-model starts from a file), the trees
	// stay; exported again, the file is the same.
	g2, err := m.GCN()
	if err != nil {
		t.Fatal(err)
	}
	if g2.Trees["cpu"] == nil {
		t.Error("GCN read from the file lost its trees")
	}

	g.RuleHeads = []string{"cpu"}
	if _, err := g.ExportONNX(); err == nil || !strings.Contains(err.Error(), "one answer per head") {
		t.Errorf("a rule head with trees: %v", err)
	}
	g.RuleHeads = nil
	g.Trees = map[string]*Trees{"tpu": tr}
	if _, err := g.ExportONNX(); err == nil {
		t.Error("trees of a head the model lacks were exported")
	}
	g.Trees = map[string]*Trees{"cpu": {Classes: []string{"coo", "csr"}, Base: []float32{0, 0}, Roots: []int32{0}, RootClass: []int32{0},
		Feature: []int32{-1}, Threshold: []float32{0}, Left: []int32{-1}, Right: []int32{-1}, Value: []float32{1}}}
	if _, err := g.ExportONNX(); err == nil || !strings.Contains(err.Error(), "classes") {
		t.Errorf("trees of other classes than the head's: %v", err)
	}
}

// TestBlendMargins: a head with trees and a blend margin answers with
// the trees where they lead by at least the margin, and else with the
// mean of the network's and the trees' probabilities (By "blend", the
// graph encoded); the margins round-trip through the file and GCN;
// malformed margins are refused on export and on reading.
func TestBlendMargins(t *testing.T) {
	g, tr := treesGCN(t, TreeOptions{Rounds: 20, Depth: 4})
	s := familySummary(t)
	v, _ := s.Global(hetero.SpTTM, 0)
	treeProbs := tr.Probs(v[:])
	lead := TopMargin(treeProbs)
	cpu := hetero.Info{Name: "cpu", Kind: hetero.CPU}
	for _, c := range []struct {
		name   string
		margin float64
		by     string
	}{
		{"always", math.Inf(1), "blend"},
		{"above the lead", lead * 1.01, "blend"},
		{"below the lead", lead * 0.99, "boosted"},
	} {
		g.BlendMargins = map[string]float64{"cpu": c.margin}
		m := exportParsed(t, g, "blend.onnx")
		if got := m.Info.BlendMargins["cpu"]; got != c.margin {
			t.Fatalf("%s: margin %g read back as %g", c.name, c.margin, got)
		}
		pr, err := GCNPredictor{Model: m}.PredictDevice(s, hetero.SpTTM, 0, cpu)
		if err != nil {
			t.Fatal(err)
		}
		if pr.By != c.by || (pr.Encoding != 0) != (c.by == "blend") {
			t.Errorf("%s: by %q, encoding %v, want %q", c.name, pr.By, pr.Encoding, c.by)
		}
		want := treeProbs
		if c.by == "blend" {
			in, _, _, err := SummaryInput(s, hetero.SpTTM, 0, m.Info.Budget)
			if err != nil {
				t.Fatal(err)
			}
			np, err := m.RunHead(in, 0)
			if err != nil {
				t.Fatal(err)
			}
			want = make([]float64, len(np))
			for k := range want {
				want[k] = (np[k] + treeProbs[k]) / 2
			}
		}
		for _, f := range pr.Formats {
			if k := slices.Index(tr.Classes, f.Format); math.Abs(f.Score-want[k]) > 1e-12 {
				t.Errorf("%s: %s scored %g, want %g", c.name, f.Format, f.Score, want[k])
			}
		}
		// The network alone, when asked.
		if pr, err := (GCNPredictor{Model: m, Network: true}).PredictDevice(s, hetero.SpTTM, 0, cpu); err != nil || pr.By != "" {
			t.Errorf("%s: --predictor network: by %q, %v", c.name, pr.By, err)
		}
		g2, err := m.GCN()
		if err != nil || g2.BlendMargins["cpu"] != c.margin {
			t.Errorf("%s: GCN read from the file: margins %v, %v", c.name, g2.BlendMargins, err)
		}
	}
	for _, margins := range []map[string]float64{{"cpu": 0}, {"cpu": -1}, {"cpu": math.NaN()}, {"gpu": 0.1}, {"tpu": 0.1}} {
		g.BlendMargins = margins
		if _, err := g.ExportONNX(); err == nil {
			t.Errorf("margins %v exported", margins)
		}
	}
	trees := []string{"cpu"}
	for _, v := range []string{"cpu", "cpu=", "cpu=0", "cpu=-0.1", "cpu=x", "cpu=NaN", "gpu=0.1", "cpu=0.1,cpu=0.2"} {
		if _, err := parseBlendMargins(v, trees); err == nil {
			t.Errorf("metadata %q read", v)
		}
	}
	if m, err := parseBlendMargins("cpu=+Inf", trees); err != nil || !math.IsInf(m["cpu"], 1) {
		t.Errorf("cpu=+Inf: %v, %v", m, err)
	}
}

func TestTopMargin(t *testing.T) {
	for _, c := range []struct {
		p    []float64
		want float64
	}{
		{[]float64{0.5, 0.2, 0.3}, 0.2},
		{[]float64{0.1, 0.6, 0.3}, 0.3},
		{[]float64{0.4, 0.4, 0.2}, 0},
		{[]float64{0.2, 0.3, 0.5}, 0.2},
	} {
		if got := TopMargin(c.p); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("TopMargin(%v) = %g, want %g", c.p, got, c.want)
		}
	}
}

func reflectEqual(a, b any) bool {
	switch a := a.(type) {
	case []string:
		return slices.Equal(a, b.([]string))
	case []float32:
		return slices.Equal(a, b.([]float32))
	case []int32:
		return slices.Equal(a, b.([]int32))
	}
	return false
}

// TestPackedTrees: the packed layout scores exactly as walking the node
// arrays does, on an ensemble laid out depth first (siblings apart, as a
// file may hold them), NaN and infinite features and features equal to a
// threshold included, both by the fixed-depth walk and by the walk that
// stops at each leaf (an ensemble deeper than maxFixedDepth).
func TestPackedTrees(t *testing.T) {
	g, _ := treesGCN(t, TreeOptions{Rounds: 30, Depth: 5})
	bfs := g.Trees["cpu"]
	// The same trees, each renumbered in depth-first preorder.
	dfs := &Trees{Classes: bfs.Classes, Base: bfs.Base, Roots: bfs.Roots, RootClass: bfs.RootClass}
	n := len(bfs.Feature)
	dfs.Feature, dfs.Threshold, dfs.Value = make([]int32, n), make([]float32, n), make([]float32, n)
	dfs.Left, dfs.Right = make([]int32, n), make([]int32, n)
	for _, root := range bfs.Roots {
		next := root
		var visit func(i int32) int32
		visit = func(i int32) int32 {
			at := next
			next++
			dfs.Feature[at], dfs.Threshold[at], dfs.Value[at] = bfs.Feature[i], bfs.Threshold[i], bfs.Value[i]
			dfs.Left[at], dfs.Right[at] = -1, -1
			if bfs.Feature[i] >= 0 {
				l := visit(bfs.Left[i])
				r := visit(bfs.Right[i])
				dfs.Left[at], dfs.Right[at] = l, r
			}
			return at
		}
		visit(root)
	}
	if err := dfs.Check(features.Count); err != nil {
		t.Fatal(err)
	}
	deepest := 0
	for _, root := range bfs.Roots {
		var depth func(i int32) int
		depth = func(i int32) int {
			if bfs.Feature[i] < 0 {
				return 0
			}
			return 1 + max(depth(bfs.Left[i]), depth(bfs.Right[i]))
		}
		deepest = max(deepest, depth(root))
	}
	bfs.pack()
	if bfs.packed == nil || bfs.packed.depth != deepest || deepest < 2 {
		t.Fatalf("packed depth %v, the trees' %d", bfs.packed, deepest)
	}
	// The same packing, walked leaf by leaf as a deeper one would be.
	stepwise := &Trees{Classes: bfs.Classes, Base: bfs.Base}
	stepwise.packOnce.Do(func() {})
	p := *bfs.packed
	p.depth = maxFixedDepth + 1
	stepwise.packed = &p
	rng := rand.New(rand.NewPCG(9, 9))
	for k := range 500 {
		x := make([]float64, features.Count)
		for f := range x {
			x[f] = 4 * rng.Float64()
		}
		switch k % 50 {
		case 0:
			x[k%features.Count] = math.NaN()
		case 1:
			x[k%features.Count] = math.Inf(1 - 2*(k/50%2))
		case 2, 3, 4:
			// On a threshold: x <= threshold goes left.
			i := rng.IntN(len(bfs.Feature))
			if f := bfs.Feature[i]; f >= 0 {
				x[f] = float64(bfs.Threshold[i])
			}
		}
		walked := slices.Clone(bfs.Base)
		want := make([]float64, len(walked))
		for c, b := range walked {
			want[c] = float64(b)
		}
		for j, root := range bfs.Roots {
			want[bfs.RootClass[j]] += float64(bfs.Value[bfs.leaf(root, x)])
		}
		for i, tr := range []*Trees{bfs, dfs, stepwise} {
			if got := tr.Scores(x, nil); !slices.Equal(got, want) {
				t.Fatalf("input %d, ensemble %d: packed scores %v, walked %v", k, i, got, want)
			}
		}
	}
	if bfs.packed == nil || dfs.packed == nil {
		t.Fatal("the ensembles were not packed")
	}
}

// TestTreesCheck: malformed ensembles, as a hand-edited file could hold
// them, are refused before use.
func TestTreesCheck(t *testing.T) {
	good := func() *Trees {
		return &Trees{Classes: []string{"a", "b"}, Base: []float32{0, 0}, Roots: []int32{0, 3}, RootClass: []int32{0, 1},
			Feature: []int32{2, -1, -1, -1}, Threshold: []float32{0.5, 0, 0, 0}, Left: []int32{1, -1, -1, -1}, Right: []int32{2, -1, -1, -1},
			Value: []float32{0, 1, -1, 0.5}}
	}
	if err := good().Check(features.Count); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		edit func(*Trees)
	}{
		{"child before parent", func(t *Trees) { t.Left[0] = 0 }},
		{"child in next tree", func(t *Trees) { t.Right[0] = 3 }},
		{"feature out of range", func(t *Trees) { t.Feature[0] = int32(features.Count) }},
		{"class out of range", func(t *Trees) { t.RootClass[1] = 2 }},
		{"roots out of order", func(t *Trees) { t.Roots[1] = 0 }},
		{"NaN leaf", func(t *Trees) { t.Value[1] = float32(math.NaN()) }},
		{"short arrays", func(t *Trees) { t.Value = t.Value[:3] }},
		{"base", func(t *Trees) { t.Base = t.Base[:1] }},
	} {
		tr := good()
		c.edit(tr)
		if err := tr.Check(features.Count); err == nil {
			t.Errorf("%s: accepted", c.name)
		}
	}
}

// readTreesNode reads an encoded tree node as a model file's reader
// does: decoded, then read into Trees.
func readTreesNode(b []byte) (*Trees, error) {
	mn, err := decodeMLNode(b, true)
	if err != nil {
		return nil, err
	}
	return parseTreesNode(mn)
}

// familySummary is the summary of one small tensor of the test family,
// the same on every call.
func familySummary(t testing.TB) *features.Summary {
	s, err := features.Summarize(familyTensor(rand.New(rand.NewPCG(5, 6)), 1))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestTreesNodeEncodings: a tree node reads the same whether its int and
// float lists are packed, as this build writes them, or written with a
// tag per element, as builds before it did (and as protobuf lets any
// writer do); a damaged list is an error.
func TestTreesNodeEncodings(t *testing.T) {
	g, _ := treesGCN(t, TreeOptions{Rounds: 4, Depth: 3})
	n, _ := treesNode("cpu", g.Trees["cpu"])
	packed, err := proto.Marshal(n)
	if err != nil {
		t.Fatal(err)
	}
	// unpacked encodes n by hand, each attribute's lists element by
	// element.
	bare := proto.Clone(n).(*onnxpb.NodeProto)
	bare.Attribute = nil
	unpacked, err := proto.Marshal(bare)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range n.Attribute {
		c := proto.Clone(a).(*onnxpb.AttributeProto)
		c.Ints, c.Floats = nil, nil
		b, err := proto.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		for _, x := range a.Ints {
			b = protowire.AppendTag(b, fieldAttrInts, protowire.VarintType)
			b = protowire.AppendVarint(b, uint64(x))
		}
		for _, f := range a.Floats {
			b = protowire.AppendTag(b, fieldAttrFloats, protowire.Fixed32Type)
			b = protowire.AppendFixed32(b, math.Float32bits(f))
		}
		unpacked = protowire.AppendTag(unpacked, fieldNodeAttribute, protowire.BytesType)
		unpacked = protowire.AppendBytes(unpacked, b)
	}
	if len(unpacked) <= len(packed) {
		t.Fatalf("the unpacked node (%d bytes) is not larger than the packed one (%d): the writer no longer packs", len(unpacked), len(packed))
	}
	a, err := readTreesNode(packed)
	if err != nil {
		t.Fatal(err)
	}
	b, err := readTreesNode(unpacked)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(a.Feature, g.Trees["cpu"].Feature) || !slices.Equal(a.Threshold, g.Trees["cpu"].Threshold) || !slices.Equal(a.Value, g.Trees["cpu"].Value) {
		t.Error("the packed node does not read back as the trees written")
	}
	if !slices.Equal(a.Feature, b.Feature) || !slices.Equal(a.Left, b.Left) || !slices.Equal(a.Right, b.Right) ||
		!slices.Equal(a.Threshold, b.Threshold) || !slices.Equal(a.Value, b.Value) || !slices.Equal(a.Base, b.Base) ||
		!slices.Equal(a.Roots, b.Roots) || !slices.Equal(a.RootClass, b.RootClass) || !slices.Equal(a.Classes, b.Classes) {
		t.Error("the packed and unpacked encodings read differently")
	}
	// Cut anywhere, either encoding is refused or reads as other trees,
	// never panics.
	for _, enc := range [][]byte{packed, unpacked} {
		for cut := 1; cut < len(enc); cut += 1 + len(enc)/200 {
			readTreesNode(enc[:cut])
		}
	}
	// A packed float list whose length is not a multiple of 4 is refused.
	bad := protowire.AppendTag(nil, fieldAttrName, protowire.BytesType)
	bad = protowire.AppendString(bad, "nodes_values")
	bad = protowire.AppendTag(bad, fieldAttrFloats, protowire.BytesType)
	bad = protowire.AppendBytes(bad, []byte{1, 2, 3})
	if _, _, err := decodeMLAttr(bad); err == nil || !strings.Contains(err.Error(), "multiple of 4") {
		t.Errorf("a packed float list of 3 bytes: error %v", err)
	}
}

// TestParseTreesNodeErrors: a tree node edited by hand, each way a file
// could hold it wrongly, is refused with an error, never read as some
// other ensemble (an id past 32 bits must not wrap to a valid one).
func TestParseTreesNodeErrors(t *testing.T) {
	g, _ := treesGCN(t, TreeOptions{Rounds: 3, Depth: 3})
	good, _ := treesNode("cpu", g.Trees["cpu"])
	// parse reads n as the file holds it: encoded, then decoded.
	parse := func(n *onnxpb.NodeProto) (*Trees, error) {
		b, err := proto.Marshal(n)
		if err != nil {
			t.Fatal(err)
		}
		return readTreesNode(b)
	}
	if _, err := parse(good); err != nil {
		t.Fatal(err)
	}
	attr := func(n *onnxpb.NodeProto, name string) *onnxpb.AttributeProto {
		for _, a := range n.Attribute {
			if a.GetName() == name {
				return a
			}
		}
		t.Fatalf("no attribute %s", name)
		return nil
	}
	branch := func(n *onnxpb.NodeProto) int {
		return slices.IndexFunc(attr(n, "nodes_modes").Strings, func(b []byte) bool { return string(b) == "BRANCH_LEQ" })
	}
	for _, c := range []struct {
		name string
		edit func(n *onnxpb.NodeProto)
		want string
	}{
		{"feature past 32 bits", func(n *onnxpb.NodeProto) { attr(n, "nodes_featureids").Ints[branch(n)] = 1 << 32 }, "feature"},
		{"feature out of range", func(n *onnxpb.NodeProto) { attr(n, "nodes_featureids").Ints[branch(n)] = int64(features.Count) }, "feature"},
		{"class past 32 bits", func(n *onnxpb.NodeProto) { attr(n, "class_ids").Ints[0] = 1<<32 + 1 }, "class"},
		{"child before parent", func(n *onnxpb.NodeProto) { attr(n, "nodes_truenodeids").Ints[branch(n)] = 0 }, "children"},
		{"node ids out of order", func(n *onnxpb.NodeProto) { attr(n, "nodes_nodeids").Ints[1] = 5 }, "out of order"},
		{"unknown mode", func(n *onnxpb.NodeProto) { attr(n, "nodes_modes").Strings[0] = []byte("BRANCH_LT") }, "BRANCH_LT"},
		{"no softmax", func(n *onnxpb.NodeProto) { attr(n, "post_transform").S = []byte("NONE") }, "SOFTMAX"},
		{"leaf weighted twice", func(n *onnxpb.NodeProto) {
			a, b := attr(n, "class_nodeids"), attr(n, "class_treeids")
			a.Ints[1], b.Ints[1] = a.Ints[0], b.Ints[0]
		}, "weighted once"},
		{"short attribute", func(n *onnxpb.NodeProto) { a := attr(n, "nodes_values"); a.Floats = a.Floats[1:] }, "different lengths"},
	} {
		n := proto.Clone(good).(*onnxpb.NodeProto)
		c.edit(n)
		if _, err := parse(n); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one saying %q", c.name, err, c.want)
		}
	}
}

// FuzzParseONNX: no model file, however damaged, panics the reader, the
// trees it yields or its packed trees, read at load or when first
// needed (Check); a file that parses and checks scores without error.
func FuzzParseONNX(f *testing.F) {
	g, _ := treesGCN(f, TreeOptions{Rounds: 2, Depth: 2})
	data, err := g.ExportONNX()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(data)
	// Without its checksum, which almost every mutation of the sealed
	// file breaks first, so that mutations reach the trees' readers: as
	// written (packed trees included), and as a protobuf rewrite leaves
	// it (none).
	m, err := ParseONNX("seed.onnx", data)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(data[:m.Info.body])
	f.Add(editModel(f, data, func(*onnxpb.ModelProto) {}))
	if plain, err := randomGCN(f, 3).ExportONNX(); err == nil {
		f.Add(plain)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := ParseONNX("fuzz.onnx", data)
		if err != nil {
			return
		}
		var x features.Vector
		for _, h := range m.Info.TreeHeads {
			// The packed trees, if any, as a prediction scores them,
			// before anything else is read.
			if sc, err := m.Info.scorer(h); err == nil {
				if p := sc.Probs(x[:]); len(p) != len(m.Info.Heads[m.Info.HeadIndex(h)].Classes) {
					t.Fatalf("head %s: %d probabilities", h, len(p))
				}
			}
		}
		if m.Check() != nil {
			return
		}
		trees, err := m.Info.AllTrees()
		if err != nil {
			t.Fatalf("Check passed, AllTrees: %v", err)
		}
		for _, tr := range trees {
			if p := tr.Probs(x[:]); len(p) != len(tr.Classes) {
				t.Fatalf("%d probabilities for %d classes", len(p), len(tr.Classes))
			}
		}
	})
}

// FuzzDecodeMLNode: no bytes, however damaged, panic the tree node's
// decoder or the reader of what it decodes, packed or unpacked; a node
// that reads scores without error. (FuzzParseONNX covers the whole file,
// more slowly.)
func FuzzDecodeMLNode(f *testing.F) {
	g, _ := treesGCN(f, TreeOptions{Rounds: 2, Depth: 2})
	n, _ := treesNode("cpu", g.Trees["cpu"])
	packed, err := proto.Marshal(n)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(packed)
	f.Fuzz(func(t *testing.T, b []byte) {
		tr, err := readTreesNode(b)
		if err != nil {
			return
		}
		var x features.Vector
		if p := tr.Probs(x[:]); len(p) != len(tr.Classes) {
			t.Fatalf("%d probabilities for %d classes", len(p), len(tr.Classes))
		}
	})
}
