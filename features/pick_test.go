package features

import (
	"math"
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	"github.com/sparsetune/sparsetune/formats"
	"github.com/sparsetune/sparsetune/hetero"
)

// TestSummarizePicked: a summary made from a reader's picks is the summary
// Summarize makes from the tensor, sample and features alike, for tensors
// read from every format that picks, shared real ones included; and where
// the picks do not fit, SummarizePicked falls back to Summarize.
func TestSummarizePicked(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 11))
	dir := t.TempDir()
	var paths []string
	for i, x := range []*formats.COO{
		randomTensor(rng, []int{3000, 2000, 40}, 300_000, true),
		randomTensor(rng, []int{200, 300, 50, 20}, 150_000, false),
		randomTensor(rng, []int{50, 60, 70}, 5_000, false), // read whole: no picks
	} {
		x.SumDuplicates()
		for _, ext := range []string{".stb", ".tns"} {
			p := filepath.Join(dir, string(rune('a'+i))+ext)
			if err := formats.WriteFile(p, x); err != nil {
				t.Fatal(err)
			}
			paths = append(paths, p)
		}
	}
	real, _ := filepath.Glob(filepath.Join("..", "..", "shared", "data", "tensors", "*.tns"))
	if len(real) == 0 {
		t.Log("no shared tensors in ../shared/data/tensors: generated ones only")
	}
	paths = append(paths, real...)
	sampled := 0
	for _, p := range paths {
		x, picks, summed, err := formats.ReadFilePicked(p, PickPositions)
		if err != nil {
			t.Fatal(err)
		}
		want, err := Summarize(x)
		if err != nil {
			t.Fatal(err)
		}
		if (picks != nil) != (!want.Exact && summed == 0) {
			t.Fatalf("%s: picks %v for a summary exact %v, %d summed", p, picks != nil, want.Exact, summed)
		}
		if picks != nil {
			sampled++
			if !slices.Equal(picks.Pos, PickPositions(x.NNZ())) {
				t.Fatalf("%s: picked other positions than PickPositions", p)
			}
		}
		got, err := SummarizePicked(x, picks)
		if err != nil {
			t.Fatal(err)
		}
		if got.Exact != want.Exact || !reflect.DeepEqual(got.Sample.Inds, want.Sample.Inds) || got.Sample.NNZ() != want.Sample.NNZ() {
			t.Fatalf("%s: the picked sample differs from Summarize's", p)
		}
		for _, op := range hetero.Ops {
			for mode := range x.Order() {
				a, err := got.Global(op, mode)
				if err != nil {
					t.Fatal(err)
				}
				b, _ := want.Global(op, mode)
				if a != b {
					t.Fatalf("%s %v mode %d: features from picks %v, from Summarize %v", p, op, mode+1, a, b)
				}
			}
		}
		if picks == nil {
			continue
		}
		// Picks that do not fit x: made for another count, or cut.
		for _, bad := range []*formats.Picks{
			{NNZ: picks.NNZ + 1, Pos: picks.Pos, Inds: picks.Inds},
			{NNZ: picks.NNZ, Pos: picks.Pos[1:], Inds: picks.Inds},
			{NNZ: picks.NNZ, Pos: picks.Pos, Inds: picks.Inds[1:]},
			{NNZ: picks.NNZ, Pos: picks.Pos, Inds: append([][]uint32{picks.Inds[0][1:]}, picks.Inds[1:]...)},
		} {
			s, err := SummarizePicked(x, bad)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(s.Sample.Inds, want.Sample.Inds) {
				t.Fatalf("%s: picks that do not fit were used", p)
			}
		}
		// An index beyond the dims is refused as Summarize refuses it.
		broken := &formats.Picks{NNZ: picks.NNZ, Pos: picks.Pos, Inds: slices.Clone(picks.Inds)}
		broken.Inds[1] = slices.Clone(picks.Inds[1])
		broken.Inds[1][3] = uint32(x.Dims[1])
		if _, err := SummarizePicked(x, broken); err == nil {
			t.Fatalf("%s: an index beyond the dims accepted", p)
		}
	}
	if sampled < 4 {
		t.Fatalf("only %d files were sampled from picks", sampled)
	}
}

