package accel

import (
	_ "embed"
	"fmt"
)

//go:embed body.cl
var body string

//go:embed opencl.h
var openclHeader string

//go:embed cuda.h
var cudaHeader string

// Backend is an accelerator API the kernels compile for.
type Backend int

const (
	OpenCL Backend = iota // OpenCL C 1.2
	CUDA                  // CUDA C++, compiled by NVRTC
)

func (b Backend) String() string {
	switch b {
	case OpenCL:
		return "opencl"
	case CUDA:
		return "cuda"
	}
	return fmt.Sprintf("Backend(%d)", int(b))
}

const (
	// MaxOrder is the highest tensor order the MTTKRP kernels take: they
	// keep per-mode indices and per-level positions in private arrays.
	MaxOrder = 8
	// Chunk is the number of consecutive entries a work-item of the COO
	// kernels takes: long enough that most runs of one row end inside it,
	// short enough to leave a GPU many work-items.
	Chunk = 8
	// ALTOMeta is the number of ulongs per mode in mttkrp_alto's meta
	// buffer: Lo, Hi, LoBits, factor offset, LoSteps[6], HiSteps[6].
	ALTOMeta = 16
	// PhiMaxRank is the largest rank phi_coo takes: it keeps a nonzero's
	// product row and its run's sum in private arrays of that length.
	PhiMaxRank = 64
)

// The kernels' names, as the backends look them up.
const (
	FillZero   = "fill_zero"
	SpTTMCSR   = "spttm_csr"
	SpTTMELL   = "spttm_ell"
	SpTTMCOO   = "spttm_coo"
	MTTKRPCOO  = "mttkrp_coo"
	MTTKRPCSF  = "mttkrp_csf"
	MTTKRPALTO = "mttkrp_alto"
	// PhiCOO is CP-APR's Φ = (X_(n) ⊘ max(B Πᵀ, ε)) Π over COO.
	PhiCOO = "phi_coo"
	// FMAPeak and Triad are the calibration probes of package hetero: a
	// chain of multiply-adds for the peak rate, a STREAM triad for the
	// memory bandwidth.
	FMAPeak = "fma_peak"
	Triad   = "triad"
)

// FMAChains is the number of independent multiply-add chains each
// work-item of fma_peak runs: one run does 2·FMAChains·iters flops per
// work-item.
const FMAChains = 8

// Source returns the kernels' source for a backend, for work-groups of
// workGroup work-items (mttkrp_alto must be launched with exactly that
// many; the others take any size).
func Source(b Backend, workGroup int) (string, error) {
	if workGroup < 1 {
		return "", fmt.Errorf("accel: work-group size %d < 1", workGroup)
	}
	var header string
	switch b {
	case OpenCL:
		header = openclHeader
	case CUDA:
		header = cudaHeader
	default:
		return "", fmt.Errorf("accel: unknown backend %v", b)
	}
	return fmt.Sprintf("%s#define WG %d\n#define CHUNK %d\n#define MAX_ORDER %d\n#define ALTO_META_N %d\n#define PHI_MAX_RANK %d\n%s",
		header, workGroup, Chunk, MaxOrder, ALTOMeta, PhiMaxRank, body), nil
}
