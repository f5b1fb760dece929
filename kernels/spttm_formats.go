package kernels

import (
	"fmt"

	"github.com/sparsetune/sparsetune/formats"
)

// csrSpTTM is the CSR kernel: part t owns rows [split[t], split[t+1]).
type csrSpTTM struct {
	x     *formats.CSR
	split []int
}

// NewCSRSpTTM builds the SpTTM plan of a CSR fiber matrix.
//
// Parallel strategy: owner-computes over rows, cut by entries plus rows
// (formats.FiberMatrix.RowSplits). Each row's products are summed in a
// block of registers and stored once.
func NewCSRSpTTM(x *formats.CSR, rank, threads int) (*SpTTM, error) {
	if err := checkCSR(x); err != nil {
		return nil, fmt.Errorf("spttm csr: %w", err)
	}
	p, err := newSpTTMPlan("csr", x.Source, x.Bytes(), rank, threads)
	if err != nil {
		return nil, err
	}
	p.kernel = &csrSpTTM{x: x, split: splitRows(x.RowPtr, p.parts)}
	return p, nil
}

// splitRows cuts the rows of a row-pointer array into parts of equal
// entries plus rows.
func splitRows(rowPtr []uint32, parts int) []int {
	rows := len(rowPtr) - 1
	total := int64(rowPtr[rows]) + int64(rows)
	split := make([]int, parts+1)
	for t := 1; t < parts; t++ {
		target := total * int64(t) / int64(parts)
		lo, hi := split[t-1], rows
		for lo < hi { // first row r with rowPtr[r]+r >= target
			m := int(uint(lo+hi) >> 1)
			if int64(rowPtr[m])+int64(m) < target {
				lo = m + 1
			} else {
				hi = m
			}
		}
		split[t] = lo
	}
	split[parts] = rows
	return split
}

func (k *csrSpTTM) compute(p *SpTTM, t int) {
	a, b := k.split[t], k.split[t+1]
	if a == b {
		return
	}
	for _, c := range p.blocks {
		if csrRowsVec(p.out, k.x.RowPtr[a:b+1], k.x.ColInd, k.x.Vals[:len(k.x.ColInd)], p.ut, p.rank, a, c.r0, c.w) {
			continue
		}
		for r0, w := range pow2Blocks(c) {
			switch w {
			case 64:
				csrRows[*[64]float32](p, k.x, a, b, r0)
			case 32:
				csrRows[*[32]float32](p, k.x, a, b, r0)
			case 16:
				csrRows[*[16]float32](p, k.x, a, b, r0)
			case 8:
				csrRows[*[8]float32](p, k.x, a, b, r0)
			case 4:
				csrRows[*[4]float32](p, k.x, a, b, r0)
			case 2:
				csrRows[*[2]float32](p, k.x, a, b, r0)
			default:
				csrRows[*[1]float32](p, k.x, a, b, r0)
			}
		}
	}
}

// csrRows computes rank columns [r0, r0+len(*B)) of rows [a, b) in
// portable Go. Blocks of eight or more columns go through csrRows8Scalar,
// which keeps eight columns of a row in registers.
func csrRows[B block](p *SpTTM, x *formats.CSR, a, b, r0 int) {
	R, U, out := p.rank, p.ut, p.out
	ptr := x.RowPtr[a : b+1]
	col, vals := x.ColInd, x.Vals[:len(x.ColInd)]
	var acc [maxWidth]float32
	s := B(acc[:])
	if len(s) >= 8 {
		csrRows8Scalar(out, ptr, col, vals, U, R, a, r0, len(s)/8)
		return
	}
	for i := range b - a {
		lo, hi := int(ptr[i]), int(ptr[i+1])
		d := B(out[(a+i)*R+r0:])
		for r := 0; r < len(s); r++ {
			s[r] = 0
		}
		for e := lo; e < hi; e++ {
			v, u := vals[e], B(U[int(col[e])*R+r0:])
			for r := 0; r < len(s); r++ {
				s[r] += v * u[r]
			}
		}
		for r := 0; r < len(d); r++ {
			d[r] = s[r]
		}
	}
}

// cooSpTTM is the FiberCOO kernel: part t owns entries [split[t],
// split[t+1]), which start and end at row boundaries.
type cooSpTTM struct {
	x     *formats.FiberCOO
	split []int
}

