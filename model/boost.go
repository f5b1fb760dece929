package model

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"sync"
)

// Trees is a gradient-boosted ensemble of regression trees that picks a
// format from a tensor's global features alone (features.Vector): for
// each class a sum of trees gives a score, and the scores' softmax the
// probabilities, as a multinomial logistic model whose inputs are learnt
// splits instead of weights.
//
// Why a second learner beside the network: on the global features the
// trees score as well as the GCN on the MTTKRP CPU labels (docs/model.md,
// "Boosted trees"), and a decision that needs no graph and no network
// costs a fraction of one that does. A head whose trees cross-validate at
// least as well as its network answers with them (GCN.Trees).
//
// The nodes of every tree are held in flat arrays: node i splits on
// Feature[i] (x ≤ Threshold[i] goes to Left[i], else Right[i]), or is a
// leaf when Feature[i] < 0, whose Value[i] (shrinkage included) is added
// to the score of its tree's class. Comparisons are in float32, as an
// ONNX runtime would make them, so a model file answers the same
// wherever it is read.
type Trees struct {
	Classes []string  // the head's formats, in score order
	Base    []float32 // the starting score of each class

	Roots     []int32 // first node of each tree
	RootClass []int32 // the class each tree adds to

	Feature   []int32
	Threshold []float32
	Left      []int32
	Right     []int32
	Value     []float32

	// packed is the ensemble laid out for scoring (packTrees), made on
	// first use: a Trees must not be changed once it has scored.
	packOnce sync.Once
	packed   *packedTrees
}

// TreeOptions are the boosting's settings. The zero value of a field
// means its default (DefaultTreeOptions).
type TreeOptions struct {
	Rounds     int     // boosting rounds: one tree per class each
	Depth      int     // most splits from the root to a leaf
	Rate       float64 // shrinkage of each tree's values
	Lambda     float64 // L2 penalty on leaf values
	MinHessian float64 // least summed hessian (about p(1−p) per row) on each side of a split
	Subsample  float64 // share of the rows each round draws, in (0, 1]
	ColSample  float64 // share of the features each round may split on, in (0, 1]
	Bins       int     // candidate thresholds per feature, at most 255
	Seed       uint64
}

// DefaultTreeOptions are the settings sparsetune train uses. They were
// chosen by 5-fold cross-validation grouped by source matrix on the
// AVX-512 MTTKRP CPU labels (docs/model.md, "Boosted trees"): depths 3 to
// 8, 100 to 400 rounds, rates 0.05 to 0.2, penalties 1 to 5 and least
// hessians 1 to 10 all scored within 0.005 of accuracy of each other, so
// these are the smallest ensemble among the best: a quarter of the nodes
// of depth 6 and 200 rounds, at the same accuracy.
var DefaultTreeOptions = TreeOptions{Rounds: 100, Depth: 5, Rate: 0.2, Lambda: 1, MinHessian: 5, Subsample: 0.8, ColSample: 0.8, Bins: 64, Seed: 1}

func (o TreeOptions) withDefaults() (TreeOptions, error) {
	d := DefaultTreeOptions
	orDefault(&o.Rounds, d.Rounds)
	orDefault(&o.Depth, d.Depth)
	orDefault(&o.Rate, d.Rate)
	orDefault(&o.Lambda, d.Lambda)
	orDefault(&o.MinHessian, d.MinHessian)
	orDefault(&o.Subsample, d.Subsample)
	orDefault(&o.ColSample, d.ColSample)
	orDefault(&o.Bins, d.Bins)
	switch {
	case o.Rounds < 1 || o.Depth < 1 || o.Depth > 16:
		return o, fmt.Errorf("trees: rounds must be at least 1 and depth 1 to 16, found %d and %d", o.Rounds, o.Depth)
	case !(o.Rate > 0 && o.Rate <= 1):
		return o, fmt.Errorf("trees: rate must be in (0, 1], found %g", o.Rate)
	case !(o.Lambda >= 0) || !(o.MinHessian >= 0):
		return o, fmt.Errorf("trees: lambda and min hessian must be at least 0, found %g and %g", o.Lambda, o.MinHessian)
	case !(o.Subsample > 0 && o.Subsample <= 1) || !(o.ColSample > 0 && o.ColSample <= 1):
		return o, fmt.Errorf("trees: subsample and column sample must be in (0, 1], found %g and %g", o.Subsample, o.ColSample)
	case o.Bins < 2 || o.Bins > 255:
		return o, fmt.Errorf("trees: bins must be 2 to 255, found %d", o.Bins)
	}
	return o, nil
}

