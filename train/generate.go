package train

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/sparsetune/sparsetune/formats"
)

// The generators. Each adds one mode to its input; a Spec chains one of
// them (order 3) or two (order 4). docs/generate.md describes them.
const (
	// GenSlices stacks Size slices, each the input with a random fraction of
	// its rows and of its columns kept and a fraction of them relabelled.
	GenSlices = "slices"
	// GenLift multiplies the input by a sparse random vector v of Size
	// entries, Support of them nonzero: X(i,j,k) = M(i,j)·v(k). Slice k keeps
	// each nonzero with a probability that follows a Zipf law of exponent
	// Zipf over the slices (0: every slice alike, a plain outer product when
	// Grow equals Support).
	GenLift = "lift"
	// GenBand stacks Size copies of the input, copy k shifted by k·Step
	// along the diagonal of the first two modes, so every nonzero keeps its
	// diagonal i-j and the slices walk along a band.
	GenBand = "band"
	// GenBursts adds a time mode of Size steps: each nonzero occurs at a few
	// distinct times, clustered around one to three of Bursts global burst
	// centres whose popularity follows a Zipf law.
	GenBursts = "bursts"
)

// Version is the version of the generators' algorithms. It is recorded in
// every manifest line; a tensor is rebuilt identically only by the version
// that generated it, so any change to what a generator draws must bump it.
const Version = 1

// MaxNNZ is the largest expected number of nonzeros Generate accepts: far
// beyond the training and benchmark sets (at most 10^7), and small enough that
// a mistyped parameter fails at once instead of exhausting memory.
const MaxNNZ = 200_000_000

// MaxSize is the largest extent of a new mode: generators keep arrays of
// that length.
const MaxSize = 1 << 24

// Spec describes one generated tensor completely: the same Spec applied to
// the same matrix file always gives the same tensor, bit for bit (on one
// architecture; see Generate).
type Spec struct {
	// Name is the output file's name without extension (manifest only).
	Name string `json:"name,omitempty"`
	// Source is the matrix file, relative to the directory of matrices.
	Source string `json:"source"`
	// Stages are the generators applied in turn: one for an order-3
	// tensor, two for order 4.
	Stages []Stage `json:"stages"`
	// Seed seeds every random draw (a PCG per stage).
	Seed uint64 `json:"seed"`
	// TargetNNZ is the expected number of nonzeros, which sets the growth
	// of the stages whose parameters leave it open.
	TargetNNZ int `json:"target_nnz,omitempty"`
}

// Stage is one generator and its parameters.
type Stage struct {
	Generator string `json:"generator"`
	Params
}

// Params are a stage's knobs. A zero field means "derive it": Resolve fills
// every field a generator uses, and the manifest records the filled ones.
// Fields a generator does not use must stay zero.
type Params struct {
	// Size is the extent of the new mode (all generators). Derived, it is
	// ceil(Grow/Frac²) slices for GenSlices, Support for GenLift,
	// ceil(Grow/Frac) copies for GenBand and max(16, ceil(4·Grow)) steps
	// for GenBursts, and at least 2 (a derived Size of 1 would make the
	// new mode a relabelled matrix).
	Size int `json:"size,omitempty"`
	// At is the 1-based position of the new mode in the output; 0 means
	// last. GenLift with At 2 makes a knowledge-graph-like tensor: entity x
	// relation x entity.
	At int `json:"at,omitempty"`
	// Grow is the expected ratio of output to input nonzeros. When zero it
	// follows from the other parameters or from the Spec's TargetNNZ.
	Grow float64 `json:"grow,omitempty"`
	// Frac is, for GenSlices, the fraction of rows and of columns each slice
	// keeps (in (0, 1]; when Size is open it is the largest fraction used,
	// default 0.8); for GenBand, the fraction of nonzeros each copy keeps.
	Frac float64 `json:"frac,omitempty"`
	// Shuffle is, for GenSlices, the fraction of the rows and of the columns
	// that each slice relabels by a random permutation among themselves:
	// 0 keeps M's positions, 1 relabels every row and column.
	Shuffle float64 `json:"shuffle,omitempty"`
	// Support is, for GenLift, the number of nonzeros of v (default
	// ceil(Grow·(1+Zipf)), at least 2 and at most Size): skewed sizes
	// spread the growth over more slices.
	Support int `json:"support,omitempty"`
	// Zipf is, for GenLift, the exponent of the slice sizes (0: uniform);
	// for GenBursts, the exponent (> 1, default 1.5) of the bursts'
	// popularity.
	Zipf float64 `json:"zipf,omitempty"`
	// Step is, for GenBand, the diagonal shift between consecutive copies.
	Step int `json:"step,omitempty"`
	// Drift is, for GenBand when Step is 0, the total shift of the last
	// copy as a fraction of the rows (default 0.5).
	Drift float64 `json:"drift,omitempty"`
	// Bursts is, for GenBursts, the number of global burst centres
	// (default Size/10).
	Bursts int `json:"bursts,omitempty"`
	// Width is, for GenBursts, the standard deviation of a burst in time
	// steps (default Size/(4·Bursts), at least 1).
	Width float64 `json:"width,omitempty"`
}

