package formats

import (
	"fmt"
	"math"
)

// Summary describes a distribution of counts.
type Summary struct {
	Count int     // number of items summarised
	Min   int     // smallest count (0 when Count is 0)
	Max   int     // largest count
	Mean  float64 // mean count
	Std   float64 // population standard deviation
}

// CV returns the coefficient of variation Std/Mean, 0 for an empty summary.
func (s Summary) CV() float64 {
	if s.Mean == 0 {
		return 0
	}
	return s.Std / s.Mean
}

// summarize returns the Summary of counts.
func summarize[T int | uint32](counts []T) Summary {
	var s Summary
	var sum, sumsq float64
	for _, v := range counts {
		c := int(v)
		if s.Count == 0 || c < s.Min {
			s.Min = c
		}
		s.Max = max(s.Max, c)
		s.Count++
		f := float64(c)
		sum += f
		sumsq += f * f
	}
	if s.Count > 0 {
		s.Mean = sum / float64(s.Count)
		s.Std = math.Sqrt(max(sumsq/float64(s.Count)-s.Mean*s.Mean, 0))
	}
	return s
}

// ModeStats describes the slices and fibers of one mode of a tensor.
type ModeStats struct {
	Mode     int     // 0-based mode
	Dim      int     // dimension of the mode
	Slices   Summary // nonzeros per non-empty mode-n slice (all indices but mode n free)
	Fibers   Summary // nonzeros per non-empty mode-n fiber (only mode n free)
	Distinct int     // number of distinct coordinates (nonzeros without duplicates)
}

// ModeStats counts the non-empty slices and fibers of mode n and the
// distribution of nonzeros over them. Duplicate coordinates count once per
// stored nonzero. It does not modify t.
func (t *COO) ModeStats(n int) (ModeStats, error) {
	if err := checkModes([]int{n}, t.Order(), false); err != nil {
		return ModeStats{}, err
	}
	st := ModeStats{Mode: n, Dim: t.Dims[n]}
	// Counted per rank among the non-empty slices, not per index: a mode
	// of 2^32 indices and a few nonzeros must not need a count per index.
	r, bad := RankIndices(t.Inds[n], t.Dims[n])
	if bad >= 0 {
		return ModeStats{}, fmt.Errorf("nonzero %d: mode %d index %d out of range 1 to %d", bad+1, n+1, uint64(t.Inds[n][bad])+1, t.Dims[n])
	}
	st.Slices = summarize(r.Counts())

	// Fibers: sort a permutation by the other modes, then by mode n, and
	// count runs of equal fiber coordinates (and of equal full coordinates).
	modes := make([]int, 0, t.Order())
	for m := range t.Order() {
		if m != n {
			modes = append(modes, m)
		}
	}
	modes = append(modes, n)
	// The indices in that order, read in sequence (COO.sortedArrays), not
	// through a permutation.
	inds, _ := t.sortedArrays(modes, t.sortLead(modes), false)
	fiber, own := inds[:len(inds)-1], inds[len(inds)-1]
	var perFiber []int
	run := 0
	for k := range t.NNZ() {
		if k > 0 {
			same := true
			for _, ind := range fiber {
				if ind[k] != ind[k-1] {
					same = false
					break
				}
			}
			if !same {
				perFiber = append(perFiber, run)
				run = 0
				st.Distinct++
			} else if own[k] != own[k-1] {
				st.Distinct++
			}
		}
		run++
	}
	if run > 0 {
		perFiber = append(perFiber, run)
		st.Distinct++
	}
	st.Fibers = summarize(perFiber)
	return st, nil
}