// orDefault sets *v to d when *v is its type's zero value.
func orDefault[T comparable](v *T, d T) {
	var zero T
	if *v == zero {
		*v = d
	}
}

// Scores sets dst[k] to the raw score of class k for the features x and
// returns dst (allocated when too short). The probabilities are its
// softmax (Probs).
func (t *Trees) Scores(x []float64, dst []float64) []float64 {
	t.pack()
	if p := t.packed; p != nil && len(x) <= maxPackedFeature {
		return p.scores(x, dst)
	}
	if len(dst) < len(t.Classes) {
		dst = make([]float64, len(t.Classes))
	}
	dst = dst[:len(t.Classes)]
	for k, b := range t.Base {
		dst[k] = float64(b)
	}
	for j, root := range t.Roots {
		dst[t.RootClass[j]] += float64(t.Value[t.leaf(root, x)])
	}
	return dst
}

// pack lays t out for scoring (packedTrees), once. Trees read from a
// model file's node are packed as they are read, so that a decision does
// not pay for it, and their layout is what the file's packed trees are
// checked against and what ExportONNX and Seal write.
func (t *Trees) pack() { t.packOnce.Do(func() { t.packed = packTrees(t) }) }

// Probs returns the class probabilities for the features x.
func (t *Trees) Probs(x []float64) []float64 {
	p := t.Scores(x, nil)
	softmax(p, p)
	return p
}

// leaf returns the leaf x reaches from node i.
func (t *Trees) leaf(i int32, x []float64) int32 {
	for f := t.Feature[i]; f >= 0; f = t.Feature[i] {
		if float32(x[f]) <= t.Threshold[i] {
			i = t.Left[i]
		} else {
			i = t.Right[i]
		}
	}
	return i
}

// Nodes returns the number of nodes of all trees.
func (t *Trees) Nodes() int { return len(t.Feature) }

// Check verifies that t is a well-formed ensemble over nfeat features:
// every array of the right length, every child inside the tree after its
// parent (so that evaluation ends), every feature index in range. A
// model file is checked before it is used.
func (t *Trees) Check(nfeat int) error {
	n, k := len(t.Feature), len(t.Classes)
	switch {
	case k < 2:
		return fmt.Errorf("trees: %d classes, need at least 2", k)
	case len(t.Base) != k:
		return fmt.Errorf("trees: %d base scores for %d classes", len(t.Base), k)
	case len(t.Threshold) != n || len(t.Left) != n || len(t.Right) != n || len(t.Value) != n:
		return errors.New("trees: node arrays of different lengths")
	case len(t.RootClass) != len(t.Roots):
		return fmt.Errorf("trees: %d roots but %d root classes", len(t.Roots), len(t.RootClass))
	}
	for j, r := range t.Roots {
		end := int32(n)
		if j+1 < len(t.Roots) {
			end = t.Roots[j+1]
		}
		if r < 0 || r >= end || (j > 0 && r <= t.Roots[j-1]) {
			return fmt.Errorf("trees: tree %d starts at node %d, out of order", j, r)
		}
		if c := t.RootClass[j]; c < 0 || int(c) >= k {
			return fmt.Errorf("trees: tree %d adds to class %d of %d", j, c, k)
		}
		for i := r; i < end; i++ {
			f := t.Feature[i]
			if f < 0 {
				if math.IsNaN(float64(t.Value[i])) || math.IsInf(float64(t.Value[i]), 0) {
					return fmt.Errorf("trees: node %d has value %g", i, t.Value[i])
				}
				continue
			}
			if int(f) >= nfeat {
				return fmt.Errorf("trees: node %d splits on feature %d of %d", i, f, nfeat)
			}
			if l, rr := t.Left[i], t.Right[i]; l <= i || rr <= i || l >= end || rr >= end {
				return fmt.Errorf("trees: node %d has children %d and %d outside its tree [%d, %d)", i, l, rr, i+1, end)
			}
			if math.IsNaN(float64(t.Threshold[i])) {
				return fmt.Errorf("trees: node %d has threshold NaN", i)
			}
		}
	}
	return nil
}