// Order returns the order of the tensor s generates.
func (s Spec) Order() int { return 2 + len(s.Stages) }

// Generator returns the stages' generators joined by "+", e.g. "band+lift".
func (s Spec) Generator() string {
	names := make([]string, len(s.Stages))
	for i, st := range s.Stages {
		names[i] = st.Generator
	}
	return strings.Join(names, "+")
}

// clone returns a copy of s that shares nothing with it.
func (s Spec) clone() Spec {
	s.Stages = slices.Clone(s.Stages)
	return s
}

// Generate builds the tensor that spec describes from the matrix m (an
// order-2 tensor, e.g. read from spec.Source; m is not modified).
//
// m is first made canonical: sorted, and a coordinate that occurs more than
// once keeps its first value in file order. The stages then run in turn,
// each drawing from its own PCG seeded by (spec.Seed, stage number) only,
// sequentially, so the result depends on nothing but m and spec — not on
// the number of threads, nor on map order. The result is sorted by modes
// 1..N, has no duplicate coordinates (a coordinate generated twice keeps the
// first value generated; the generators never do so on a canonical matrix,
// so this is a safeguard, and values are never summed), and its dims are
// tight: each mode's largest index occurs, so a .tns file gives the same
// dims back. Empty slices may remain inside a mode, as in M.
//
// Results are bit-identical on one architecture; derived parameters use
// floating-point functions (math.Log, math.Pow) whose last bit might differ
// on another.
func Generate(m *formats.COO, spec Spec) (*formats.COO, error) {
	src, err := canonicalMatrix(m)
	if err != nil {
		return nil, err
	}
	r, err := spec.resolve(src.NNZ(), src.Dims)
	if err != nil {
		return nil, err
	}
	return r.run(src)
}

// Resolve returns spec with every parameter its stages use filled in, as
// Generate would derive them from m. Resolving a resolved Spec changes
// nothing, and Generate gives the same tensor for both.
func (s Spec) Resolve(m *formats.COO) (Spec, error) {
	src, err := canonicalMatrix(m)
	if err != nil {
		return Spec{}, err
	}
	return s.resolve(src.NNZ(), src.Dims)
}

// canonicalMatrix returns a sorted copy of m without duplicate coordinates.
func canonicalMatrix(m *formats.COO) (*formats.COO, error) {
	if m == nil || m.Order() != 2 {
		order := 0
		if m != nil {
			order = m.Order()
		}
		return nil, fmt.Errorf("expected a matrix (order 2), found order %d", order)
	}
	if err := m.Validate(); err != nil {
		return nil, err
	}
	if m.NNZ() == 0 {
		return nil, errors.New("the matrix has no nonzeros")
	}
	c := m.Clone()
	finish(c)
	return c, nil
}

