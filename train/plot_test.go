package train

import (
	"math"
	"slices"
	"strconv"
	"testing"
)

// TestDistinctTicks: every axis range gets labels that tell its ticks
// apart, with the default's labels where they already do.
func TestDistinctTicks(t *testing.T) {
	for _, c := range []struct {
		lo, hi float64
		want   []string // the labels, where the default's are kept
	}{
		{1.06, 1.14, nil}, // the default labels four ticks "1.1"
		{1.08, 1.1, nil},
		{0.999, 1.001, nil},
		{1e-7, 2e-7, nil},
		{0, 1, []string{"0.0", "0.5", "1.0"}},
		{1, 100, []string{"20", "60", "100"}},
	} {
		var labels []string
		for _, tk := range (distinctTicks{}).Ticks(c.lo, c.hi) {
			if tk.Label == "" {
				continue
			}
			if v, err := strconv.ParseFloat(tk.Label, 64); err != nil || v < c.lo-(c.hi-c.lo) || v > c.hi+(c.hi-c.lo) {
				t.Errorf("[%g, %g]: label %q outside the range", c.lo, c.hi, tk.Label)
			}
			labels = append(labels, tk.Label)
		}
		seen := map[string]bool{}
		for _, l := range labels {
			if seen[l] {
				t.Errorf("[%g, %g]: labels %v repeat %q", c.lo, c.hi, labels, l)
			}
			seen[l] = true
		}
		if len(labels) < 2 {
			t.Errorf("[%g, %g]: labels %v", c.lo, c.hi, labels)
		}
		if c.want != nil && !slices.Equal(labels, c.want) {
			t.Errorf("[%g, %g]: labels %v, want the default's %v", c.lo, c.hi, labels, c.want)
		}
	}
}

// TestRatioAxisMin: the oracle ratio's axis starts below every bar, on a
// step of 0.05, and at 0 where the bars are far from 1.
func TestRatioAxisMin(t *testing.T) {
	for _, c := range []struct{ lowest, want float64 }{
		{1, 0.95},
		{0.97, 0.9},
		{0.95, 0.9},
		{0.895, 0.8},
		{0.5, 0.45},
		{0.49, 0},
		{0, 0},
		{math.NaN(), 0},
	} {
		got := ratioAxisMin(c.lowest)
		if math.Abs(got-c.want) > 1e-9 || (c.lowest > 0 && got >= c.lowest) {
			t.Errorf("ratioAxisMin(%g) = %g, want %g, below the bar", c.lowest, got, c.want)
		}
	}
}

// TestAnsweringPicks: the confusion matrices show the model's answers
// where the report has them, the network's where it has only those.
func TestAnsweringPicks(t *testing.T) {
	for _, c := range []struct {
		have []string
		want string
	}{
		{[]string{PredictorGCN, PredictorBoosted, PredictorDefault, "rule"}, PredictorDefault},
		{[]string{"rule", PredictorGCN}, PredictorGCN},
		{[]string{"rule"}, ""},
	} {
		rep := &Report{}
		for _, name := range c.have {
			rep.Picks = append(rep.Picks, Picks{Predictor: name})
		}
		got := ""
		if p := answeringPicks(rep); p != nil {
			got = p.Predictor
		}
		if got != c.want {
			t.Errorf("picks of %v: shown %q, want %q", c.have, got, c.want)
		}
	}
}
