package hetero

import (
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
)

// synthProfile returns a device profile with the same λ, μ and bytes per
// nonzero for both operations.
func synthProfile(name string, p, bMem, bLink, lambda, mu, bytesPerNNZ float64) DeviceProfile {
	o := OpProfile{Lambda: lambda, Mu: mu, BytesPerNNZ: bytesPerNNZ, Format: "synthetic", Rank: 16}
	kind := GPU
	if name == "cpu" {
		kind = CPU
	}
	return DeviceProfile{Name: name, Kind: kind, FMAGFlops: p, MemoryGBs: bMem, LinkGBs: bLink,
		Ops: map[string]OpProfile{"ttm": o, "mttkrp": o}}
}

var (
	cpuProf   = synthProfile("cpu", 100, 20, 0, 0.2, 2, 16)
	equalAcc  = synthProfile("acc:0", 100, 20, 0, 0.2, 2, 16) // the CPU's twin: no link to cross
	fastAcc   = synthProfile("acc:0", 1000, 200, 1e6, 0.2, 2, 16)
	slowLink  = synthProfile("acc:0", 1000, 200, 2, 0.2, 2, 16)
	allSplits = []Strategy{SplitPeak, SplitDynamic, SplitRandom, SplitCPU, SplitAcc}
)

// skewedSlices returns n slice sizes from a seeded power law, with some
// empty slices.
func skewedSlices(n int, seed uint64) []int64 {
	rng := rand.New(rand.NewPCG(seed, 7))
	s := make([]int64, n)
	for i := range s {
		if rng.IntN(10) == 0 {
			continue
		}
		s[i] = int64(1 + 1000*math.Pow(rng.Float64(), 4))
	}
	return s
}

func TestParseStrategy(t *testing.T) {
	for _, name := range Strategies() {
		s, err := ParseStrategy(name)
		if err != nil || s.String() != name {
			t.Errorf("%s: %v %v", name, s, err)
		}
	}
	if s, err := ParseStrategy("PEAK"); err != nil || s != SplitPeak {
		t.Errorf("PEAK: %v %v", s, err)
	}
	_, err := ParseStrategy("fair")
	if err == nil || !strings.Contains(err.Error(), `"fair"`) || !strings.Contains(err.Error(), "peak, dynamic, random, cpu, acc") {
		t.Errorf("error %v", err)
	}
}

// designShare is DESIGN.md's closed form, M_g/M, spelled as there.
func designShare(Pc, Pg, Bc, Bg, B, lambda, mu float64) float64 {
	num := Pg * Bg * B * (mu*Bc + lambda*Pc)
	return num / (num + Pc*Bc*(mu*Bg*B+lambda*Pg*B+lambda*Pg*Bg))
}

// TestPeakShareIsDesignFormula checks the per-nonzero form against
// DESIGN.md's formula when both sides share λ, μ and the bytes per
// nonzero.
func TestPeakShareIsDesignFormula(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for range 200 {
		Pc, Pg := 10+1000*rng.Float64(), 10+10000*rng.Float64()
		Bc, Bg, B := 5+100*rng.Float64(), 5+1000*rng.Float64(), 0.5+50*rng.Float64()
		lambda, mu, b := 0.01+0.99*rng.Float64(), 0.1+10*rng.Float64(), 4+40*rng.Float64()
		c := synthProfile("cpu", Pc, Bc, 0, lambda, mu, b)
		g := synthProfile("acc:0", Pg, Bg, B, lambda, mu, b)
		cc, err := c.Cost(SpTTM)
		if err != nil {
			t.Fatal(err)
		}
		gc, err := g.Cost(SpTTM)
		if err != nil {
			t.Fatal(err)
		}
		got, want := PeakShare(cc, gc), designShare(Pc, Pg, Bc, Bg, B, lambda, mu)
		if math.Abs(got-want) > 1e-12*want {
			t.Fatalf("share %v, DESIGN's formula %v (P %v %v, B %v %v %v, λ %v, μ %v)", got, want, Pc, Pg, Bc, Bg, B, lambda, mu)
		}
		// And the two sides then finish together: t_c = t_g.
		M := 1e9
		Mg := want * M
		tc := mu*(M-Mg)/(lambda*Pc*1e9) + (M-Mg)/(Bc*1e9)
		tg := mu*Mg/(lambda*Pg*1e9) + Mg/(Bg*1e9) + Mg/(B*1e9)
		if math.Abs(tc-tg) > 1e-9*tc {
			t.Fatalf("t_c %v, t_g %v", tc, tg)
		}
	}
}

