package formats

import "fmt"

// TensorFormat is a storage format of a whole tensor for MTTKRP: COO, CSF,
// HiCOO or ALTO. Each gives back the tensor it was built from.
type TensorFormat interface {
	NNZ() int
	// Bytes returns the bytes of the format's index and value arrays.
	Bytes() int64
	// ToCOO rebuilds the tensor.
	ToCOO() *COO
}

// TensorFormatNames lists the MTTKRP formats by the names
// NewTensorFormat takes.
var TensorFormatNames = []string{"coo", "csf", "hicoo", "alto"}

// NewTensorFormat returns t in the named format (one of TensorFormatNames),
// laid out for an MTTKRP of the 0-based mode: COO is a copy sorted by the
// mode first (the other modes after it in increasing order), so that a
// kernel's parts own disjoint output rows; CSF is rooted at the mode, its
// levels in CSFOrder; HiCOO
// (default block bits) and ALTO (no block cap) do not depend on the mode.
// t is not modified.
func NewTensorFormat(t *COO, name string, mode int) (TensorFormat, error) {
	return newTensorFormat(t, name, mode, func(root int) []int { return CSFOrder(t, root) })
}

// newTensorFormat is NewTensorFormat with the CSF's level order from
// csfOrder (a Converter's, whose counts serve every mode).
func newTensorFormat(t *COO, name string, mode int, csfOrder func(root int) []int) (TensorFormat, error) {
	if err := CheckMode(mode, t.Order()); err != nil {
		return nil, err
	}
	switch name {
	case "coo":
		if err := checkFormatInput(t); err != nil {
			return nil, err
		}
		return t.sortedCopy(RootedOrder(t.Order(), mode)), nil
	case "csf":
		return NewCSF(t, csfOrder(mode))
	case "hicoo":
		return NewHiCOO(t, DefaultHiCOOBlockBits)
	case "alto":
		return NewALTO(t, 0)
	}
	return nil, fmt.Errorf("unknown tensor format %q, expected one of %v", name, TensorFormatNames)
}

// ModeFree reports whether NewTensorFormat builds the named format the
// same way whatever the mode (HiCOO and ALTO): one such form of a tensor
// serves an MTTKRP along every mode, where COO and CSF need one per mode.
func ModeFree(name string) bool { return name == "hicoo" || name == "alto" }

// ToCOO returns a copy of t, so that COO is a TensorFormat like the others
// (and, like theirs, the result can be changed without changing t).
func (t *COO) ToCOO() *COO { return t.Clone() }