// resolve fills s's parameters for a canonical matrix of the given nnz and
// dims: nothing else of the matrix matters to them.
func (s Spec) resolve(srcNNZ int, srcDims []int) (Spec, error) {
	r := s.clone()
	if len(r.Stages) == 0 {
		return r, errors.New("spec has no stages: expected one (order 3) or more")
	}
	if r.Order() > formats.MaxOrder {
		return r, fmt.Errorf("%d stages make an order-%d tensor, at most %d is supported", len(r.Stages), r.Order(), formats.MaxOrder)
	}
	if r.TargetNNZ < 0 {
		return r, fmt.Errorf("target nnz must be >= 0, found %d", r.TargetNNZ)
	}
	// A stage's growth is given (Grow), implied by its own parameters, or
	// open; the open ones share what the target leaves, evenly in log, so
	// an order-4 tensor grows alike along both new modes.
	fixed, open := 1.0, 0
	grows := make([]float64, len(r.Stages))
	for i := range r.Stages {
		st := &r.Stages[i]
		if err := st.check(); err != nil {
			return r, fmt.Errorf("stage %d (%s): %w", i+1, st.Generator, err)
		}
		grows[i] = st.impliedGrow(r.TargetNNZ > 0)
		if grows[i] > 0 {
			fixed *= grows[i]
		} else {
			open++
		}
	}
	if open > 0 {
		if r.TargetNNZ == 0 {
			return r, errors.New("target nnz is 0 and the parameters leave a stage's growth open: set TargetNNZ or Grow")
		}
		share := math.Pow(float64(r.TargetNNZ)/float64(srcNNZ)/fixed, 1/float64(open))
		for i := range grows {
			if grows[i] == 0 {
				grows[i] = share
			}
		}
	}
	dims := slices.Clone(srcDims)
	nnz := float64(srcNNZ)
	for i := range r.Stages {
		st := &r.Stages[i]
		var err error
		if dims, err = st.resolve(dims, grows[i]); err != nil {
			return r, fmt.Errorf("stage %d (%s): %w", i+1, st.Generator, err)
		}
		// slices visits every row, column and nonzero once per slice.
		if st.Generator == GenSlices && float64(st.Size)*(float64(dims[0]+dims[1])+nnz) > 4*MaxNNZ {
			return r, fmt.Errorf("stage %d (slices): %d slices of a %s input with %.3g nonzeros are too much work: use fewer slices or a larger frac",
				i+1, st.Size, formats.FormatDims(dims[:2]), nnz)
		}
		nnz *= st.Grow
	}
	if nnz > MaxNNZ {
		return r, fmt.Errorf("expected %.3g nonzeros, at most %d are supported", nnz, MaxNNZ)
	}
	return r, nil
}

// check rejects unknown generators and out-of-range parameters before any
// default is derived.
func (st *Stage) check() error {
	p := st.Params
	switch {
	case p.Size < 0, p.At < 0, p.Support < 0, p.Step < 0, p.Bursts < 0:
		return errors.New("size, at, support, step and bursts must be >= 0")
	case !(p.Grow >= 0), !(p.Frac >= 0 && p.Frac <= 1), !(p.Shuffle >= 0 && p.Shuffle <= 1),
		!(p.Zipf >= 0), !(p.Drift >= 0), !(p.Width >= 0),
		math.IsInf(p.Grow, 0), math.IsInf(p.Zipf, 0), math.IsInf(p.Drift, 0), math.IsInf(p.Width, 0):
		return errors.New("grow, zipf, drift and width must be finite and >= 0; frac and shuffle in [0, 1]")
	}
	var unused []string
	use := func(name string, set bool, allowed ...string) {
		if set && !slices.Contains(allowed, st.Generator) {
			unused = append(unused, name)
		}
	}
	switch st.Generator {
	case GenSlices, GenLift, GenBand, GenBursts:
	default:
		return fmt.Errorf("unknown generator %q: expected %s, %s, %s or %s", st.Generator, GenSlices, GenLift, GenBand, GenBursts)
	}
	use("frac", p.Frac != 0, GenSlices, GenBand)
	use("shuffle", p.Shuffle != 0, GenSlices)
	use("support", p.Support != 0, GenLift)
	use("zipf", p.Zipf != 0, GenLift, GenBursts)
	use("step", p.Step != 0, GenBand)
	use("drift", p.Drift != 0, GenBand)
	use("bursts", p.Bursts != 0, GenBursts)
	use("width", p.Width != 0, GenBursts)
	if len(unused) > 0 {
		return fmt.Errorf("%s does not use %s", st.Generator, strings.Join(unused, ", "))
	}
	if st.Generator == GenBursts && p.Zipf != 0 && p.Zipf <= 1 {
		return fmt.Errorf("zipf must be > 1 for bursts, found %g", p.Zipf)
	}
	return nil
}