func accFraction(s *Split) float64 {
	total := s.NNZ[0] + s.NNZ[1]
	if total == 0 {
		return 0
	}
	return float64(s.NNZ[OnAcc]) / float64(total)
}

func TestMapSlicesShares(t *testing.T) {
	// A job of seconds: dynamic's chunks are then small against it (its
	// tail and per-chunk costs are about 2·√(T·o), see ChunkNNZ).
	sizes := skewedSlices(5000, 1)
	for i := range sizes {
		sizes[i] *= 1000
	}
	fastFrac := map[Strategy]float64{}
	for _, tc := range []struct {
		name   string
		acc    DeviceProfile
		lo, hi float64 // accelerator's share of the nonzeros
	}{
		{"equal devices", equalAcc, 0.48, 0.52},
		{"10x accelerator, fast link", fastAcc, 0.88, 0.92},
		{"10x accelerator, slow link", slowLink, 0.05, 0.85},
	} {
		for _, strategy := range []Strategy{SplitPeak, SplitDynamic} {
			s, err := MapSlices(strategy, sizes, cpuProf, tc.acc, SpTTM, 1)
			if err != nil {
				t.Fatal(err)
			}
			f := accFraction(s)
			if f < tc.lo || f > tc.hi {
				t.Errorf("%s, %v: %.3f of the nonzeros on the accelerator, want [%v, %v] (target %.3f)", tc.name, strategy, f, tc.lo, tc.hi, s.AccShare)
			}
			if imb := s.Imbalance(); imb > 0.05 {
				t.Errorf("%s, %v: predicted imbalance %.3f (times %v)", tc.name, strategy, imb, s.Predicted)
			}
			switch tc.acc.LinkGBs {
			case fastAcc.LinkGBs:
				fastFrac[strategy] = f
			case slowLink.LinkGBs:
				if f >= fastFrac[strategy] {
					t.Errorf("%v: a slow link puts %.3f on the accelerator, a fast one %.3f", strategy, f, fastFrac[strategy])
				}
			}
		}
	}
	// 10x faster, no transfer: 10/11 exactly.
	s, err := MapSlices(SplitPeak, sizes, cpuProf, fastAcc, SpTTM, 1)
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(s.AccShare-10.0/11) > 1e-3 {
		t.Errorf("share %v, want about 10/11", s.AccShare)
	}
}

