package model

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
)

// Example is one training example: the model's input and a label per head
// (a class index, or -1 where the head has no label for it).
//
// Targets, when set, holds per head a distribution over its classes that
// training fits instead of the label (cross-entropy against it): a soft
// target that gives near-ties part of the weight, so that picking a format
// 1% slower than the best costs little and one 3x slower costs a lot. A
// head with a nil entry, or no label, trains on its label alone.
type Example struct {
	In      *Input
	Labels  []int
	Targets [][]float64
}

// target returns e's target for head k: Targets[k] when set, else nil.
func (e *Example) target(k int) []float64 {
	if k < len(e.Targets) {
		return e.Targets[k]
	}
	return nil
}

// FitOptions control training.
type FitOptions struct {
	Epochs       int     // most passes over the training set
	BatchSize    int     // examples per Adam step
	LearningRate float64 // Adam's step size
	Patience     int     // epochs without a better validation loss before stopping
	Seed         uint64  // shuffling seed: the same seed gives the same model
	// Average, when in (0, 1), makes the weights evaluated each epoch,
	// and kept, an exponential moving average of Adam's iterates with
	// this decay per step (less early on: min(Average, (1+t)/(10+t)) at
	// step t), rather than the last step's weights. The average moves
	// less from one epoch to the next than the iterates do, so which
	// epoch early stopping keeps matters less. Zero keeps the iterates.
	Average float64
	// Progress, when set, is called after each epoch.
	Progress func(epoch int, trainLoss, valLoss float64)
}

// DefaultFitOptions are the settings the sanity test and sparsetune train
// start from.
var DefaultFitOptions = FitOptions{Epochs: 60, BatchSize: 16, LearningRate: 1e-3, Patience: 8, Seed: 1}

// FitResult says how training went.
type FitResult struct {
	Epochs       int     // epochs run
	BestEpoch    int     // the epoch whose weights were kept (1-based)
	TrainLoss    float64 // mean loss per labelled head on the training set at the best epoch
	ValLoss      float64 // the same on the validation set
	StoppedEarly bool
}

// gradChunks is how many parts a batch's gradient is summed in, whatever
// the number of cores: each part sums its examples in order and the parts
// are added in order, so training is deterministic for a seed.
const gradChunks = 4

// Standardize sets Mean and Std to those of the examples' global features
// (a constant feature gets Std 1), and TrainMin and TrainMax to their
// range.
func (g *GCN) Standardize(ex []Example) {
	if len(ex) == 0 {
		return
	}
	for i := range g.Mean {
		var s, s2 float64
		for _, e := range ex {
			s += e.In.Global[i]
		}
		m := s / float64(len(ex))
		for _, e := range ex {
			s2 += (e.In.Global[i] - m) * (e.In.Global[i] - m)
		}
		sd := math.Sqrt(s2 / float64(len(ex)))
		if sd < 1e-9 {
			sd = 1
		}
		g.Mean[i], g.Std[i] = m, sd
		g.TrainMin[i], g.TrainMax[i] = math.Inf(1), math.Inf(-1)
		for _, e := range ex {
			g.TrainMin[i], g.TrainMax[i] = min(g.TrainMin[i], e.In.Global[i]), max(g.TrainMax[i], e.In.Global[i])
		}
	}
}