// NewCOOSpTTM builds the SpTTM plan of a FiberCOO.
//
// Parallel strategy: owner-computes. The entries are in row order; they are
// cut into parts of equal entries, each cut moved back to a row start
// (FiberCOO.EntrySplits), so every row belongs to one part. Runs of entries
// of one row are summed in registers and stored once.
func NewCOOSpTTM(x *formats.FiberCOO, rank, threads int) (*SpTTM, error) {
	if err := checkFiberCOO(x); err != nil {
		return nil, fmt.Errorf("spttm coo: %w", err)
	}
	p, err := newSpTTMPlan("coo", x.Source, x.Bytes(), rank, threads)
	if err != nil {
		return nil, err
	}
	p.kernel = &cooSpTTM{x: x, split: x.EntrySplits(p.parts)}
	return p, nil
}

func (k *cooSpTTM) compute(p *SpTTM, t int) {
	cooEntries(p, k.x, k.split[t], k.split[t+1], false)
}

// cooEntries runs entries [a, b) of x, which hold whole rows; add tells
// whether to add into the output rows (HYB's remainder) or to set them.
func cooEntries(p *SpTTM, x *formats.FiberCOO, a, b int, add bool) {
	for _, c := range p.blocks {
		cooColumns(p, x, a, b, c, add)
	}
}

// cooColumns runs rank block c of entries [a, b).
func cooColumns(p *SpTTM, x *formats.FiberCOO, a, b int, c colBlock, add bool) {
	if a == b {
		return
	}
	if cooRunsVec(p.out, x.RowInd[a:b], x.ColInd[a:b], x.Vals[a:b], p.ut, p.rank, c.r0, c.w, add) {
		return
	}
	for r0, w := range pow2Blocks(c) {
		switch w {
		case 64:
			cooRuns[*[64]float32](p, x, a, b, r0, add)
		case 32:
			cooRuns[*[32]float32](p, x, a, b, r0, add)
		case 16:
			cooRuns[*[16]float32](p, x, a, b, r0, add)
		case 8:
			cooRuns[*[8]float32](p, x, a, b, r0, add)
		case 4:
			cooRuns[*[4]float32](p, x, a, b, r0, add)
		case 2:
			cooRuns[*[2]float32](p, x, a, b, r0, add)
		default:
			cooRuns[*[1]float32](p, x, a, b, r0, add)
		}
	}
}

// cooRuns computes rank columns [r0, r0+len(*B)) of the rows of entries
// [a, b) in portable Go. Each run of entries of one row is summed and
// stored (or added) once; blocks of eight or more columns go through
// cooRows8Scalar as in CSR.
func cooRuns[B block](p *SpTTM, x *formats.FiberCOO, a, b, r0 int, add bool) {
	R, U, out := p.rank, p.ut, p.out
	rows, col, vals := x.RowInd[a:b], x.ColInd[a:b], x.Vals[a:b]
	col, vals = col[:len(rows)], vals[:len(rows)]
	var acc [maxWidth]float32
	s := B(acc[:])
	if len(s) >= 8 {
		cooRows8Scalar(out, rows, col, vals, U, R, r0, len(s)/8, add)
		return
	}
	for lo := 0; lo < len(rows); {
		row := rows[lo]
		hi := lo + 1
		for hi < len(rows) && rows[hi] == row {
			hi++
		}
		d := B(out[int(row)*R+r0:])
		for r := 0; r < len(s); r++ {
			s[r] = 0
		}
		for e := lo; e < hi; e++ {
			v, u := vals[e], B(U[int(col[e])*R+r0:])
			for r := 0; r < len(s); r++ {
				s[r] += v * u[r]
			}
		}
		if add {
			for r := 0; r < len(d); r++ {
				d[r] += s[r]
			}
		} else {
			for r := 0; r < len(d); r++ {
				d[r] = s[r]
			}
		}
		lo = hi
	}
}

// ellTile is how many rows the ELL kernel processes together: their output
// rows (ellTile·R floats, 4 KiB at R = 16) stay in L1 while the tile's
// slots are streamed slot by slot, each slot's entries contiguous.
const ellTile = 64

// ellSpTTM is the ELL kernel: part t owns tiles [split[t], split[t+1]).
type ellSpTTM struct {
	x *formats.ELL
	// tileWidth[i] is the longest row of tile i: slots past it are padding
	// in every row of the tile and are skipped.
	tileWidth []int32
	split     []int
}