// TestMapSlicesTraffic checks the link term follows what a run moves: a
// resident tensor leaves only the run's operands and result on the link,
// so over a slow link the accelerator's share grows back towards its
// share with a free link, and the tensor's own bytes come back when it is
// not resident.
func TestMapSlicesTraffic(t *testing.T) {
	sizes := skewedSlices(5000, 1)
	share := func(tr Traffic) float64 {
		t.Helper()
		s, err := MapSlicesFor(SplitPeak, sizes, cpuProf, slowLink, SpTTM, 1, tr)
		if err != nil {
			t.Fatal(err)
		}
		return s.AccShare
	}
	paper := share(Traffic{})
	if old, err := MapSlices(SplitPeak, sizes, cpuProf, slowLink, SpTTM, 1); err != nil || old.AccShare != paper {
		t.Errorf("MapSlices share %v (%v), MapSlicesFor with no traffic %v: want the same", old.AccShare, err, paper)
	}
	resident := share(Traffic{Resident: true})
	if math.Abs(resident-10.0/11) > 1e-3 {
		t.Errorf("resident tensor, nothing else on the link: share %.4f, want 10/11 as with a free link", resident)
	}
	// The tensor's 16 bytes per nonzero, against 4 of results: less
	// traffic, more work for the accelerator, ordered.
	for _, c := range []struct {
		name string
		tr   Traffic
		lo   float64 // share must exceed
		hi   float64 // and stay below
	}{
		{"resident, result 4 B/nnz", Traffic{RunBytesPerNNZ: 4, Resident: true}, paper, resident},
		{"sent, result 4 B/nnz", Traffic{RunBytesPerNNZ: 4}, 0, paper},
	} {
		if got := share(c.tr); !(got > c.lo && got < c.hi) {
			t.Errorf("%s: share %.4f, want in (%.4f, %.4f)", c.name, got, c.lo, c.hi)
		}
	}
	for _, bad := range []float64{-1, math.NaN(), math.Inf(1)} {
		if _, err := MapSlicesFor(SplitPeak, sizes, cpuProf, slowLink, SpTTM, 1, Traffic{RunBytesPerNNZ: bad}); err == nil || !strings.Contains(err.Error(), "run bytes per nonzero") {
			t.Errorf("run bytes %v: error %v, want one naming run bytes per nonzero", bad, err)
		}
	}
}

// TestSplitContiguous: many small slices are re-dealt as two ranges
// within the tolerance, every slice once; a slice too large to land near
// the quota leaves the largest-first deal as it was.
func TestSplitContiguous(t *testing.T) {
	even := make([]int64, 1000)
	for i := range even {
		even[i] = 10 + int64(i%7)
	}
	lumpy := []int64{5000, 10, 10, 10, 4000, 10, 10}
	for _, c := range []struct {
		name  string
		sizes []int64
		want  bool
	}{
		{"1000 small slices", even, true},
		{"two slices hold nearly all", lumpy, false},
	} {
		s, err := MapSlices(SplitPeak, c.sizes, cpuProf, fastAcc, SpTTM, 1)
		if err != nil {
			t.Fatal(err)
		}
		before := *s
		before.Slices = [2][]int{slices.Clone(s.Slices[0]), slices.Clone(s.Slices[1])}
		total := s.NNZ[0] + s.NNZ[1]
		if got := s.Contiguous(c.sizes, 0.01); got != c.want {
			t.Fatalf("%s: Contiguous = %v, want %v", c.name, got, c.want)
		}
		checkPartition(t, c.name, s, c.sizes)
		if !c.want {
			if !reflect.DeepEqual(*s, before) {
				t.Errorf("%s: a refused re-deal changed the split", c.name)
			}
			continue
		}
		k := len(s.Slices[OnCPU])
		for side, ids := range s.Slices {
			for j, id := range ids {
				if id != side*k+j {
					t.Fatalf("%s: side %d slice %d is %d, not a range", c.name, side, j, id)
				}
			}
		}
		if moved := math.Abs(float64(s.NNZ[OnCPU] - before.NNZ[OnCPU])); moved > 0.01*float64(total) {
			t.Errorf("%s: moved %v of %d nonzeros", c.name, moved, total)
		}
		if ratio := s.Predicted[OnAcc] / before.Predicted[OnAcc]; math.Abs(ratio-float64(s.NNZ[OnAcc])/float64(before.NNZ[OnAcc])) > 1e-9 {
			t.Errorf("%s: predicted time scaled by %v, nonzeros by %v", c.name, ratio, float64(s.NNZ[OnAcc])/float64(before.NNZ[OnAcc]))
		}
	}
}

// checkPartition checks every slice is on exactly one side and the
// nonzero counts add up.
func checkPartition(t *testing.T, what string, s *Split, sizes []int64) {
	t.Helper()
	seen := make([]int, len(sizes))
	for side := range 2 {
		var nnz int64
		for _, i := range s.Slices[side] {
			if i < 0 || i >= len(sizes) {
				t.Fatalf("%s: slice id %d out of range", what, i)
			}
			seen[i]++
			nnz += sizes[i]
		}
		if nnz != s.NNZ[side] {
			t.Errorf("%s: side %d holds %d nonzeros, NNZ says %d", what, side, nnz, s.NNZ[side])
		}
	}
	for i, n := range seen {
		if n != 1 {
			t.Fatalf("%s: slice %d assigned %d times", what, i, n)
		}
	}
}

