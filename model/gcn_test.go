package model

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/sparsetune/sparsetune/graphenc"
)

// randomInput returns an input of the config's budget with some padded
// nodes, as graphenc would give for a graph smaller than the budget.
func randomInput(c Config, rng *rand.Rand) *Input {
	br, bc, f := c.Budget.Rows, c.Budget.Cols, graphenc.NodeFeatures
	in := &Input{Adj: make([]float32, br*bc), RowFeat: make([]float32, br*f), ColFeat: make([]float32, bc*f),
		RowMask: make([]float32, br), ColMask: make([]float32, bc)}
	rows, cols := 1+rng.IntN(br), 1+rng.IntN(bc)
	for r := range rows {
		in.RowMask[r] = 1
		for j := range f {
			in.RowFeat[r*f+j] = rng.Float32()
		}
		for c := range cols {
			if rng.IntN(2) == 0 {
				in.Adj[r*bc+c] = rng.Float32()
			}
		}
	}
	for c := range cols {
		in.ColMask[c] = 1
		for j := range f {
			in.ColFeat[c*f+j] = rng.Float32()
		}
	}
	for i := range in.Global {
		in.Global[i] = 3 * rng.NormFloat64()
	}
	return in
}

func smallConfig() Config {
	return Config{Op: "ttm", Budget: graphenc.Budget{Rows: 5, Cols: 4}, Hidden: 7, MLP: [2]int{6, 5},
		Heads: []Head{{"cpu", []string{"a", "b", "c"}}, {"gpu", []string{"x", "y"}}}}
}

// TestGradientCheck compares the backward pass with central finite
// differences on every weight of a small GCN with two heads.
func TestGradientCheck(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	c := smallConfig()
	g, err := NewGCN(c, rng)
	if err != nil {
		t.Fatal(err)
	}
	for i := range g.Params {
		g.Params[i] += 0.1 * rng.NormFloat64() // biases away from zero too
	}
	for i := range g.Mean {
		g.Mean[i], g.Std[i] = rng.NormFloat64(), 0.5+rng.Float64()
	}
	p := g.newPass()
	for trial := range 6 {
		in := randomInput(c, rng)
		e := &Example{In: in, Labels: []int{rng.IntN(3), rng.IntN(2)}}
		switch trial {
		case 3:
			e.Labels[0] = -1 // a head without a label contributes nothing
		case 4, 5:
			// Soft targets on the first head (and on both in trial 5).
			e.Targets = [][]float64{{0.6, 0.3, 0.1}, nil}
			if trial == 5 {
				e.Targets[1] = []float64{0.2, 0.8}
			}
		}
		grad := make([]float64, len(g.Params))
		g.forward(p, in)
		g.backward(p, e, grad)
		const eps = 1e-6
		worst := 0.0
		for i := range g.Params {
			orig := g.Params[i]
			g.Params[i] = orig + eps
			g.forward(p, in)
			lp := p.loss(e)
			g.Params[i] = orig - eps
			g.forward(p, in)
			lm := p.loss(e)
			g.Params[i] = orig
			num := (lp - lm) / (2 * eps)
			den := max(math.Abs(num)+math.Abs(grad[i]), 1e-4)
			if rel := math.Abs(num-grad[i]) / den; rel > worst {
				worst = rel
				if rel > 1e-3 {
					t.Errorf("trial %d: weight %d: backward %.8g, finite difference %.8g (relative error %.2g)", trial, i, grad[i], num, rel)
				}
			}
		}
		t.Logf("trial %d: %d weights, worst relative error %.2g", trial, len(g.Params), worst)
	}
}

// TestForwardProbabilities checks that each head's probabilities sum to
// one and that the forward pass is a function of its input alone.
func TestForwardProbabilities(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	c := smallConfig()
	g, _ := NewGCN(c, rng)
	p := g.newPass()
	in, other := randomInput(c, rng), randomInput(c, rng)
	g.forward(p, in)
	var first [][]float64
	for _, hp := range p.hs {
		sum := 0.0
		for _, v := range hp.probs {
			sum += v
		}
		if math.Abs(sum-1) > 1e-12 {
			t.Fatalf("probabilities sum to %v", sum)
		}
		first = append(first, append([]float64(nil), hp.probs...))
	}
	g.forward(p, other)
	g.forward(p, in)
	for k, hp := range p.hs {
		for i, v := range hp.probs {
			if v != first[k][i] {
				t.Fatalf("head %d: a pass in between changed the result", k)
			}
		}
	}
}