// Fit trains the GCN with Adam on the mean negative log-likelihood over
// labelled heads, in seeded-shuffled mini-batches, and keeps the weights of
// the epoch with the lowest validation loss (the training loss when val is
// empty), stopping after Patience epochs without improvement. With
// o.Average set, the weights scored and kept at each epoch are the moving
// average of the iterates. Call Standardize first.
func (g *GCN) Fit(train, val []Example, o FitOptions) (FitResult, error) {
	var res FitResult
	if len(train) == 0 {
		return res, errors.New("fit: no training examples")
	}
	if o.Epochs < 1 || o.BatchSize < 1 || o.LearningRate <= 0 || o.Patience < 1 {
		return res, fmt.Errorf("fit: epochs %d, batch size %d, learning rate %g, patience %d: all must be positive", o.Epochs, o.BatchSize, o.LearningRate, o.Patience)
	}
	if !(o.Average >= 0 && o.Average < 1) {
		return res, fmt.Errorf("fit: weight average decay %g: must be in [0, 1)", o.Average)
	}
	for i, e := range slices.Concat(train, val) {
		if err := g.Config.checkInput(e.In); err != nil {
			return res, fmt.Errorf("fit: example %d: %w", i, err)
		}
		if len(e.Labels) != len(g.Config.Heads) {
			return res, fmt.Errorf("fit: example %d has %d labels for %d heads", i, len(e.Labels), len(g.Config.Heads))
		}
		for k, y := range e.Labels {
			if y >= len(g.Config.Heads[k].Classes) {
				return res, fmt.Errorf("fit: example %d: label %d of head %q beyond its %d classes", i, y, g.Config.Heads[k].Name, len(g.Config.Heads[k].Classes))
			}
			if q := e.target(k); q != nil && (y < 0 || len(q) != len(g.Config.Heads[k].Classes)) {
				return res, fmt.Errorf("fit: example %d: target of head %q has %d classes, expected %d, and needs a label", i, g.Config.Heads[k].Name, len(q), len(g.Config.Heads[k].Classes))
			}
		}
	}
	rng := rand.New(rand.NewPCG(o.Seed, o.Seed^0x9e3779b97f4a7c15))
	adam := newAdam(len(g.Params), o.LearningRate)
	passes := make([]*pass, gradChunks)
	grads := make([][]float64, gradChunks)
	for i := range passes {
		passes[i], grads[i] = g.newPass(), make([]float64, len(g.Params))
	}
	best := slices.Clone(g.Params)
	bestLoss := math.Inf(1)
	// avg is the moving average of the iterates (o.Average), iter the
	// iterates while avg is in g.Params for evaluation.
	var avg, iter []float64
	if o.Average > 0 {
		avg, iter = slices.Clone(g.Params), make([]float64, len(g.Params))
	}
	steps := 0
	order := make([]int, len(train))
	for i := range order {
		order[i] = i
	}
	for epoch := 1; epoch <= o.Epochs; epoch++ {
		rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		for lo := 0; lo < len(order); lo += o.BatchSize {
			batch := order[lo:min(lo+o.BatchSize, len(order))]
			var wg sync.WaitGroup
			for c := range gradChunks {
				wg.Add(1)
				go func() {
					defer wg.Done()
					clear(grads[c])
					for _, i := range batch[c*len(batch)/gradChunks : (c+1)*len(batch)/gradChunks] {
						g.forward(passes[c], train[i].In)
						g.backward(passes[c], &train[i], grads[c])
					}
				}()
			}
			wg.Wait()
			n := 0
			for _, i := range batch {
				for _, y := range train[i].Labels {
					if y >= 0 {
						n++
					}
				}
			}
			if n == 0 {
				continue
			}
			for c := 1; c < gradChunks; c++ {
				axpy(grads[0], grads[c], 1)
			}
			for i := range grads[0] {
				grads[0][i] /= float64(n)
			}
			adam.step(g.Params, grads[0])
			if avg != nil {
				steps++
				w := 1 - min(o.Average, float64(1+steps)/float64(10+steps))
				for i, p := range g.Params {
					avg[i] += w * (p - avg[i])
				}
			}
		}
		if avg != nil {
			copy(iter, g.Params)
			copy(g.Params, avg)
		}
		trainLoss := g.meanLoss(passes, train)
		valLoss := trainLoss
		if len(val) > 0 {
			valLoss = g.meanLoss(passes, val)
		}
		res.Epochs = epoch
		if o.Progress != nil {
			o.Progress(epoch, trainLoss, valLoss)
		}
		if valLoss < bestLoss {
			bestLoss, res.BestEpoch, res.TrainLoss, res.ValLoss = valLoss, epoch, trainLoss, valLoss
			copy(best, g.Params)
		} else if epoch-res.BestEpoch >= o.Patience {
			res.StoppedEarly = true
			break
		}
		if avg != nil {
			copy(g.Params, iter)
		}
	}
	copy(g.Params, best)
	return res, nil
}

// meanLoss returns the mean loss per labelled head over ex, using the
// passes as scratch in parallel.
func (g *GCN) meanLoss(passes []*pass, ex []Example) float64 {
	sums := make([]float64, len(passes))
	counts := make([]int, len(passes))
	var wg sync.WaitGroup
	for c := range passes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, e := range ex[c*len(ex)/len(passes) : (c+1)*len(ex)/len(passes)] {
				g.forward(passes[c], e.In)
				sums[c] += passes[c].loss(&e)
				for _, y := range e.Labels {
					if y >= 0 {
						counts[c]++
					}
				}
			}
		}()
	}
	wg.Wait()
	s, n := 0.0, 0
	for c := range sums {
		s, n = s+sums[c], n+counts[c]
	}
	return s / float64(max(n, 1))
}

// Predict returns each head's class probabilities for in.
func (g *GCN) Predict(in *Input) ([][]float64, error) {
	if err := g.Config.checkInput(in); err != nil {
		return nil, err
	}
	p := g.newPass()
	g.forward(p, in)
	out := make([][]float64, len(p.hs))
	for k := range p.hs {
		out[k] = p.hs[k].probs
	}
	return out, nil
}

// adam is the Adam optimiser (Kingma and Ba) with the usual constants.
type adam struct {
	lr, b1, b2, eps float64
	t               int
	m, v            []float64
}

func newAdam(n int, lr float64) *adam {
	return &adam{lr: lr, b1: 0.9, b2: 0.999, eps: 1e-8, m: make([]float64, n), v: make([]float64, n)}
}

func (a *adam) step(params, grad []float64) {
	a.t++
	c1 := 1 - math.Pow(a.b1, float64(a.t))
	c2 := 1 - math.Pow(a.b2, float64(a.t))
	for i, gi := range grad {
		a.m[i] = a.b1*a.m[i] + (1-a.b1)*gi
		a.v[i] = a.b2*a.v[i] + (1-a.b2)*gi*gi
		params[i] -= a.lr * (a.m[i] / c1) / (math.Sqrt(a.v[i]/c2) + a.eps)
	}
}