func TestMapSlicesPartitionAndDeterminism(t *testing.T) {
	inputs := map[string][]int64{
		"empty":      nil,
		"one":        {5},
		"zeros":      {0, 0, 0},
		"ties":       {3, 3, 3, 3, 3, 3, 3},
		"skewed":     skewedSlices(2000, 2),
		"one huge":   append([]int64{1_000_000}, skewedSlices(50, 3)...),
		"huge last":  append(skewedSlices(50, 4), 1_000_000),
		"all ones":   slices.Repeat([]int64{1}, 999),
		"increasing": {1, 2, 3, 4, 5, 6, 7, 8, 9, 10},
	}
	for name, sizes := range inputs {
		for _, acc := range []DeviceProfile{equalAcc, fastAcc, slowLink} {
			for _, strategy := range allSplits {
				what := name + "/" + strategy.String() + "/" + acc.Name
				a, err := MapSlices(strategy, sizes, cpuProf, acc, MTTKRP, 9)
				if err != nil {
					t.Fatalf("%s: %v", what, err)
				}
				checkPartition(t, what, a, sizes)
				b, err := MapSlices(strategy, slices.Clone(sizes), cpuProf, acc, MTTKRP, 9)
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(a, b) {
					t.Errorf("%s: two runs differ:\n%+v\n%+v", what, a, b)
				}
				for side := range 2 {
					if p := a.Predicted[side]; !(p >= 0) || math.IsInf(p, 0) || (a.NNZ[side] > 0) != (p > 0) {
						t.Errorf("%s: side %d predicted %v s for %d nonzeros", what, side, p, a.NNZ[side])
					}
				}
			}
		}
	}
}

func TestMapSlicesEmpty(t *testing.T) {
	for _, strategy := range allSplits {
		s, err := MapSlices(strategy, []int64{}, cpuProf, fastAcc, SpTTM, 1)
		if err != nil {
			t.Fatal(err)
		}
		if s.NNZ != [2]int64{} || len(s.Slices[0])+len(s.Slices[1]) != 0 || s.Predicted != [2]float64{} || s.Imbalance() != 0 {
			t.Errorf("%v: %+v", strategy, s)
		}
	}
}

func TestMapSlicesHugeSlice(t *testing.T) {
	sizes := []int64{7, 1_000_000, 3, 5}
	for _, tc := range []struct {
		acc  DeviceProfile
		side int
	}{{fastAcc, OnAcc}, {synthProfile("acc:0", 10, 2, 1, 0.2, 2, 16), OnCPU}} {
		for _, strategy := range []Strategy{SplitPeak, SplitDynamic} {
			s, err := MapSlices(strategy, sizes, cpuProf, tc.acc, SpTTM, 1)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Contains(s.Slices[tc.side], 1) {
				t.Errorf("%v, accelerator of %v GFLOP/s: the huge slice is not on side %d: %+v", strategy, tc.acc.FMAGFlops, tc.side, s)
			}
			if s.Slices[tc.side][0] != 1 {
				t.Errorf("%v: the huge slice is not dealt first: %v", strategy, s.Slices[tc.side])
			}
		}
	}
}

func TestMapSlicesRandom(t *testing.T) {
	sizes := skewedSlices(1000, 5)
	a, _ := MapSlices(SplitRandom, sizes, cpuProf, fastAcc, SpTTM, 1)
	b, _ := MapSlices(SplitRandom, sizes, cpuProf, fastAcc, SpTTM, 1)
	c, _ := MapSlices(SplitRandom, sizes, cpuProf, fastAcc, SpTTM, 2)
	if !reflect.DeepEqual(a, b) {
		t.Error("same seed, different splits")
	}
	if reflect.DeepEqual(a.Slices, c.Slices) {
		t.Error("seeds 1 and 2 give the same split")
	}
	// Each slice with probability 1/2: 1000 slices land within 5 sigma
	// (about 80) of 500 on each side, whatever the device speeds.
	if n := len(a.Slices[OnAcc]); n < 420 || n > 580 {
		t.Errorf("%d of 1000 slices on the accelerator", n)
	}
	if a.AccShare != 0.5 {
		t.Errorf("share %v", a.AccShare)
	}
}