// NewELLSpTTM builds the SpTTM plan of an ELL fiber matrix.
//
// Parallel strategy: owner-computes over tiles of 64 rows, cut into parts
// of equal slots. Within a tile the kernel walks slot by slot, so it reads
// the slot-major arrays contiguously, and stops at the tile's longest row:
// padding costs only where a tile holds rows of different lengths.
func NewELLSpTTM(x *formats.ELL, rank, threads int) (*SpTTM, error) {
	if err := checkELL(x); err != nil {
		return nil, fmt.Errorf("spttm ell: %w", err)
	}
	p, err := newSpTTMPlan("ell", x.Source, x.Bytes(), rank, threads)
	if err != nil {
		return nil, err
	}
	k := &ellSpTTM{x: x}
	k.tileWidth, k.split = ellTiles(x.Source, x.Rows, x.Width, p.parts)
	p.kernel = k
	return p, nil
}

// ellTiles returns the longest row (capped at width) of each tile of rows
// and parts+1 tile boundaries that balance slots plus rows.
func ellTiles(f *formats.FiberMatrix, rows, width, parts int) ([]int32, []int) {
	tiles := (rows + ellTile - 1) / ellTile
	tw := make([]int32, tiles)
	cum := make([]int64, tiles+1)
	for i := range tiles {
		for r := i * ellTile; r < min(rows, (i+1)*ellTile); r++ {
			tw[i] = max(tw[i], int32(min(f.RowLen(r), width)))
		}
		n := int64(min(rows, (i+1)*ellTile) - i*ellTile)
		cum[i+1] = cum[i] + n*(int64(tw[i])+1)
	}
	split := make([]int, parts+1)
	for t := 1; t < parts; t++ {
		target := cum[tiles] * int64(t) / int64(parts)
		i := split[t-1]
		for i < tiles && cum[i] < target {
			i++
		}
		split[t] = i
	}
	split[parts] = tiles
	return tw, split
}

func (k *ellSpTTM) compute(p *SpTTM, t int) {
	ellPart(p, k.x, k.tileWidth, k.split[t], k.split[t+1])
}

// ellPart runs tiles [a, b) of x.
func ellPart(p *SpTTM, x *formats.ELL, tileWidth []int32, a, b int) {
	for _, c := range p.blocks {
		ellColumns(p, x, tileWidth, a, b, c)
	}
}

// ellColumns runs rank block c of tiles [a, b) of x.
func ellColumns(p *SpTTM, x *formats.ELL, tileWidth []int32, a, b int, c colBlock) {
	if a == b || ellTilesVec(p, x, tileWidth, a, b, c) {
		return
	}
	for r0, w := range pow2Blocks(c) {
		switch w {
		case 64:
			ellTilesB[*[64]float32](p, x, tileWidth, a, b, r0)
		case 32:
			ellTilesB[*[32]float32](p, x, tileWidth, a, b, r0)
		case 16:
			ellTilesB[*[16]float32](p, x, tileWidth, a, b, r0)
		case 8:
			ellTilesB[*[8]float32](p, x, tileWidth, a, b, r0)
		case 4:
			ellTilesB[*[4]float32](p, x, tileWidth, a, b, r0)
		case 2:
			ellTilesB[*[2]float32](p, x, tileWidth, a, b, r0)
		default:
			ellTilesB[*[1]float32](p, x, tileWidth, a, b, r0)
		}
	}
}

// ellTilesVec computes rank block c of the rows of tiles [a, b) with the
// vector loops, as ellTilesB does, and reports false, doing nothing,
// where there are none.
func ellTilesVec(p *SpTTM, x *formats.ELL, tileWidth []int32, a, b int, c colBlock) bool {
	if vec == vecScalar {
		return false
	}
	R, U, out, rows := p.rank, p.ut, p.out, x.Rows
	for i := a; i < b; i++ {
		lo, hi := i*ellTile, min(rows, (i+1)*ellTile)
		for r := lo; r < hi; r++ {
			clear(out[r*R+c.r0 : r*R+c.r0+c.w])
		}
		for k := range int(tileWidth[i]) {
			ellSlotsVec(out, x.ColInd[k*rows+lo:k*rows+hi], x.Vals[k*rows+lo:k*rows+hi], U, R, lo, c.r0, c.w)
		}
	}
	return true
}

