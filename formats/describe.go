package formats

import "time"

// Description summarises a tensor: what sparsetune info prints.
type Description struct {
	Dims       []int
	NNZ        int
	Density    float64
	Modes      []ModeStats // one per mode
	Footprints []Footprint // bytes of each storage format
}

// Footprint is the memory one storage format needs for a tensor.
type Footprint struct {
	Format       string  // "coo" (tensor), "fiber-coo", "csr", "ell", "hyb" (fiber matrix of Mode), "csf" (rooted at Mode), "hicoo", "alto"
	Mode         int     // 0-based mode the format is built for, -1 when it is not tied to one
	Bytes        int64   // bytes of the format's arrays
	PaddingRatio float64 // padding slots / stored slots
	Seconds      float64 // time to build the format from the COO tensor (fiber formats include building the fiber matrix); -1 when it was too large to build and its size was computed instead
}

// sizer is what every storage format reports about its memory.
type sizer interface {
	Bytes() int64
	PaddingRatio() float64
}

type bytesPadding struct {
	bytes   int64
	padding float64
}

// sized returns the size of a tensor format built with an error.
func sized(x interface{ Bytes() int64 }, err error) (bytesPadding, error) {
	if err != nil {
		return bytesPadding{}, err
	}
	return bytesPadding{bytes: x.Bytes()}, nil
}

// BytesPerNNZ returns Bytes divided by nnz.
func (f Footprint) BytesPerNNZ(nnz int) float64 {
	if nnz == 0 {
		return 0
	}
	return float64(f.Bytes) / float64(nnz)
}

// Describe computes the Description of t: statistics of every mode and the
// footprint of every format. It does not modify t.
func Describe(t *COO) (*Description, error) {
	if err := t.Validate(); err != nil {
		return nil, err
	}
	d := &Description{Dims: t.Dims, NNZ: t.NNZ(), Density: t.Density()}
	d.Footprints = append(d.Footprints, Footprint{Format: "coo", Mode: -1, Bytes: t.Bytes()})
	// timed runs build and measures one format.
	timed := func(format string, mode int, build func() (bytesPadding, error)) error {
		start := time.Now()
		bp, err := build()
		if err != nil {
			return err
		}
		d.Footprints = append(d.Footprints, Footprint{Format: format, Mode: mode, Bytes: bp.bytes,
			PaddingRatio: bp.padding, Seconds: time.Since(start).Seconds()})
		return nil
	}
	if err := timed("hicoo", -1, func() (bytesPadding, error) {
		x, err := NewHiCOO(t, DefaultHiCOOBlockBits)
		return sized(x, err)
	}); err != nil {
		return nil, err
	}
	if err := timed("alto", -1, func() (bytesPadding, error) {
		x, err := NewALTO(t, 0)
		return sized(x, err)
	}); err != nil {
		return nil, err
	}
	for n := range t.Order() {
		st, err := t.ModeStats(n)
		if err != nil {
			return nil, err
		}
		d.Modes = append(d.Modes, st)
		if err := timed("csf", n, func() (bytesPadding, error) {
			x, err := NewCSF(t, CSFOrder(t, n))
			return sized(x, err)
		}); err != nil {
			return nil, err
		}
		start := time.Now()
		fm, err := NewFiberMatrix(t, n, DefaultSliceMode(n))
		if err != nil {
			return nil, err
		}
		fmTime := time.Since(start).Seconds()
		// The fiber coordinates are part of every SpTTM format's memory:
		// the kernel needs them to write its output.
		fb := fm.FiberBytes()
		// ELL's size follows from the longest row; build it only when its
		// padding is moderate, as one long fiber can make it enormous.
		rows, width := fm.Rows(), 0
		for r := range rows {
			width = max(width, fm.RowLen(r))
		}
		if slots := int64(rows) * int64(width); slots > MaxELLSlotsPerNNZ*int64(fm.NNZ()) {
			d.Footprints = append(d.Footprints, Footprint{Format: "ell", Mode: n, Bytes: 8*slots + fb,
				PaddingRatio: 1 - float64(fm.NNZ())/float64(slots), Seconds: -1})
		}
		for _, b := range []struct {
			format string
			build  func() sizer
		}{
			{"fiber-coo", func() sizer { return NewFiberCOO(fm) }},
			{"csr", func() sizer { return NewCSR(fm) }},
			{"ell", func() sizer { return NewELL(fm) }},
			{"hyb", func() sizer { return NewHYB(fm, -1) }},
		} {
			if b.format == "ell" && int64(rows)*int64(width) > MaxELLSlotsPerNNZ*int64(fm.NNZ()) {
				continue
			}
			start := time.Now()
			x := b.build()
			d.Footprints = append(d.Footprints, Footprint{Format: b.format, Mode: n, Bytes: x.Bytes() + fb,
				PaddingRatio: x.PaddingRatio(), Seconds: fmTime + time.Since(start).Seconds()})
		}
	}
	return d, nil
}

// MaxELLSlotsPerNNZ is the padding beyond which sparsetune does not build
// ELL (Describe computes its size instead, bench skips it): at more than 16
// slots per nonzero, ELL is at least 10x larger and slower than CSR, and one
// long fiber can make it gigabytes.
const MaxELLSlotsPerNNZ = 16

// Bytes returns the bytes of t's index and value arrays.
func (t *COO) Bytes() int64 {
	return int64(t.NNZ()) * int64(4*t.Order()+4)
}

// DefaultSliceMode returns the slicing mode used for the fiber matrix of
// mode n when none is chosen: the first other mode. The set of fiber rows,
// and so every format's size, does not depend on it; only their order does.
func DefaultSliceMode(n int) int {
	if n == 0 {
		return 1
	}
	return 0
}

// RootedOrder returns the mode order with root first and the other modes
// after it in increasing order: the order the COO of an MTTKRP of mode
// root is sorted in, and its CSF's unless CSFOrder moves a mode of
// longer fibers to the leaf. features.Summary.Global describes the
// fibers of its last mode for MTTKRP.
func RootedOrder(order, root int) []int {
	modes := []int{root}
	for m := range order {
		if m != root {
			modes = append(modes, m)
		}
	}
	return modes
}