// FitTrees boosts an ensemble on the rows x (features) with targets y
// (one probability per class each, summing to 1: a one-hot label or a
// soft target) by Newton steps on the softmax cross-entropy. Each round
// grows one tree per class, level by level, choosing among at most
// o.Bins thresholds per feature (quantiles of the training values) the
// split of greatest gain.
func FitTrees(x [][]float64, y [][]float64, classes []string, o TreeOptions) (*Trees, error) {
	o, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	n, k := len(x), len(classes)
	if n == 0 {
		return nil, errors.New("trees: no rows to fit")
	}
	if k < 2 {
		return nil, fmt.Errorf("trees: %d classes, need at least 2", k)
	}
	if len(y) != n {
		return nil, fmt.Errorf("trees: %d rows of features but %d targets", n, len(y))
	}
	d := len(x[0])
	for i := range n {
		if len(x[i]) != d || len(y[i]) != k {
			return nil, fmt.Errorf("trees: row %d has %d features and %d targets, expected %d and %d", i, len(x[i]), len(y[i]), d, k)
		}
	}
	b := binRows(x, o.Bins)
	t := &Trees{Classes: slices.Clone(classes), Base: make([]float32, k)}
	// Start from the log of each class's share, so that the first trees
	// fit what the shares do not explain.
	share := make([]float64, k)
	for i := range n {
		for c := range k {
			share[c] += y[i][c]
		}
	}
	for c := range k {
		t.Base[c] = float32(math.Log(max(share[c]/float64(n), 1e-6)))
	}
	score := make([][]float64, n)
	for i := range score {
		score[i] = make([]float64, k)
		for c := range k {
			score[i][c] = float64(t.Base[c])
		}
	}
	prob := make([]float64, n*k)
	g, h := make([]float64, n), make([]float64, n)
	rng := rand.New(rand.NewPCG(o.Seed, 0xb005))
	grower := newGrower(b, g, h, o)
	// For K classes the Newton step of the softmax loss is scaled by
	// (K−1)/K (Friedman's multiclass boosting): the K scores have one
	// degree of freedom too many.
	scale := o.Rate * float64(k-1) / float64(k)
	for range o.Rounds {
		for i := range n {
			p := prob[i*k : (i+1)*k]
			copy(p, score[i])
			softmax(p, p)
		}
		rows := make([]int32, 0, n)
		for i := range n {
			if o.Subsample >= 1 || rng.Float64() < o.Subsample {
				rows = append(rows, int32(i))
			}
		}
		var feats []int
		for f := range d {
			if o.ColSample >= 1 || rng.Float64() < o.ColSample {
				feats = append(feats, f)
			}
		}
		if len(feats) == 0 {
			feats = []int{rng.IntN(d)}
		}
		if len(rows) == 0 {
			continue
		}
		for c := range k {
			for i := range n {
				p := prob[i*k+c]
				g[i] = p - y[i][c]
				h[i] = max(p*(1-p), 1e-6)
			}
			root := int32(len(t.Feature))
			grower.grow(t, rows, feats, scale)
			t.Roots = append(t.Roots, root)
			t.RootClass = append(t.RootClass, int32(c))
			for i := range n {
				score[i][c] += float64(t.Value[t.leaf(root, x[i])])
			}
		}
	}
	return t, nil
}

// binned is the training rows with each feature replaced by the index of
// its interval between thresholds: cut[f][j] separates bin j from j+1.
type binned struct {
	cut [][]float32
	bin [][]uint8 // [feature][row]
}

// binRows chooses up to bins−1 float32 thresholds per feature, midway
// between distinct values at the feature's quantiles, and bins the rows.
func binRows(x [][]float64, bins int) *binned {
	n, d := len(x), len(x[0])
	b := &binned{cut: make([][]float32, d), bin: make([][]uint8, d)}
	v := make([]float32, n)
	for f := range d {
		for i := range n {
			v[i] = float32(x[i][f])
		}
		slices.Sort(v)
		u := slices.Compact(slices.Clone(v))
		var cut []float32
		add := func(i int) { // between u[i] and u[i+1]
			if i+1 >= len(u) {
				return
			}
			m := u[i] + (u[i+1]-u[i])/2
			if m >= u[i+1] { // no float32 strictly between: u[i] itself separates them
				m = u[i]
			}
			if len(cut) == 0 || m > cut[len(cut)-1] {
				cut = append(cut, m)
			}
		}
		if len(u) <= bins {
			for i := range len(u) - 1 {
				add(i)
			}
		} else {
			for j := 1; j < bins; j++ {
				q := v[j*n/bins]
				i, _ := slices.BinarySearch(u, q)
				add(i)
			}
		}
		b.cut[f] = cut
		col := make([]uint8, n)
		for i := range n {
			xi := float32(x[i][f])
			// The first threshold at or above xi is its bin: xi ≤ cut[j]
			// goes left of a split at j.
			col[i] = uint8(sort.Search(len(cut), func(j int) bool { return xi <= cut[j] }))
		}
		b.bin[f] = col
	}
	return b
}