// impliedGrow returns the stage's growth when its parameters fix it, or 0
// when it is open. Without a target, lift's growth defaults to its support.
func (st *Stage) impliedGrow(haveTarget bool) float64 {
	p := st.Params
	switch {
	case p.Grow > 0:
		return p.Grow
	case st.Generator == GenSlices && p.Size > 0 && p.Frac > 0:
		return float64(p.Size) * p.Frac * p.Frac
	case st.Generator == GenBand && p.Size > 0 && p.Frac > 0:
		return float64(p.Size) * p.Frac
	case st.Generator == GenLift && !haveTarget && max(p.Support, p.Size) > 0:
		if p.Support > 0 {
			return float64(p.Support)
		}
		return float64(p.Size)
	}
	return 0
}

// resolve fills the stage's parameters for an input of the given dims and
// growth g, and returns the output's dims before trimming.
func (st *Stage) resolve(in []int, g float64) ([]int, error) {
	if !(g > 0) || math.IsInf(g, 0) {
		return nil, fmt.Errorf("growth must be positive and finite, found %g", g)
	}
	p := &st.Params
	// A derived new mode has at least two slices, so that it is a mode and
	// not a relabelled matrix, even when the stage samples (g < 1).
	switch st.Generator {
	case GenSlices:
		// Size and Frac together fix the growth; otherwise Frac is the
		// largest keep fraction and is lowered to meet g exactly.
		if p.Size == 0 || p.Frac == 0 {
			if p.Size == 0 {
				f := p.Frac
				if f == 0 {
					f = 0.8
				}
				p.Size = max(2, int(math.Ceil(g/(f*f)-1e-9)))
			}
			p.Frac = math.Sqrt(g / float64(p.Size))
		}
		if p.Frac > 1 {
			return nil, fmt.Errorf("%d slices cannot grow the nonzeros %.3g times: at most 1 per slice", p.Size, g)
		}
		if err := setGrow(p, float64(p.Size)*p.Frac*p.Frac); err != nil {
			return nil, err
		}
	case GenLift:
		if p.Support == 0 {
			p.Support = max(2, int(math.Ceil(g*(1+p.Zipf)-1e-9)))
			if p.Size > 0 {
				p.Support = min(p.Support, p.Size)
			}
		}
		if p.Size == 0 {
			p.Size = p.Support
		}
		if p.Support > p.Size {
			return nil, fmt.Errorf("support %d exceeds size %d", p.Support, p.Size)
		}
		if g > float64(p.Support)*(1+1e-12) {
			return nil, fmt.Errorf("a support of %d cannot grow the nonzeros %.3g times", p.Support, g)
		}
		p.Grow = g
	case GenBand:
		if p.Size == 0 || p.Frac == 0 {
			if p.Size == 0 {
				f := p.Frac
				if f == 0 {
					f = 1
				}
				p.Size = max(2, int(math.Ceil(g/f-1e-9)))
			}
			p.Frac = g / float64(p.Size)
		}
		if p.Frac > 1 {
			return nil, fmt.Errorf("%d copies cannot grow the nonzeros %.3g times", p.Size, g)
		}
		if err := setGrow(p, float64(p.Size)*p.Frac); err != nil {
			return nil, err
		}
		if p.Step == 0 {
			drift := p.Drift
			if drift == 0 {
				drift = 0.5
			}
			p.Step = 1
			if p.Size > 1 {
				p.Step = max(1, int(math.Round(drift*float64(in[0])/float64(p.Size-1))))
			}
		}
	case GenBursts:
		if p.Size == 0 {
			p.Size = max(16, int(math.Ceil(4*g)))
		}
		if p.Bursts == 0 {
			p.Bursts = max(1, p.Size/10)
		}
		if p.Width == 0 {
			p.Width = max(1, float64(p.Size)/float64(4*p.Bursts))
		}
		if p.Zipf == 0 {
			p.Zipf = 1.5
		}
		p.Grow = g
	}
	if p.At == 0 {
		p.At = len(in) + 1
	}
	if p.At > len(in)+1 {
		return nil, fmt.Errorf("at %d is past the output's last mode %d", p.At, len(in)+1)
	}
	if p.Size > MaxSize {
		return nil, fmt.Errorf("size %d exceeds %d", p.Size, MaxSize)
	}
	out := st.outDims(in)
	if err := formats.CheckDims(out); err != nil {
		return nil, err
	}
	return out, nil
}

