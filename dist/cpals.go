package dist

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/sparsetune/sparsetune/decomp"
	"github.com/sparsetune/sparsetune/engine"
	"github.com/sparsetune/sparsetune/formats"
	"github.com/sparsetune/sparsetune/kernels"
	"github.com/sparsetune/sparsetune/mpi"
)

// Report is what a distributed run spent beyond the decomposition.
type Report struct {
	Ranks int   `json:"ranks"`
	Grid  []int `json:"grid"`
	// LocalNNZ is each rank's nonzeros after the redistribution.
	LocalNNZ []int64 `json:"local_nnz"`
	// Imbalance is max/mean − 1 of LocalNNZ: 0 when every rank holds as
	// many nonzeros.
	Imbalance float64 `json:"imbalance"`
	// CommSeconds and CommBytes are this rank's time in, and bytes sent
	// by, collectives: the redistribution and every MTTKRP's exchange.
	CommSeconds float64 `json:"comm_seconds"`
	CommBytes   int64   `json:"comm_bytes"`
	// RedistributeSeconds and RedistributeBytes are the time to partition
	// and move the nonzeros, and the bytes this rank sent doing it (part
	// of CommBytes; the rest is the iterations').
	RedistributeSeconds float64 `json:"redistribute_seconds"`
	RedistributeBytes   int64   `json:"redistribute_bytes"`
	// Formats is this rank's format per mode when the engine chose them
	// for its block (CPALSOn); nil otherwise.
	Formats []string `json:"formats,omitempty"`
	// Relabelled says the indices were permuted to balance the grid's
	// cells (see redistribute); the result is in the tensor's own labels.
	Relabelled bool `json:"relabelled"`
}

// comm wraps a communicator with the accounting of Report.
type comm struct {
	c   *mpi.Comm
	rep *Report
}

func (k *comm) timed(bytes int64, f func() error) error {
	start := time.Now()
	err := f()
	k.rep.CommSeconds += time.Since(start).Seconds()
	k.rep.CommBytes += bytes
	return err
}

// CPALS runs decomp.CPALS on the tensor spread over the ranks of c. local
// is the share of the nonzeros this rank read (any share: rank r may hold
// any nonzeros, and no nonzero may be held twice); every rank passes the
// same dims and options. Every rank returns the same result, computed as
// doc.go describes. opts.MTTKRP must be nil: the ranks' MTTKRPs run decomp's
// CPU kernels (opts.Formats) on their blocks.
func CPALS(c *mpi.Comm, local *formats.COO, opts decomp.Options) (*decomp.CPResult, *Report, error) {
	return CPALSOn(context.Background(), c, nil, local, opts)
}

// CPALSOn is CPALS with each rank's MTTKRPs run through the engine e: the
// format of each mode predicted (or cached) for the rank's own block and
// converted once (decomp.EngineKernels). A nil e runs decomp's CPU
// kernels in opts.Formats, as CPALS does. ctx bounds the engine's plans
// and runs.
func CPALSOn(ctx context.Context, c *mpi.Comm, e *engine.Engine, local *formats.COO, opts decomp.Options) (*decomp.CPResult, *Report, error) {
	if opts.MTTKRP != nil {
		return nil, nil, errors.New("distributed CP-ALS runs its own MTTKRPs: Options.MTTKRP must be nil")
	}
	rep := &Report{Ranks: c.Size()}
	k := &comm{c: c, rep: rep}
	start := time.Now()
	block, part, labels, err := redistribute(k, local)
	if err != nil {
		return nil, rep, err
	}
	rep.Grid = part.Grid
	rep.Relabelled = labels != nil
	rep.RedistributeSeconds = time.Since(start).Seconds()
	rep.RedistributeBytes = rep.CommBytes
	m, err := newMTTKRP(ctx, k, e, block, part, opts)
	if err != nil {
		return nil, rep, err
	}
	defer m.close()
	o := opts
	o.MTTKRP = m
	if labels != nil {
		// The factors' rows follow the new labels: start from the factors
		// a single process would, rows moved alike, and move them back at
		// the end.
		if o.Init == decomp.InitHOSVD && o.InitFactors == nil {
			return nil, rep, errors.New("the HOSVD initialisation needs the whole tensor: a distributed CP-ALS starts from random factors or given ones")
		}
		init := o.InitFactors
		if init == nil {
			init = decomp.RandomFactors(block.Dims, o.Rank, o.Seed)
		}
		o.InitFactors = make([]*kernels.Matrix, len(init))
		for n, f := range init {
			if f == nil || f.Rows != block.Dims[n] {
				return nil, rep, fmt.Errorf("initial factor of mode %d: expected %d rows", n+1, block.Dims[n])
			}
			o.InitFactors[n] = moveRows(f, labels[n], false)
		}
	}
	res, err := decomp.CPALS(block, o)
	if m.engine != nil {
		for _, md := range m.engine.Modes() {
			if len(md.Devices) > 0 {
				rep.Formats = append(rep.Formats, md.Devices[0].Format)
			}
		}
	}
	if err == nil && labels != nil {
		for n, f := range res.Factors {
			res.Factors[n] = moveRows(f, labels[n], true)
		}
	}
	return res, rep, err
}