// grower grows one tree at a time on the current gradients g and
// hessians h.
type grower struct {
	b    *binned
	g, h []float64
	o    TreeOptions
	hist [][2]float64
}

func newGrower(b *binned, g, h []float64, o TreeOptions) *grower {
	return &grower{b: b, g: g, h: h, o: o, hist: make([][2]float64, 256)}
}

// grow appends to t one tree fitted to the rows, splitting on feats, its
// leaf values (Newton steps −G/(H+λ)) multiplied by scale.
func (w *grower) grow(t *Trees, rows []int32, feats []int, scale float64) {
	type part struct {
		node  int32
		rows  []int32
		depth int
	}
	leafValue := func(rows []int32) float32 {
		var G, H float64
		for _, i := range rows {
			G += w.g[i]
			H += w.h[i]
		}
		return float32(-G / (H + w.o.Lambda) * scale)
	}
	newNode := func(rows []int32) int32 {
		t.Feature = append(t.Feature, -1)
		t.Threshold = append(t.Threshold, 0)
		t.Left = append(t.Left, -1)
		t.Right = append(t.Right, -1)
		t.Value = append(t.Value, leafValue(rows))
		return int32(len(t.Feature) - 1)
	}
	queue := []part{{newNode(rows), rows, 0}}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		if p.depth >= w.o.Depth || len(p.rows) < 2 {
			continue
		}
		var G, H float64
		for _, i := range p.rows {
			G += w.g[i]
			H += w.h[i]
		}
		lambda := w.o.Lambda
		parent := G * G / (H + lambda)
		bestGain, bestF, bestBin := 1e-12, -1, 0
		for _, f := range feats {
			cut := w.b.cut[f]
			if len(cut) == 0 {
				continue
			}
			hist := w.hist[:len(cut)+1]
			clear(hist)
			col := w.b.bin[f]
			for _, i := range p.rows {
				e := &hist[col[i]]
				e[0] += w.g[i]
				e[1] += w.h[i]
			}
			var gl, hl float64
			for j := range len(cut) {
				gl += hist[j][0]
				hl += hist[j][1]
				gr, hr := G-gl, H-hl
				if hl < w.o.MinHessian || hr < w.o.MinHessian {
					continue
				}
				if gain := gl*gl/(hl+lambda) + gr*gr/(hr+lambda) - parent; gain > bestGain {
					bestGain, bestF, bestBin = gain, f, j
				}
			}
		}
		if bestF < 0 {
			continue
		}
		col := w.b.bin[bestF]
		var left, right []int32
		for _, i := range p.rows {
			if int(col[i]) <= bestBin {
				left = append(left, i)
			} else {
				right = append(right, i)
			}
		}
		l, r := newNode(left), newNode(right)
		t.Feature[p.node], t.Threshold[p.node] = int32(bestF), w.b.cut[bestF][bestBin]
		t.Left[p.node], t.Right[p.node] = l, r
		t.Value[p.node] = 0 // a branch adds nothing; only leaves carry values
		queue = append(queue, part{l, left, p.depth + 1}, part{r, right, p.depth + 1})
	}
}

// Blend returns the mean of two predictors' probabilities over the same
// classes: the network's and the trees' where the trees are unsure
// (Info.BlendMargins).
func Blend(a, b []float64) []float64 {
	out := make([]float64, len(a))
	for k := range out {
		out[k] = (a[k] + b[k]) / 2
	}
	return out
}

// TopMargin returns how far the most probable class is ahead of the
// next: the trees' confidence, which decides whether a head with a blend
// margin asks its network too (Info.BlendMargins).
func TopMargin(p []float64) float64 {
	first, second := math.Inf(-1), math.Inf(-1)
	for _, v := range p {
		if v > first {
			first, second = v, first
		} else if v > second {
			second = v
		}
	}
	if len(p) < 2 {
		return math.Inf(1)
	}
	return first - second
}
