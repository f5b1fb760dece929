//go:build cgo

package model

import (
	"fmt"
	"math"
	"slices"

	"github.com/sjwhitworth/golearn/base"
	"github.com/sjwhitworth/golearn/knn"
)

// knnAvailable: golearn's knn package compiles only with cgo.
const knnAvailable = true

// knnNeighbours is k. Odd, but with three or four formats a vote can
// still tie (2-2-1), and golearn then takes whichever tied format its map
// yields first: the knn baseline's scores can move in the third decimal
// between runs of the same seed (docs/model.md, "Baselines").
const knnNeighbours = 5

// knnClassifier is golearn's kNN on standardised features, so that no
// feature's scale dominates the distance.
type knnClassifier struct {
	knn       *knn.KNNClassifier
	formats   []string
	class     *base.CategoricalAttribute
	mean, std []float64
}

func fitKNN(names []string, ex []BaselineExample) (classifier, error) {
	nf := len(ex[0].Features)
	c := &knnClassifier{formats: names, mean: make([]float64, nf), std: make([]float64, nf)}
	for _, e := range ex {
		for j, v := range e.Features {
			c.mean[j] += v / float64(len(ex))
		}
	}
	for _, e := range ex {
		for j, v := range e.Features {
			c.std[j] += (v - c.mean[j]) * (v - c.mean[j]) / float64(len(ex))
		}
	}
	for j := range c.std {
		c.std[j] = math.Sqrt(c.std[j])
		if c.std[j] < 1e-12 {
			c.std[j] = 1 // a constant feature: leave it at 0
		}
	}
	rows, labels := make([][]float64, len(ex)), make([]string, len(ex))
	c.class = base.NewCategoricalAttribute()
	c.class.SetName("format")
	for _, f := range names {
		c.class.GetSysValFromString(f) // fix the class values' order
	}
	for i, e := range ex {
		rows[i], labels[i] = c.standardise(e.Features), e.Best
	}
	inst, err := instances(rows, c.class, labels)
	if err != nil {
		return nil, err
	}
	c.knn = knn.NewKnnClassifier("euclidean", "linear", min(knnNeighbours, len(ex)))
	c.knn.AllowOptimisations = false // the C distance loop buys nothing at this size
	if err := c.knn.Fit(inst); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *knnClassifier) standardise(x []float64) []float64 {
	z := make([]float64, len(x))
	for j, v := range x {
		z[j] = (v - c.mean[j]) / c.std[j]
	}
	return z
}

func (c *knnClassifier) scores(x []float64) ([]float64, error) {
	inst, err := instances([][]float64{c.standardise(x)}, c.class, []string{c.formats[0]})
	if err != nil {
		return nil, err
	}
	pred, err := c.knn.Predict(inst)
	if err != nil {
		return nil, err
	}
	got := base.GetClass(pred, 0)
	i := slices.Index(c.formats, got)
	if i < 0 {
		return nil, fmt.Errorf("knn predicted %q, not one of %v", got, c.formats)
	}
	s := make([]float64, len(c.formats))
	s[i] = 1
	return s, nil
}