// TestSliceCounts: slices counted in a bitmap (a mode with few indices of
// dim per sampled nonzero), in a table (more) or from the ranks (Prepare
// of a large sample) are the multiset of counts the ranks give, on either
// side of sliceBitmapSpan, sampled or exact; and the summary's ranks are
// formats.RankIndices'.
func TestSliceCounts(t *testing.T) {
	rng := rand.New(rand.NewPCG(12, 12))
	for _, c := range []struct {
		dims []int
		nnz  int
	}{
		{[]int{40, 5_000_000, 30_000}, 2_000_000}, // sampled: 1,024 nonzeros, 40 and 5·10^6 on either side
		{[]int{98_304, 98_305, 64}, 2_000_000},    // sampled: the span's edge, 96·1,024
		{[]int{3, 1_000_000, 1_000}, 20_000},      // exact: 20,000 nonzeros, every mode within the span
		{[]int{7, 20_000, 500}, 150},              // exact: 150 nonzeros, the middle mode past the span
		{[]int{1, 1, 50}, 100},
	} {
		x := randomTensor(rng, c.dims, c.nnz, true)
		for _, prepared := range []bool{false, true} {
			s, err := Summarize(x)
			if err != nil {
				t.Fatal(err)
			}
			n := s.Sample.NNZ()
			if prepared {
				if n < parallelSample {
					continue
				}
				s.Prepare() // ranks every mode, and counts the slices from the ranks
			}
			for m, d := range c.dims {
				got := slices.Sorted(slices.Values(s.sliceCounts(m)))
				r, _ := formats.RankIndices(s.Sample.Inds[m], d)
				want := slices.Sorted(slices.Values(r.Counts()))
				if !slices.Equal(got, want) {
					t.Errorf("dims %v mode %d (bitmap %v, prepared %v): counts differ from the ranks'", c.dims, m+1, d <= sliceBitmapSpan*n, prepared)
				}
				// The summary's own ranks (in its scratch within the
				// span) are formats.RankIndices'.
				if own := s.modeRanks(m); own.N != r.N || !slices.Equal(own.Of, r.Of) {
					t.Errorf("dims %v mode %d (bitmap %v, prepared %v): ranks differ from formats.RankIndices", c.dims, m+1, d <= sliceBitmapSpan*n, prepared)
				}
			}
		}
	}
}

// TestSampleScratch: drawing a sample's positions takes scratch as large
// as every later count of the sample needs (the table counts of its
// slices and fibers, a bitmap of a mode the bitmap counts), and leaves it
// for them: a count after the draw touches no fresh pages. Sample sizes
// that are not powers of two (past 2 M nonzeros) needed up to 5n keys
// against the draw's 3n before sampleScratch.
func TestSampleScratch(t *testing.T) {
	for _, nnz := range []int{ExactNNZ + 1, 1_000_000, 2_097_152, 2_500_000, 3_000_000, 7_230_960, 30_000_000, math.MaxInt32} {
		n := SampleNNZ(nnz)
		need := 3 * n
		if n <= tableKeys {
			need = max(need, n+tableSlots(n))
		}
		if inBitmapSpan(n, sliceBitmapSpan*n) {
			need = max(need, 2*((sliceBitmapSpan*n+63)/64))
		}
		if got := sampleScratch(n); got < need {
			t.Errorf("nnz %d: sample of %d, scratch of %d keys, the counts need %d", nnz, n, got, need)
		}
		// No scratch left by earlier tests: the draw makes its own.
		spare.Lock()
		spare.buf = nil
		spare.Unlock()
		for scratch.Get() != nil {
		}
		if pos := PickPositions(nnz); len(pos) != n {
			t.Fatalf("nnz %d: %d positions, want %d", nnz, len(pos), n)
		}
		spare.Lock()
		left := cap(spare.buf)
		spare.Unlock()
		if need <= spareKeys && left < need {
			t.Errorf("nnz %d: the draw left %d keys of scratch, the counts need %d", nnz, left, need)
		}
	}
}