// moveRows returns a copy of a with row i moved to row label[i], or with
// back, row label[i] moved to row i.
func moveRows(a *kernels.Matrix, label []uint32, back bool) *kernels.Matrix {
	out := kernels.NewMatrix(a.Rows, a.Cols)
	for i, l := range label {
		src, dst := i, int(l)
		if back {
			src, dst = dst, src
		}
		copy(out.Row(dst), a.Row(src))
	}
	return out
}

// maxImbalance is the largest max/mean − 1 of the grid cells' nonzeros
// that redistribute accepts before relabelling the indices.
const maxImbalance = 0.1

// relabelSeed seeds the permutations of the indices: every rank draws the
// same ones.
const relabelSeed = 0x5eed_1abe1

// owners returns the rank owning each local nonzero under part, and how
// many local nonzeros each rank owns.
func owners(local *formats.COO, part *Partition, P int) (owner, send []int) {
	owner, send = make([]int, local.NNZ()), make([]int, P)
	coord := make([]uint32, local.Order())
	for j := range owner {
		owner[j] = part.Owner(local.Coord(j, coord))
		send[owner[j]]++
	}
	return owner, send
}

// cellImbalance returns max/mean − 1 of the nonzeros every rank's send
// counts (from owners) put in each grid cell.
func cellImbalance(k *comm, send []int) (float64, error) {
	P := k.c.Size()
	cells := make([]uint64, P)
	for r, n := range send {
		cells[r] = uint64(n)
	}
	if err := k.timed(int64(8*P), func() error { return mpi.Allreduce(k.c, cells, cells, mpi.Sum) }); err != nil {
		return 0, err
	}
	var sum, most uint64
	for _, n := range cells {
		sum, most = sum+n, max(most, n)
	}
	if sum == 0 {
		return 0, nil
	}
	return float64(most)*float64(P)/float64(sum) - 1, nil
}

