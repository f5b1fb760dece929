package model

import (
	"bytes"
	"math"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"sync"
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

// sanity trains the sanity model once for the tests that need it.
var sanity struct {
	once sync.Once
	g    *GCN
	test []Example
	res  FitResult
	took time.Duration
}

func sanityModel(t *testing.T) (*GCN, []Example, FitResult, time.Duration) {
	sanity.once.Do(func() {
		start := time.Now()
		sanity.g, sanity.test, sanity.res = trainSanity(t, 7)
		sanity.took = time.Since(start)
	})
	if sanity.g == nil {
		t.Fatal("training the sanity model failed")
	}
	return sanity.g, sanity.test, sanity.res, sanity.took
}

const sanityFile = "testdata/sanity.onnx"

// TestSanityLearning: the GCN learns to tell the four families apart on
// held-out tensors.
func TestSanityLearning(t *testing.T) {
	g, test, res, took := sanityModel(t)
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
	t.Logf("%d epochs (best %d), train loss %.4f, val loss %.4f, held-out accuracy %.3f, %v", res.Epochs, res.BestEpoch, res.TrainLoss, res.ValLoss, acc, took)
	if acc < 0.95 {
		t.Errorf("held-out accuracy %.3f, want at least 0.95", acc)
	}
}

// TestSanityFixture regenerates testdata/sanity.onnx (training is
// deterministic) and compares it byte for byte with the committed file;
// SPARSETUNE_UPDATE_FIXTURES=1 rewrites it instead. The bytes depend on
// float64 rounding: where the compiler may fuse multiply-adds
// (exactRounding false: arm64, ppc64le, s390x, riscv64, GOAMD64=v3 and
// up) the regenerated model must instead predict the held-out families
// as the committed file does, with probabilities within 0.001.
func TestSanityFixture(t *testing.T) {
	g, test, _, _ := sanityModel(t)
	data, err := g.ExportONNX()
	if err != nil {
		t.Fatal(err)
	}
	if os.Getenv("SPARSETUNE_UPDATE_FIXTURES") == "1" {
		if err := os.WriteFile(sanityFile, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(sanityFile)
	if err != nil {
		t.Fatalf("%v (run with SPARSETUNE_UPDATE_FIXTURES=1 to create it)", err)
	}
	tol := 1e-4
	if !bytes.Equal(data, want) {
		if exactRounding {
			t.Fatalf("regenerated sanity model (%d bytes) differs from %s (%d bytes)", len(data), sanityFile, len(want))
		}
		tol = 1e-3
		t.Logf("regenerated sanity model (%d bytes) differs from %s (%d bytes), as it may where this build (%s) fuses multiply-adds: comparing predictions within %v",
			len(data), sanityFile, len(want), runtime.GOARCH, tol)
	}
	// The committed file predicts the held-out families as the Go model does.
	m, err := LoadONNX(sanityFile)
	if err != nil {
		t.Fatal(err)
	}
	worst := 0.0
	for _, e := range test {
		got, err := m.Run(e.In)
		if err != nil {
			t.Fatal(err)
		}
		wantP, _ := g.Predict(e.In)
		for i := range got[0] {
			worst = max(worst, math.Abs(got[0][i]-wantP[0][i]))
			if math.Abs(got[0][i]-wantP[0][i]) > tol {
				t.Fatalf("%s: probability %v, Go forward %v", sanityFile, got[0], wantP[0])
			}
		}
		if a, b := slices.Index(got[0], slices.Max(got[0])), slices.Index(wantP[0], slices.Max(wantP[0])); a != b {
			t.Fatalf("%s: picks class %d, Go forward %d", sanityFile, a, b)
		}
	}
	t.Logf("%d held-out examples: probabilities within %.2g of the Go forward", len(test), worst)
}
