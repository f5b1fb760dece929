package train

import (
	"bufio"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Matrix is what the planner knows of a source matrix: its file and size.
type Matrix struct {
	// File is the file name in the directory of matrices.
	File string
	Rows int
	Cols int
	// NNZ is the number of nonzeros after symmetric expansion, estimated
	// from the header as twice the stored ones for a symmetric matrix (the
	// diagonal is not known without reading the file).
	NNZ int
}

// ScanMatrices lists the MatrixMarket matrices (*.mtx, *.mtx.gz) in dir,
// sorted by file name, reading only their headers.
func ScanMatrices(dir string) ([]Matrix, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var mats []Matrix
	for _, e := range ents {
		name := e.Name()
		if e.IsDir() || !(strings.HasSuffix(name, ".mtx") || strings.HasSuffix(name, ".mtx.gz")) {
			continue
		}
		m, err := scanMatrix(filepath.Join(dir, name))
		if err != nil {
			return nil, err
		}
		m.File = name
		mats = append(mats, m)
	}
	if len(mats) == 0 {
		return nil, fmt.Errorf("%s: no MatrixMarket matrices (*.mtx, *.mtx.gz) found", dir)
	}
	slices.SortFunc(mats, func(a, b Matrix) int { return strings.Compare(a.File, b.File) })
	return mats, nil
}

// scanMatrix reads the banner and size line of a MatrixMarket file.
func scanMatrix(path string) (Matrix, error) {
	r, err := openFile(path)
	if err != nil {
		return Matrix{}, err
	}
	defer r.Close()
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	line := 0
	symmetric := false
	for sc.Scan() {
		line++
		text := strings.TrimSpace(sc.Text())
		if line == 1 {
			f := strings.Fields(strings.ToLower(text))
			if len(f) != 5 || f[0] != "%%matrixmarket" || f[1] != "matrix" || f[2] != "coordinate" {
				return Matrix{}, fmt.Errorf("%s:1: expected a banner like %q, found %q", path, "%%MatrixMarket matrix coordinate real general", text)
			}
			switch f[3] {
			case "real", "integer", "double", "pattern":
			default:
				return Matrix{}, fmt.Errorf("%s:1: expected a real, integer or pattern field, found %q", path, f[3])
			}
			switch f[4] {
			case "general":
			case "symmetric", "skew-symmetric":
				symmetric = true
			default:
				return Matrix{}, fmt.Errorf("%s:1: expected general, symmetric or skew-symmetric, found %q", path, f[4])
			}
			continue
		}
		if text == "" || text[0] == '%' {
			continue
		}
		f := strings.Fields(text)
		if len(f) != 3 {
			return Matrix{}, fmt.Errorf("%s:%d: expected the size line \"rows cols nnz\", found %q", path, line, text)
		}
		var n [3]int
		for i, s := range f {
			if n[i], err = strconv.Atoi(s); err != nil || n[i] < 0 {
				return Matrix{}, fmt.Errorf("%s:%d: expected the size line \"rows cols nnz\", found %q", path, line, text)
			}
		}
		if symmetric {
			n[2] *= 2
		}
		return Matrix{Rows: n[0], Cols: n[1], NNZ: n[2]}, nil
	}
	if err := sc.Err(); err != nil {
		return Matrix{}, fmt.Errorf("%s: %w", path, err)
	}
	return Matrix{}, fmt.Errorf("%s: expected a MatrixMarket header and size line, found the end of the file", path)
}

// PlanOptions set the size and spread of a planned set.
type PlanOptions struct {
	// Count is the number of tensors.
	Count int
	// Seed seeds the plan; each tensor's own seed is drawn from it.
	Seed uint64
	// MinNNZ and MaxNNZ bound the targets (defaults DefaultMinNNZ and
	// DefaultMaxNNZ).
	MinNNZ, MaxNNZ int
}

// The default bounds of a plan's targets.
const (
	DefaultMinNNZ = 20
	DefaultMaxNNZ = 2_000_000
)

// Buckets are the nonzero ranges a plan spreads its targets over: [0, 100),
// [100, 1K), [1K, 10K), [10K, 100K) and [100K, MaxNNZ], cut to [MinNNZ,
// MaxNNZ]; BucketWeights are their shares, larger for larger tensors (whose
// formats differ most).
var (
	Buckets       = []int{0, 100, 1_000, 10_000, 100_000}
	BucketWeights = []int{1, 2, 4, 6, 7}
)

// order4Share is the share of order-4 tensors in a plan.
const order4Share = 0.25

// Plan draws opt.Count tensor specs over mats. Tensor i (named g00001,
// g00002, ...) gets its bucket from a fixed interleaving that keeps every
// prefix of the plan close to BucketWeights, and everything else from a PCG
// seeded by (opt.Seed, i) alone: a target log-uniform in its bucket; order 4
// one time in four; a first generator among slices, lift, band and bursts
// (order 4 adds lift or bursts); the generators' shape parameters; and a
// source matrix whose nonzeros make the growth to the target plausible for
// the generators (0.5 to 40 times for order 3, 2 to 400 for order 4). So a
// plan of N tensors is a prefix of a plan of more, and the sizes of the
// stages are left for Resolve to derive from the target.
func Plan(mats []Matrix, opt PlanOptions) ([]Spec, error) {
	if opt.Count < 0 {
		return nil, fmt.Errorf("count must be >= 0, found %d", opt.Count)
	}
	// A matrix without nonzeros cannot grow into anything.
	mats = slices.DeleteFunc(slices.Clone(mats), func(m Matrix) bool { return m.NNZ == 0 })
	if len(mats) == 0 {
		return nil, errors.New("no matrices with nonzeros to plan over")
	}
	lo, hi := opt.MinNNZ, opt.MaxNNZ
	if lo == 0 {
		lo = DefaultMinNNZ
	}
	if hi == 0 {
		hi = DefaultMaxNNZ
	}
	if lo < 1 || hi < lo || hi > MaxNNZ {
		return nil, fmt.Errorf("nnz bounds must satisfy 1 <= min <= max <= %d, found min %d max %d", MaxNNZ, lo, hi)
	}
	type bucket struct {
		lo, hi float64
		weight int
	}
	var bs []bucket
	total := 0
	for b, start := range Buckets {
		end := hi + 1
		if b+1 < len(Buckets) {
			end = Buckets[b+1]
		}
		l, h := max(start, lo), min(end, hi+1)
		if l < h {
			bs = append(bs, bucket{float64(l), float64(h), BucketWeights[b]})
			total += BucketWeights[b]
		}
	}
	counts := make([]int, len(bs))
	specs := make([]Spec, opt.Count)
	width := max(5, len(strconv.Itoa(opt.Count)))
	for i := range specs {
		// The bucket furthest behind its share so far.
		best, bestLag := 0, math.Inf(-1)
		for b := range bs {
			lag := float64(bs[b].weight)*float64(i+1)/float64(total) - float64(counts[b])
			if lag > bestLag+1e-12 {
				best, bestLag = b, lag
			}
		}
		counts[best]++
		rng := rand.New(rand.NewPCG(opt.Seed, uint64(i)))
		s := Spec{Seed: rng.Uint64()}
		s.TargetNNZ = int(math.Exp(math.Log(bs[best].lo) + rng.Float64()*(math.Log(bs[best].hi)-math.Log(bs[best].lo))))
		s.TargetNNZ = min(max(s.TargetNNZ, lo), hi)
		first := []string{GenSlices, GenLift, GenBand, GenBursts}[rng.IntN(4)]
		s.Stages = []Stage{planStage(first, rng)}
		ratio := [2]float64{0.5, 40}
		if rng.Float64() < order4Share {
			s.Stages = append(s.Stages, planStage([]string{GenLift, GenBursts}[rng.IntN(2)], rng))
			ratio = [2]float64{2, 400}
		}
		src := pickMatrix(mats, float64(s.TargetNNZ)/ratio[1], float64(s.TargetNNZ)/ratio[0], rng)
		s.Source = src.File
		s.Name = fmt.Sprintf("g%0*d_%s%d_%s", width, i+1, strings.ReplaceAll(s.Generator(), "+", "-"), s.Order(), matrixStem(src.File))
		specs[i] = s
	}
	return specs, nil
}

// planStage draws a generator's shape parameters; sizes are left to Resolve.
func planStage(gen string, rng *rand.Rand) Stage {
	st := Stage{Generator: gen}
	p := &st.Params
	switch gen {
	case GenSlices:
		p.Frac = round3(0.5 + 0.5*rng.Float64())
		// A third keep M's positions, a third move a few rows and
		// columns, a third relabel them all (no locality left).
		switch rng.IntN(3) {
		case 1:
			p.Shuffle = round3(0.2 * rng.Float64())
		case 2:
			p.Shuffle = 1
		}
	case GenLift:
		if rng.Float64() < 0.6 {
			p.Zipf = round3(0.5 + rng.Float64())
		}
		if rng.Float64() < 0.3 {
			p.At = 2 // entity x relation x entity
		}
	case GenBand:
		p.Drift = round3(0.05 + 0.95*rng.Float64())
	case GenBursts:
		p.Zipf = round3(1.2 + 1.3*rng.Float64())
		p.Width = round3(0.5 + 3.5*rng.Float64())
	}
	return st
}

// pickMatrix draws a matrix with between lo and hi nonzeros, or one of
// those nearest (in log) to the range when none is in it.
func pickMatrix(mats []Matrix, lo, hi float64, rng *rand.Rand) Matrix {
	var in []int
	for i, m := range mats {
		if n := float64(m.NNZ); n >= lo && n <= hi {
			in = append(in, i)
		}
	}
	if len(in) == 0 {
		dist := func(m Matrix) float64 {
			n := math.Log(max(float64(m.NNZ), 1))
			return max(math.Log(lo)-n, n-math.Log(hi), 0)
		}
		best := math.Inf(1)
		for i, m := range mats {
			d := dist(m)
			if d < best-1e-12 {
				best, in = d, in[:0]
			}
			if d <= best+1e-12 {
				in = append(in, i)
			}
		}
	}
	return mats[in[rng.IntN(len(in))]]
}

// matrixStem is a matrix file's name without its extensions.
func matrixStem(file string) string {
	return strings.TrimSuffix(strings.TrimSuffix(filepath.Base(file), ".gz"), filepath.Ext(strings.TrimSuffix(file, ".gz")))
}

func round3(x float64) float64 { return math.Round(x*1000) / 1000 }