// ellTilesB computes rank columns [r0, r0+len(*B)) of the rows of tiles
// [a, b) in portable Go: each tile's output rows are cleared, then every
// slot up to the tile's width adds its product into its row.
func ellTilesB[B block](p *SpTTM, x *formats.ELL, tileWidth []int32, a, b, r0 int) {
	R, U, out, rows := p.rank, p.ut, p.out, x.Rows
	for i := a; i < b; i++ {
		lo, hi := i*ellTile, min(rows, (i+1)*ellTile)
		for r := lo; r < hi; r++ {
			d := B(out[r*R+r0:])
			for j := 0; j < len(d); j++ {
				d[j] = 0
			}
		}
		for k := range int(tileWidth[i]) {
			col := x.ColInd[k*rows+lo : k*rows+hi]
			vals := x.Vals[k*rows+lo : k*rows+hi]
			if w := len(B(nil)); w >= 8 {
				ellSlots8Scalar(out, col, vals, U, R, lo, r0, w/8)
				continue
			}
			vals = vals[:len(col)]
			for j, c := range col {
				v, u := vals[j], B(U[int(c)*R+r0:])
				d := B(out[(lo+j)*R+r0:])
				for r := 0; r < len(d); r++ {
					d[r] += v * u[r]
				}
			}
		}
	}
}

// hybSpTTM is the HYB kernel: part t owns the ELL tiles [tiles[t],
// tiles[t+1]) and the remainder entries [entries[t], entries[t+1]), which
// belong to the tiles' rows.
type hybSpTTM struct {
	x              *formats.HYB
	tileWidth      []int32
	tiles, entries []int
}

// NewHYBSpTTM builds the SpTTM plan of a HYB fiber matrix.
//
// Parallel strategy: owner-computes. The ELL part is cut into tiles as for
// ELL, balanced by ELL slots plus remainder entries, and each part then
// runs the remainder (COO) entries of its own rows, adding into rows it
// has just written: no row is shared between parts and no second phase is
// needed.
func NewHYBSpTTM(x *formats.HYB, rank, threads int) (*SpTTM, error) {
	if err := checkELL(x.ELL); err != nil {
		return nil, fmt.Errorf("spttm hyb: ELL part: %w", err)
	}
	if err := checkFiberCOO(x.COO); err != nil {
		return nil, fmt.Errorf("spttm hyb: COO part: %w", err)
	}
	p, err := newSpTTMPlan("hyb", x.ELL.Source, x.Bytes(), rank, threads)
	if err != nil {
		return nil, err
	}
	k := &hybSpTTM{x: x}
	e := x.ELL
	k.tileWidth, _ = ellTiles(e.Source, e.Rows, e.Width, 1)
	k.tiles, k.entries = hybSplits(x, k.tileWidth, p.parts)
	p.kernel = k
	return p, nil
}

// hybSplits balances tiles of the ELL part plus the remainder entries of
// their rows.
func hybSplits(x *formats.HYB, tileWidth []int32, parts int) (tiles, entries []int) {
	rest := x.COO.RowInd
	ntiles := len(tileWidth)
	// work[i] = cost of tiles before i, slots plus rows plus remainder.
	work := make([]int64, ntiles+1)
	restAt := make([]int, ntiles+1) // first remainder entry at or after tile i's rows
	e := 0
	for i := range ntiles {
		lo, hi := i*ellTile, min(x.ELL.Rows, (i+1)*ellTile)
		restAt[i] = e
		for e < len(rest) && int(rest[e]) < hi {
			e++
		}
		work[i+1] = work[i] + int64(hi-lo)*(int64(tileWidth[i])+1) + int64(e-restAt[i])
	}
	restAt[ntiles] = len(rest)
	tiles, entries = make([]int, parts+1), make([]int, parts+1)
	for t := 1; t < parts; t++ {
		target := work[ntiles] * int64(t) / int64(parts)
		i := tiles[t-1]
		for i < ntiles && work[i] < target {
			i++
		}
		tiles[t], entries[t] = i, restAt[i]
	}
	tiles[parts], entries[parts] = ntiles, len(rest)
	return tiles, entries
}

// compute runs each rank block's ELL part and then adds the block's
// remainder.
func (k *hybSpTTM) compute(p *SpTTM, t int) {
	for _, c := range p.blocks {
		ellColumns(p, k.x.ELL, k.tileWidth, k.tiles[t], k.tiles[t+1], c)
		cooColumns(p, k.x.COO, k.entries[t], k.entries[t+1], c, true)
	}
}