// redistribute agrees on the dims, builds the partition from the global
// nonzeros per index and sends every nonzero to its owner. It returns the
// rank's block (the whole tensor's dims, its own nonzeros).
//
// Layers balanced one mode at a time can still leave a cell of a 2-D or
// 3-D grid nearly empty: a tensor whose nonzeros lie near a diagonal puts
// them all in the diagonal cells. When the cells' imbalance exceeds
// maxImbalance, every mode's indices are relabelled by a seeded random
// permutation (the same on every rank), which spreads any such structure
// over the cells, and the partition is made again; the labels are
// returned (nil when the tensor kept its own) and the caller moves the
// factors' rows.
func redistribute(k *comm, local *formats.COO) (*formats.COO, *Partition, [][]uint32, error) {
	c, rep := k.c, k.rep
	N := local.Order()
	// Every rank must mean the same tensor: compare orders and dims.
	shape := []uint64{uint64(N)}
	for _, d := range local.Dims {
		shape = append(shape, uint64(d))
	}
	lo, hi := slices.Clone(shape), slices.Clone(shape)
	if err := errors.Join(mpi.Allreduce(c, shape, lo, mpi.Min), mpi.Allreduce(c, shape, hi, mpi.Max)); err != nil {
		return nil, nil, nil, err
	}
	if !slices.Equal(lo, hi) {
		return nil, nil, nil, fmt.Errorf("the ranks read tensors of different shapes (order and dims from %v to %v)", lo, hi)
	}
	counts := make([][]int64, N)
	for n, d := range local.Dims {
		h := make([]uint64, d)
		for _, i := range local.Inds[n] {
			h[i]++
		}
		if err := k.timed(int64(8*d), func() error { return mpi.Allreduce(c, h, h, mpi.Sum) }); err != nil {
			return nil, nil, nil, err
		}
		counts[n] = make([]int64, d)
		for i, v := range h {
			counts[n][i] = int64(v)
		}
	}
	grid, err := Grid(local.Dims, c.Size())
	if err != nil {
		return nil, nil, nil, err
	}
	part, err := NewPartition(grid, counts)
	if err != nil {
		return nil, nil, nil, err
	}
	var labels [][]uint32
	P := c.Size()
	owner, send := owners(local, part, P)
	imb, err := cellImbalance(k, send)
	if err != nil {
		return nil, nil, nil, err
	}
	if imb > maxImbalance {
		labels = relabel(local.Dims)
		moved := &formats.COO{Dims: local.Dims, Inds: make([][]uint32, N), Vals: local.Vals}
		for n, ind := range local.Inds {
			out := make([]uint32, len(ind))
			for j, i := range ind {
				out[j] = labels[n][i]
			}
			moved.Inds[n] = out
		}
		movedCounts := make([][]int64, N)
		for n, cs := range counts {
			movedCounts[n] = make([]int64, len(cs))
			for i, c := range cs {
				movedCounts[n][labels[n][i]] = c
			}
		}
		movedPart, err := NewPartition(grid, movedCounts)
		if err != nil {
			return nil, nil, nil, err
		}
		movedOwner, movedSend := owners(moved, movedPart, P)
		movedImb, err := cellImbalance(k, movedSend)
		if err != nil {
			return nil, nil, nil, err
		}
		if movedImb < imb {
			local, part, owner, send = moved, movedPart, movedOwner, movedSend
		} else {
			labels = nil // the tensor's own labels were no worse
		}
	}

	// Sort the local nonzeros by owner and exchange them.
	nnz := local.NNZ()
	at := make([]int, P+1)
	for r := range P {
		at[r+1] = at[r] + send[r]
	}
	perm := make([]int, nnz)
	fill := slices.Clone(at[:P])
	for j, o := range owner {
		perm[fill[o]] = j
		fill[o]++
	}
	all := make([]uint64, P*P)
	mine := make([]uint64, P)
	for r, s := range send {
		mine[r] = uint64(s)
	}
	if err := k.timed(int64(8*P), func() error { return mpi.Allgather(c, mine, all) }); err != nil {
		return nil, nil, nil, err
	}
	recv := make([]int, P)
	total := 0
	for r := range P {
		recv[r] = int(all[r*P+c.Rank()])
		total += recv[r]
	}
	block, err := formats.NewCOO(local.Dims, total)
	if err != nil {
		return nil, nil, nil, err
	}
	buf := make([]uint32, nnz)
	for n := range N {
		for p, j := range perm {
			buf[p] = local.Inds[n][j]
		}
		out := make([]uint32, total)
		if err := k.timed(int64(4*nnz), func() error { return mpi.Alltoallv(c, buf, send, out, recv) }); err != nil {
			return nil, nil, nil, err
		}
		block.Inds[n] = out
	}
	vals := make([]float32, nnz)
	for p, j := range perm {
		vals[p] = local.Vals[j]
	}
	block.Vals = make([]float32, total)
	if err := k.timed(int64(4*nnz), func() error { return mpi.Alltoallv(c, vals, send, block.Vals, recv) }); err != nil {
		return nil, nil, nil, err
	}
	sizes := make([]uint64, P)
	if err := k.timed(int64(8), func() error { return mpi.Allgather(c, []uint64{uint64(total)}, sizes) }); err != nil {
		return nil, nil, nil, err
	}
	var sum, most uint64
	rep.LocalNNZ = make([]int64, P)
	for r, s := range sizes {
		rep.LocalNNZ[r] = int64(s)
		sum += s
		most = max(most, s)
	}
	if sum > 0 {
		rep.Imbalance = float64(most)*float64(P)/float64(sum) - 1
	}
	return block, part, labels, nil
}

// relabel returns, per mode, a seeded random permutation of the indices:
// label[n][i] is index i's new label.
func relabel(dims []int) [][]uint32 {
	rng := rand.New(rand.NewPCG(relabelSeed, uint64(len(dims))))
	labels := make([][]uint32, len(dims))
	for n, d := range dims {
		l := make([]uint32, d)
		for i := range l {
			l[i] = uint32(i)
		}
		rng.Shuffle(d, func(i, j int) { l[i], l[j] = l[j], l[i] })
		labels[n] = l
	}
	return labels
}

// mttkrp is the ranks' MTTKRP (decomp.Distributed): the block's product
// on decomp's CPU kernels, then the layer's rows summed within the layer
// and the layers' rows gathered along the mode's grid fibers.
type mttkrp struct {
	k      *comm
	part   *Partition
	coords []int
	kern   decomp.MTTKRPer // the block's kernels; nil for an empty block
	// engine is kern when the engine runs it, for its formats and Close.
	engine *decomp.EngineKernels
	layer  []*mpi.Comm // per mode: the ranks sharing this rank's layer
	fiber  []*mpi.Comm // per mode: the ranks differing only in the layer
	normSq float64
}

