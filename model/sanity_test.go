package model

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/sparsetune/sparsetune/features"
	"github.com/sparsetune/sparsetune/formats"
	"github.com/sparsetune/sparsetune/graphenc"
	"github.com/sparsetune/sparsetune/hetero"
)

// families are the structural families the sanity model tells apart.
var families = []string{"banded", "block-diagonal", "power-law", "uniform"}

// familyTensor generates an order-3 tensor of a family: the structure
// holds across all three modes, so every lowering shows it.
func familyTensor(rng *rand.Rand, family int) *formats.COO {
	dims := []int{200 + rng.IntN(1300), 200 + rng.IntN(1300), 200 + rng.IntN(1300)}
	nnz := 2000 + rng.IntN(10000)
	x, _ := formats.NewCOO(dims, nnz)
	idx := make([]uint32, 3)
	blocks := 3 + rng.IntN(6)
	width := 0.01 + 0.04*rng.Float64()
	for range nnz {
		switch family {
		case 0: // banded: every index near the same fraction of its dim
			u := rng.Float64()
			for m, d := range dims {
				v := min(max(u+width*(2*rng.Float64()-1), 0), 0.999999)
				idx[m] = uint32(v * float64(d))
			}
		case 1: // block-diagonal: all indices in the same block
			b := rng.IntN(blocks)
			for m, d := range dims {
				idx[m] = uint32((float64(b) + rng.Float64()) / float64(blocks) * float64(d))
			}
		case 2: // power-law: indices crowd the low end
			for m, d := range dims {
				u := rng.Float64()
				idx[m] = uint32(u * u * u * float64(d))
			}
		default:
			for m, d := range dims {
				idx[m] = uint32(rng.IntN(d))
			}
		}
		x.Append(idx, 1)
	}
	return x
}

// familyExamples returns n examples of each family for SpTTM along mode 1,
// encoded to budget.
func familyExamples(t testing.TB, rng *rand.Rand, n int, budget graphenc.Budget) []Example {
	var ex []Example
	for range n {
		for f := range families {
			x := familyTensor(rng, f)
			g, err := graphenc.Encode(x, graphenc.SpTTMShape(3, 0), budget)
			if err != nil {
				t.Fatal(err)
			}
			v, err := features.Global(x, hetero.SpTTM, 0)
			if err != nil {
				t.Fatal(err)
			}
			ex = append(ex, Example{In: NewInput(g, v), Labels: []int{f}})
		}
	}
	return ex
}

// sanityConfig is the sanity model: the default architecture on a 32x32
// budget, one head over the four families.
func sanityConfig() Config {
	c := DefaultConfig("ttm", Head{Name: "cpu", Classes: families})
	c.Budget = graphenc.Budget{Rows: 32, Cols: 32}
	return c
}

// trainSanity trains the sanity model from seed: deterministic.
func trainSanity(t testing.TB, seed uint64) (*GCN, []Example, FitResult) {
	rng := rand.New(rand.NewPCG(seed, 1))
	c := sanityConfig()
	train := familyExamples(t, rng, 50, c.Budget)
	val := familyExamples(t, rng, 10, c.Budget)
	test := familyExamples(t, rng, 25, c.Budget)
	g, err := NewGCN(c, rng)
	if err != nil {
		t.Fatal(err)
	}
	g.Standardize(train)
	o := DefaultFitOptions
	o.Epochs, o.Seed = 30, seed
	res, err := g.Fit(train, val, o)
	if err != nil {
		t.Fatal(err)
	}
	return g, test, res
}

// TestSanityLearning: the GCN learns to tell the four families apart on
// held-out tensors.
func TestSanityLearning(t *testing.T) {
	start := time.Now()
	g, test, res := trainSanity(t, 7)
	correct := 0
	for _, e := range test {
		probs, err := g.Predict(e.In)
		if err != nil {
			t.Fatal(err)
		}
		best := 0
		for i, p := range probs[0] {
			if p > probs[0][best] {
				best = i
			}
		}
		if best == e.Labels[0] {
			correct++
		}
	}
	acc := float64(correct) / float64(len(test))
	t.Logf("%d epochs (best %d), train loss %.4f, val loss %.4f, held-out accuracy %.3f, %v", res.Epochs, res.BestEpoch, res.TrainLoss, res.ValLoss, acc, time.Since(start))
	if acc < 0.95 {
		t.Errorf("held-out accuracy %.3f, want at least 0.95", acc)
	}
}
