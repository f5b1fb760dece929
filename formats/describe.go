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
	for n := range t.Order() {
		st, err := t.ModeStats(n)
		if err != nil {
			return nil, err
		}
		d.Modes = append(d.Modes, st)
	}
	return d, nil
}

// Bytes returns the bytes of t's index and value arrays.
func (t *COO) Bytes() int64 {
	return int64(t.NNZ()) * int64(4*t.Order()+4)
}