func newMTTKRP(ctx context.Context, k *comm, e *engine.Engine, block *formats.COO, part *Partition, opts decomp.Options) (*mttkrp, error) {
	c := k.c
	m := &mttkrp{k: k, part: part, coords: part.Coords(c.Rank())}
	switch {
	case block.NNZ() == 0:
	case e != nil:
		ek, err := decomp.NewEngineKernels(ctx, e, block, opts.Rank)
		if err != nil {
			return nil, err
		}
		m.kern, m.engine = ek, ek
	default:
		cpu, err := decomp.NewCPU(block, opts.Formats, opts.FiberFormat, opts.Threads)
		if err != nil {
			return nil, err
		}
		m.kern = cpu
	}
	var local float64
	for _, v := range block.Vals {
		local += float64(v) * float64(v)
	}
	norm := []float64{local}
	if err := k.timed(8, func() error { return mpi.Allreduce(c, norm, norm, mpi.Sum) }); err != nil {
		return nil, err
	}
	m.normSq = norm[0]
	for n := range part.Grid {
		// The fiber's colour is the cell with mode n's coordinate zeroed;
		// its key orders the ranks by layer, so that the gathered rows come
		// in index order.
		other := slices.Clone(m.coords)
		other[n] = 0
		layer, err := c.Split(m.coords[n], c.Rank())
		if err != nil {
			return nil, err
		}
		fiber, err := c.Split(part.Rank(other), m.coords[n])
		if err != nil {
			return nil, err
		}
		m.layer, m.fiber = append(m.layer, layer), append(m.fiber, fiber)
	}
	return m, nil
}

// close releases the engine's plans.
func (m *mttkrp) close() {
	if m.engine != nil {
		m.engine.Close()
	}
}

// NormSq returns the whole tensor's squared norm.
func (m *mttkrp) NormSq() float64 { return m.normSq }

// Rows returns the rows of mode this rank holds: its layer.
func (m *mttkrp) Rows(mode int) (lo, hi int) {
	b := m.part.Bounds[mode]
	return b[m.coords[mode]], b[m.coords[mode]+1]
}

// MTTKRP computes the whole tensor's product in the rows of this rank's
// mode layer: its block's product, summed over the ranks sharing the
// layer. Other rows are zero.
func (m *mttkrp) MTTKRP(mode int, factors []*kernels.Matrix, out *kernels.Matrix) error {
	R := out.Cols
	if m.kern != nil {
		if err := m.kern.MTTKRP(mode, factors, out); err != nil {
			return err
		}
	} else {
		clear(out.Data)
	}
	if m.layer[mode].Size() == 1 {
		return nil // a layer of one rank has nothing to sum
	}
	lo, hi := m.Rows(mode)
	rows := out.Data[lo*R : hi*R]
	if err := m.k.timed(int64(4*len(rows)), func() error { return mpi.Allreduce(m.layer[mode], rows, rows, mpi.Sum) }); err != nil {
		return fmt.Errorf("sum the layer's rows: %w", err)
	}
	return nil
}

// Own zeroes the rows of a outside this rank's layer of mode.
func (m *mttkrp) Own(mode int, a *kernels.Matrix) {
	lo, hi := m.Rows(mode)
	clear(a.Data[:lo*a.Cols])
	clear(a.Data[hi*a.Cols:])
}

// SumRows sums v over the layers of mode: over the ranks that differ
// from this one only in their mode layer, one per layer.
func (m *mttkrp) SumRows(mode int, v []float64) error {
	if m.fiber[mode].Size() == 1 {
		return nil
	}
	return m.k.timed(int64(8*len(v)), func() error { return mpi.Allreduce(m.fiber[mode], v, v, mpi.Sum) })
}

// MaxRows is SumRows with the maximum.
func (m *mttkrp) MaxRows(mode int, v []float64) error {
	if m.fiber[mode].Size() == 1 {
		return nil
	}
	return m.k.timed(int64(8*len(v)), func() error { return mpi.Allreduce(m.fiber[mode], v, v, mpi.Max) })
}

// AllOK reports whether every rank reports ok.
func (m *mttkrp) AllOK(ok bool) (bool, error) {
	v := []uint32{0}
	if !ok {
		v[0] = 1
	}
	err := m.k.timed(4, func() error { return mpi.Allreduce(m.k.c, v, v, mpi.Max) })
	return v[0] == 0, err
}

// Gather fills in the rows of a, mode's factor, that the other layers
// hold: an Allgatherv along the mode's grid fiber, in layer order.
func (m *mttkrp) Gather(mode int, a *kernels.Matrix) error {
	if m.fiber[mode].Size() == 1 {
		return nil
	}
	R := a.Cols
	b := m.part.Bounds[mode]
	counts := make([]int, m.part.Grid[mode])
	for l := range counts {
		counts[l] = (b[l+1] - b[l]) * R
	}
	lo, hi := m.Rows(mode)
	mine := slices.Clone(a.Data[lo*R : hi*R])
	if err := m.k.timed(int64(4*len(mine)), func() error { return mpi.Allgatherv(m.fiber[mode], mine, a.Data, counts) }); err != nil {
		return fmt.Errorf("gather the factor of mode %d: %w", mode+1, err)
	}
	return nil
}
