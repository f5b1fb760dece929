package model

import (
	"errors"
	"fmt"
	"math"
	"slices"
)

// knnNeighbours is k of the kNN baseline.
const knnNeighbours = 5

// knnClassifier is k nearest neighbours on standardised global features
// (so that no feature's scale dominates the distance), by brute force:
// the training sets hold thousands of examples of 23 features, which a
// linear scan reads in well under a millisecond.
//
// It is written here rather than taken from golearn, whose knn package
// compiles only with cgo and breaks ties (between equal distances, and
// between formats with equal votes) in Go's random map order, so that two
// evaluations with one seed differed. Here every tie has a fixed answer:
// among equal distances the earlier example is nearer; among formats with
// equal votes, the one whose voters are nearer in sum wins, then the one
// listed first.
type knnClassifier struct {
	formats   []string
	mean, std []float64
	nf        int
	x         []float64 // the standardised examples, nf per row
	label     []int     // each example's format, an index into formats
}

func fitKNN(names []string, ex []BaselineExample) (classifier, error) {
	if len(ex) == 0 {
		return nil, errors.New("no examples")
	}
	nf := len(ex[0].Features)
	c := &knnClassifier{formats: names, mean: make([]float64, nf), std: make([]float64, nf), nf: nf,
		x: make([]float64, 0, nf*len(ex)), label: make([]int, len(ex))}
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
	for i, e := range ex {
		c.x = append(c.x, c.standardise(e.Features)...)
		if c.label[i] = slices.Index(names, e.Best); c.label[i] < 0 {
			return nil, fmt.Errorf("example %d: format %q is not one of %v", i+1, e.Best, names)
		}
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

// scores returns, per format, its votes among the k nearest examples
// plus less than half a vote for how near its voters are, all over k:
// the winner scores highest, and ranking by score breaks vote ties as
// knnClassifier says.
func (c *knnClassifier) scores(x []float64) ([]float64, error) {
	if len(x) != c.nf {
		return nil, errors.New("feature count differs from the examples'")
	}
	z := c.standardise(x)
	k := min(knnNeighbours, len(c.label))
	// near holds the k nearest so far, nearest first; a strict < keeps
	// the earlier of two examples at one distance.
	type neighbour struct {
		d float64
		i int
	}
	near := make([]neighbour, 0, k)
	for i := range c.label {
		row := c.x[i*c.nf : (i+1)*c.nf]
		d := 0.0
		for j, v := range row {
			d += (v - z[j]) * (v - z[j])
		}
		if len(near) == k && d >= near[k-1].d {
			continue
		}
		if len(near) < k {
			near = append(near, neighbour{})
		}
		at := len(near) - 1
		for ; at > 0 && near[at-1].d > d; at-- {
			near[at] = near[at-1]
		}
		near[at] = neighbour{d, i}
	}
	votes := make([]float64, len(c.formats))
	dist := make([]float64, len(c.formats))
	total := 0.0
	for _, n := range near {
		d := math.Sqrt(n.d)
		votes[c.label[n.i]]++
		dist[c.label[n.i]] += d
		total += d
	}
	s := make([]float64, len(c.formats))
	for f := range s {
		if votes[f] == 0 {
			continue
		}
		closeness := 0.0
		if total > 0 {
			closeness = 1 - dist[f]/total // in [0, 1]: 1 when its voters are all at distance 0
		}
		s[f] = (votes[f] + 0.49*closeness) / float64(k)
	}
	return s, nil
}