// outDims returns the dims of the resolved stage's output for an input of
// dims in, before trimming.
func (st *Stage) outDims(in []int) []int {
	out := slices.Clone(in)
	if st.Generator == GenBand {
		shift := (st.Size - 1) * st.Step
		out[0] += shift
		out[1] += shift
	}
	return slices.Insert(out, st.At-1, st.Size)
}

// setGrow records the growth that Size and Frac imply, refusing an explicit
// Grow that disagrees with them.
func setGrow(p *Params, g float64) error {
	if p.Grow != 0 && math.Abs(p.Grow-g) > 1e-9*g {
		return fmt.Errorf("grow %g disagrees with size %d and frac %g, which give %g", p.Grow, p.Size, p.Frac, g)
	}
	p.Grow = g
	return nil
}

// stageStream keeps the stages' PCG streams apart from any other use of the
// seed (the planner's streams are small integers).
const stageStream = 0x5eed_0000_0000_0000

// maxAttempts bounds the draws of a tensor that came out empty (a tiny
// target from a tiny matrix can lose every nonzero to sampling).
const maxAttempts = 16

// run applies the resolved stages to the canonical matrix src.
func (s Spec) run(src *formats.COO) (*formats.COO, error) {
	for attempt := range maxAttempts {
		t := src
		for i, st := range s.Stages {
			rng := rand.New(rand.NewPCG(s.Seed, stageStream+uint64(attempt)<<8+uint64(i)))
			t = st.apply(t, rng)
		}
		if t.NNZ() > 0 {
			// Indices past the dims would corrupt the sort's packed keys:
			// check before sorting.
			if err := t.Validate(); err != nil {
				return nil, fmt.Errorf("generated an invalid tensor: %w", err)
			}
			finish(t)
			return t, nil
		}
	}
	return nil, fmt.Errorf("every one of %d attempts generated no nonzeros: the growth %.3g is too small for this matrix", maxAttempts, s.growth())
}

// growth returns the product of the stages' growths.
func (s Spec) growth() float64 {
	g := 1.0
	for _, st := range s.Stages {
		g *= st.Grow
	}
	return g
}

// finish sorts t, drops repeated coordinates (keeping the first, which the
// stable sort leaves first) and trims each dim to the largest index used.
func finish(t *formats.COO) {
	t.Sort()
	n, out := t.NNZ(), 0
	for k := 0; k < n; k++ {
		if k > 0 && sameCoord(t, out-1, k) {
			continue
		}
		if out != k {
			for m := range t.Inds {
				t.Inds[m][out] = t.Inds[m][k]
			}
			t.Vals[out] = t.Vals[k]
		}
		out++
	}
	for m := range t.Inds {
		t.Inds[m] = slices.Clip(t.Inds[m][:out])
		var hi uint32
		for _, i := range t.Inds[m] {
			hi = max(hi, i)
		}
		if out > 0 {
			t.Dims[m] = int(hi) + 1
		}
	}
	t.Vals = slices.Clip(t.Vals[:out])
}

// sameCoord reports whether nonzeros a and b of t have the same coordinate.
func sameCoord(t *formats.COO, a, b int) bool {
	for _, ind := range t.Inds {
		if ind[a] != ind[b] {
			return false
		}
	}
	return true
}
