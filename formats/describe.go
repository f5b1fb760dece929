package formats

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
	hicoo, err := NewHiCOO(t, DefaultHiCOOBlockBits)
	if err != nil {
		return nil, err
	}
	alto, err := NewALTO(t, 0)
	if err != nil {
		return nil, err
	}
	d.Footprints = append(d.Footprints,
		Footprint{Format: "hicoo", Mode: -1, Bytes: hicoo.Bytes()},
		Footprint{Format: "alto", Mode: -1, Bytes: alto.Bytes()})
	for n := range t.Order() {
		st, err := t.ModeStats(n)
		if err != nil {
			return nil, err
		}
		d.Modes = append(d.Modes, st)
		csf, err := NewCSF(t, rootedOrder(t.Order(), n))
		if err != nil {
			return nil, err
		}
		d.Footprints = append(d.Footprints, Footprint{Format: "csf", Mode: n, Bytes: csf.Bytes()})
		fm, err := NewFiberMatrix(t, n, DefaultSliceMode(n))
		if err != nil {
			return nil, err
		}
		// The fiber coordinates are part of every SpTTM format's memory:
		// the kernel needs them to write its output.
		fb := fm.FiberBytes()
		ell, hyb := NewELL(fm), NewHYB(fm, -1)
		d.Footprints = append(d.Footprints,
			Footprint{Format: "fiber-coo", Mode: n, Bytes: NewFiberCOO(fm).Bytes() + fb},
			Footprint{Format: "csr", Mode: n, Bytes: NewCSR(fm).Bytes() + fb},
			Footprint{Format: "ell", Mode: n, Bytes: ell.Bytes() + fb, PaddingRatio: ell.PaddingRatio()},
			Footprint{Format: "hyb", Mode: n, Bytes: hyb.Bytes() + fb, PaddingRatio: hyb.PaddingRatio()})
	}
	return d, nil
}

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

// rootedOrder returns the mode order with root first and the other modes
// after it in increasing order: the CSF an MTTKRP of mode root runs on.
func rootedOrder(order, root int) []int {
	modes := []int{root}
	for m := range order {
		if m != root {
			modes = append(modes, m)
		}
	}
	return modes
}