func TestMapSlicesOneSide(t *testing.T) {
	sizes := skewedSlices(100, 6)
	// cpu needs no accelerator profile, acc no CPU profile.
	s, err := MapSlices(SplitCPU, sizes, cpuProf, DeviceProfile{}, SpTTM, 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Slices[OnCPU]) != 100 || s.NNZ[OnAcc] != 0 || s.Predicted[OnAcc] != 0 || s.AccShare != 0 {
		t.Errorf("cpu: %+v", s)
	}
	s, err = MapSlices(SplitAcc, sizes, DeviceProfile{}, fastAcc, SpTTM, 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Slices[OnAcc]) != 100 || s.NNZ[OnCPU] != 0 || s.AccShare != 1 {
		t.Errorf("acc: %+v", s)
	}
	// Predicted times follow the model: nnz · τ, τ with the transfer.
	c, _ := fastAcc.Cost(SpTTM)
	if want := float64(s.NNZ[OnAcc]) * c.Total(); math.Abs(s.Predicted[OnAcc]-want) > 1e-12*want {
		t.Errorf("predicted %v, want %v", s.Predicted[OnAcc], want)
	}
}

func TestMapSlicesErrors(t *testing.T) {
	bad := cpuProf
	bad.Ops = map[string]OpProfile{"ttm": {Lambda: 0, Mu: 1, BytesPerNNZ: 8}}
	for _, tc := range []struct {
		strategy Strategy
		sizes    []int64
		cpu, acc DeviceProfile
		op       Op
		want     string
	}{
		{SplitPeak, []int64{1, -2}, cpuProf, fastAcc, SpTTM, "slice 1 has -2 nonzeros"},
		{SplitPeak, []int64{1}, bad, fastAcc, SpTTM, "profile of cpu: ttm.lambda is 0, expected a number in (0, 1] (sparsetune calibrate --devices cpu measures it again)"},
		{SplitPeak, []int64{1}, bad, fastAcc, MTTKRP, "profile of cpu has no mttkrp numbers"},
		{SplitDynamic, []int64{1}, cpuProf, DeviceProfile{Name: "acc:0"}, SpTTM, "profile of acc:0: fma_gflops is 0, expected a positive number (sparsetune calibrate --devices acc:0 measures it again)"},
		{SplitRandom, []int64{1}, cpuProf, synthProfile("acc:0", 1, 1, -1, 0.5, 1, 1), SpTTM, "link_gbs is -1"},
		{SplitAcc, []int64{1}, cpuProf, synthProfile("acc:0", 1, 1, 1, 0.5, math.Inf(1), 1), SpTTM, "ttm.mu is +Inf"},
		{Strategy(42), []int64{1}, cpuProf, fastAcc, SpTTM, "unknown strategy Strategy(42)"},
	} {
		_, err := MapSlices(tc.strategy, tc.sizes, tc.cpu, tc.acc, tc.op, 1)
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%v: error %v, want %q", tc.strategy, err, tc.want)
		}
	}
}

