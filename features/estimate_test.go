package features

import (
	"math"
	"math/rand/v2"
	"testing"
)

// estimateByDefinition is estimate as written before countHist: f_i
// tallied in an array of every i up to the largest count, walked in
// order of i.
func estimateByDefinition(sampled []uint32, p float64, nnz int, space float64) groupStats {
	var g groupStats
	d := float64(len(sampled))
	if d == 0 {
		return g
	}
	total := float64(nnz)
	var sampledNNZ, pairs float64
	var most uint32
	for _, c := range sampled {
		sampledNNZ += float64(c)
		pairs += float64(c) * (float64(c) - 1)
		most = max(most, c)
	}
	freq := make([]float64, most+1)
	for _, c := range sampled {
		freq[c]++
	}
	g.total = total
	if p >= 1 {
		g.count, g.max, g.sq = d, float64(most), pairs+sampledNNZ
		for c, f := range freq {
			if f > 0 {
				g.hist = append(g.hist, bin{float64(c), f})
			}
		}
		return g
	}
	f1, f2 := freq[1], 0.0
	if len(freq) > 2 {
		f2 = freq[2]
	}
	chao := d + f1*(f1-1)/(2*(f2+1))
	q := 1 - p
	var num, den float64
	for c, f := range freq {
		if f > 0 {
			num += math.Pow(q, float64(c)) * f
			den += float64(c) * p * math.Pow(q, float64(c)-1) * f
		}
	}
	shlosser := d
	if den > 0 {
		shlosser += f1 * num / den
	}
	g.count = math.Sqrt(min(chao, space, total) * min(shlosser, space, total))
	g.count = min(max(g.count, d), space, total)
	mean := total / g.count
	fm := float64(most)
	g.max = min(max((fm-math.Sqrt(fm))/p, mean), total)
	if fm <= noiseTop(p*mean, g.count) {
		g.max = math.Sqrt(g.max * mean)
	}
	g.sq = max(total+pairs/(p*p), total*mean)
	weight, scale := g.count/d, total*d/(g.count*sampledNNZ)
	for c, f := range freq {
		if f == 0 {
			continue
		}
		l := max(1, math.Round(float64(c)*scale))
		if n := len(g.hist); n > 0 && g.hist[n-1].length == l {
			g.hist[n-1].weight += f * weight
		} else {
			g.hist = append(g.hist, bin{l, f * weight})
		}
	}
	return g
}

// TestEstimateByDefinition checks estimate against estimateByDefinition,
// to the bit: the default model learnt from features estimate computed
// the old way. The counts cross denseCounts (sorted, not tallied), some
// far past it, and the groups come in no order.
func TestEstimateByDefinition(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 16))
	for _, c := range []struct {
		name   string
		groups int
		draw   func() uint32
	}{
		{"one each", 500, func() uint32 { return 1 }},
		{"small", 3000, func() uint32 { return 1 + uint32(rng.IntN(4)) }},
		{"around the dense end", 700, func() uint32 { return denseCounts - 3 + uint32(rng.IntN(6)) }},
		{"long tail", 2000, func() uint32 { return 1 + uint32(rng.ExpFloat64()*20) }},
		{"a few huge", 40, func() uint32 { return 1 + uint32(rng.IntN(5000)) }},
		{"more big than the buffer", 300, func() uint32 { return 100 + uint32(rng.IntN(3)) }},
		{"odd length", 7, func() uint32 { return 1 + uint32(rng.IntN(50)) }},
	} {
		counts := make([]uint32, c.groups)
		var sum int
		for i := range counts {
			counts[i] = c.draw()
			sum += int(counts[i])
		}
		for _, p := range []float64{1, 0.5, 0.01, 1e-4} {
			nnz := int(float64(sum) / p)
			space := float64(c.groups) * 10
			got, want := estimate(counts, p, nnz, space), estimateByDefinition(counts, p, nnz, space)
			if got.count != want.count || got.total != want.total || got.max != want.max || got.sq != want.sq {
				t.Errorf("%s, p = %g: estimate gives count %v total %v max %v sq %v, by definition %v %v %v %v",
					c.name, p, got.count, got.total, got.max, got.sq, want.count, want.total, want.max, want.sq)
			}
			if len(got.hist) != len(want.hist) {
				t.Errorf("%s, p = %g: %d bins, by definition %d", c.name, p, len(got.hist), len(want.hist))
				continue
			}
			for i := range got.hist {
				if got.hist[i] != want.hist[i] {
					t.Errorf("%s, p = %g: bin %d is %v, by definition %v", c.name, p, i, got.hist[i], want.hist[i])
					break
				}
			}
		}
	}
}

// TestEstimateAllocations checks that estimate allocates its histogram
// only, whatever the largest count.
func TestEstimateAllocations(t *testing.T) {
	counts := make([]uint32, 4096)
	for i := range counts {
		counts[i] = 1 + uint32(i%7)
	}
	counts[5], counts[900] = 3000, 40 // past denseCounts
	if n := testing.AllocsPerRun(20, func() { estimate(counts, 0.01, 1e6, 1e6) }); n > 1 {
		t.Errorf("estimate allocates %v times a call, want 1", n)
	}
}