// randomExamples returns n examples of random inputs for c with random
// labels for its two heads (the second unlabelled a third of the time),
// the same n examples on every call.
func randomExamples(c Config, n int) []Example {
	rng := rand.New(rand.NewPCG(5, 6))
	ex := make([]Example, n)
	for i := range ex {
		ex[i] = Example{In: randomInput(c, rng), Labels: []int{rng.IntN(3), rng.IntN(3) - 1}}
	}
	return ex
}

// TestFitDeterministic: the same seed gives the same weights, bit for bit,
// whatever the scheduling of the gradient goroutines.
func TestFitDeterministic(t *testing.T) {
	c := smallConfig()
	ex := randomExamples(c, 40)
	fit := func() []float64 {
		g, _ := NewGCN(c, rand.New(rand.NewPCG(9, 9)))
		g.Standardize(ex[:30])
		o := DefaultFitOptions
		o.Epochs, o.BatchSize = 4, 7
		if _, err := g.Fit(ex[:30], ex[30:], o); err != nil {
			t.Fatal(err)
		}
		return g.Params
	}
	a, b := fit(), fit()
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("weight %d: %v then %v", i, a[i], b[i])
		}
	}
}

// TestFitAverage: with Average set, the weights kept are the moving
// average of the iterates, not the last iterate. One epoch of one batch is
// one Adam step from w0 to w1, so the average is w0 + (1-d)(w1-w0) with d
// the step's decay, min(Average, 2/11).
func TestFitAverage(t *testing.T) {
	c := smallConfig()
	ex := randomExamples(c, 12)
	fit := func(average float64) (w0, w []float64) {
		g, _ := NewGCN(c, rand.New(rand.NewPCG(9, 9)))
		g.Standardize(ex)
		w0 = slices.Clone(g.Params)
		o := DefaultFitOptions
		o.Epochs, o.BatchSize, o.Average = 1, len(ex), average
		if _, err := g.Fit(ex, nil, o); err != nil {
			t.Fatal(err)
		}
		return w0, g.Params
	}
	w0, w1 := fit(0)
	for _, average := range []float64{0.05, 0.999} {
		_, got := fit(average)
		d := min(average, 2.0/11)
		moved := 0
		for i := range got {
			want := w0[i] + (1-d)*(w1[i]-w0[i])
			if math.Abs(got[i]-want) > 1e-12*max(1, math.Abs(want)) {
				t.Fatalf("average %g: weight %d is %v, want %v (w0 %v, w1 %v)", average, i, got[i], want, w0[i], w1[i])
			}
			if w1[i] != w0[i] {
				moved++
			}
		}
		if moved == 0 {
			t.Fatal("the Adam step moved no weight: the test checks nothing")
		}
	}
}

func TestFitErrors(t *testing.T) {
	c := smallConfig()
	g, _ := NewGCN(c, rand.New(rand.NewPCG(1, 1)))
	in := randomInput(c, rand.New(rand.NewPCG(2, 2)))
	short := *in
	short.Adj = short.Adj[:3]
	for _, tc := range []struct {
		ex   []Example
		o    FitOptions
		want string
	}{
		{nil, DefaultFitOptions, "no training examples"},
		{[]Example{{In: in, Labels: []int{0}}}, DefaultFitOptions, "1 labels for 2 heads"},
		{[]Example{{In: in, Labels: []int{3, 0}}}, DefaultFitOptions, `label 3 of head "cpu" beyond its 3 classes`},
		{[]Example{{In: &short, Labels: []int{0, 0}}}, DefaultFitOptions, "arrays of 3"},
		{[]Example{{In: in, Labels: []int{0, 0}}}, FitOptions{Epochs: 1}, "must be positive"},
		{[]Example{{In: in, Labels: []int{0, 0}}}, FitOptions{Epochs: 1, BatchSize: 1, LearningRate: 1, Patience: 1, Average: 1}, "must be in [0, 1)"},
		{[]Example{{In: in, Labels: []int{0, 0}}}, FitOptions{Epochs: 1, BatchSize: 1, LearningRate: 1, Patience: 1, Average: -0.5}, "must be in [0, 1)"},
		{[]Example{{In: in, Labels: []int{0, 0}, Targets: [][]float64{{1, 0}}}}, DefaultFitOptions, `target of head "cpu" has 2 classes, expected 3`},
	} {
		if _, err := g.Fit(tc.ex, nil, tc.o); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("got %v, want an error containing %q", err, tc.want)
		}
	}
}