func TestChunkNNZ(t *testing.T) {
	for _, tc := range []struct {
		total                       int64
		compute, transfer, overhead float64
		want                        int64
	}{
		{0, 1e-9, 0, 0, 1},
		{-5, 1e-9, 0, 0, 1},
		{1, 1e-9, 0, 0, 1},
		// Few nonzeros: MinChunks chunks.
		{100, 1e-9, 0, 50e-6, 25},
		{101, 1e-9, 0, 50e-6, 26},
		// 10^8 nonzeros at 1 ns each, 50 µs a chunk: √(0.1/5e-5) ≈ 44.7 → 45 chunks.
		{100_000_000, 1e-9, 0, 50e-6, 2_222_223},
		// The transfer counts like the compute: the same 45 chunks.
		{100_000_000, 0.5e-9, 0.5e-9, 50e-6, 2_222_223},
		// 0 overhead means the default.
		{100_000_000, 1e-9, 0, 0, 2_222_223},
		// A costlier chunk: fewer, larger ones (√(0.1/5e-3) ≈ 4.5 → 4).
		{100_000_000, 1e-9, 0, 5e-3, 25_000_000},
		// Slow device, tiny overhead: capped at MaxChunks.
		{100_000_000, 1e-6, 0, 1e-9, 24_415},
		// Unusable per-nonzero times fall back to MinChunks.
		{1000, math.NaN(), 0, 0, 250},
		{1000, math.Inf(1), 0, 0, 250},
	} {
		if got := ChunkNNZ(tc.total, tc.compute, tc.transfer, tc.overhead); got != tc.want {
			t.Errorf("ChunkNNZ(%d, %g, %g, %g) = %d, want %d", tc.total, tc.compute, tc.transfer, tc.overhead, got, tc.want)
		}
	}
}

func TestChunkQueue(t *testing.T) {
	sizes := append(skewedSlices(3000, 8), 0, 0, 50_000)
	q, err := NewChunkQueue(sizes, 2000)
	if err != nil {
		t.Fatal(err)
	}
	// Concurrent pullers: every slice handed out exactly once.
	var mu sync.Mutex
	var got []Chunk
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				c, ok := q.Next()
				if !ok {
					return
				}
				mu.Lock()
				got = append(got, c)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(got) != q.Len() {
		t.Fatalf("%d chunks handed out, the queue has %d", len(got), q.Len())
	}
	slices.SortFunc(got, func(a, b Chunk) int { return a.Index - b.Index })
	seen := make([]int, len(sizes))
	for k, c := range got {
		if c.Index != k {
			t.Fatalf("chunk %d handed out as %d", k, c.Index)
		}
		var nnz int64
		for _, i := range c.Slices {
			seen[i]++
			nnz += sizes[i]
		}
		if nnz != c.NNZ {
			t.Errorf("chunk %d: slices hold %d nonzeros, NNZ %d", k, nnz, c.NNZ)
		}
		if k < len(got)-1 && c.NNZ < 2000 {
			t.Errorf("chunk %d of %d has %d nonzeros, under the target", k, len(got), c.NNZ)
		}
		if k > 0 && sizes[c.Slices[0]] > sizes[got[k-1].Slices[len(got[k-1].Slices)-1]] {
			t.Errorf("chunk %d starts with a larger slice than chunk %d ends with", k, k-1)
		}
	}
	for i, n := range seen {
		if n != 1 {
			t.Fatalf("slice %d handed out %d times", i, n)
		}
	}
	if got[0].Slices[0] != len(sizes)-1 || len(got[0].Slices) != 1 {
		t.Errorf("first chunk %v, want the 50000-nonzero slice alone", got[0].Slices)
	}
	if _, ok := q.Next(); ok {
		t.Error("an emptied queue handed out a chunk")
	}

	for _, tc := range []struct {
		sizes  []int64
		target int64
		chunks int
	}{
		{nil, 10, 0},
		{[]int64{0, 0}, 10, 1},
		{[]int64{4, 0, 3, 0}, 0, 2}, // one per nonempty slice, empty ones with the last
		{[]int64{5, 5, 5, 5}, 10, 2},
		{[]int64{5, 5, 5}, 10, 2},
	} {
		q, err := NewChunkQueue(tc.sizes, tc.target)
		if err != nil || q.Len() != tc.chunks {
			t.Errorf("%v by %d: %d chunks, want %d (%v)", tc.sizes, tc.target, q.Len(), tc.chunks, err)
		}
	}
	if _, err := NewChunkQueue([]int64{1, -1}, 1); err == nil || !strings.Contains(err.Error(), "slice 1 has -1 nonzeros") {
		t.Errorf("error %v", err)
	}
}
