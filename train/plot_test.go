package train

import (
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
