package hetero

import "fmt"

// Op is a sparse tensor operation sparsetune runs.
type Op int

const (
	SpTTM  Op = iota + 1 // Y = X ×ₙ U, on the mode-n fiber matrix
	MTTKRP               // M = X₍ₙ₎ (Khatri-Rao product of the other factors)
)

// Ops lists the operations.
var Ops = []Op{SpTTM, MTTKRP}

// String returns the name the CLI uses: "ttm" or "mttkrp".
func (op Op) String() string {
	switch op {
	case SpTTM:
		return "ttm"
	case MTTKRP:
		return "mttkrp"
	}
	return fmt.Sprintf("Op(%d)", int(op))
}

// ParseOp parses "ttm" (or "spttm") and "mttkrp".
func ParseOp(s string) (Op, error) {
	switch s {
	case "ttm", "spttm":
		return SpTTM, nil
	case "mttkrp":
		return MTTKRP, nil
	}
	return 0, fmt.Errorf("unknown op %q, expected ttm or mttkrp", s)
}

// Formats returns the formats an operation runs in.
func (op Op) Formats() []string {
	if op == SpTTM {
		return []string{"coo", "csr", "ell", "hyb"}
	}
	return []string{"coo", "csf", "hicoo", "alto"}
}

// Flops returns the flops of one run by sparsetune's convention: SpTTM
// 2·nnz·R (a multiply and an add per entry and rank column), MTTKRP N·nnz·R
// (N-1 multiplies and an add).
func (op Op) Flops(order, nnz, rank int) float64 {
	if op == SpTTM {
		return 2 * float64(nnz) * float64(rank)
	}
	return float64(order) * float64(nnz) * float64(rank)
}
