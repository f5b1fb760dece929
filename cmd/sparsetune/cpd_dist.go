package main

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/sparsetune/sparsetune/decomp"
	"github.com/sparsetune/sparsetune/dist"
	"github.com/sparsetune/sparsetune/engine"
	"github.com/sparsetune/sparsetune/formats"
	"github.com/sparsetune/sparsetune/hetero"
	"github.com/sparsetune/sparsetune/mpi"
)

// distReport is cpd's report under mpirun: the single-process fields and
// the distribution's (docs/mpi.md). ranks here is the MPI job's size; the
// Tucker core's ranks of decompReport share the JSON name but are never
// set for CP.
type distReport struct {
	*decompReport
	MPIRanks            int     `json:"ranks"`
	Grid                []int   `json:"grid"`
	LocalNNZ            []int64 `json:"local_nnz"`
	Imbalance           float64 `json:"imbalance"`
	CommSeconds         float64 `json:"comm_seconds"`
	CommBytes           int64   `json:"comm_bytes"`
	RedistributeSeconds float64 `json:"redistribute_seconds"`
	RedistributeBytes   int64   `json:"redistribute_bytes"`
	Relabelled          bool    `json:"relabelled"`
}

// runCPDDistributed is cpd as one rank of an MPI job: each rank reads its
// part of FILE, the ranks run dist.CPALS together, and rank 0 prints the
// progress and the report and writes --out.
func runCPDDistributed(cmd *cobra.Command, path string, c decompConfig) error {
	comm, err := mpi.Init()
	if err != nil {
		return fmt.Errorf("cpd under mpirun: %w", err)
	}
	defer mpi.Finalize()
	rank := comm.Rank()
	stderr := cmd.ErrOrStderr()
	if rank != 0 {
		stderr = io.Discard
	}
	start := time.Now()
	local, err := readPart(comm, stderr, path)
	if err != nil {
		return err
	}
	read := time.Since(start)
	// A part has the whole tensor's dims.
	init, err := resumeFactors(c.resume, local.Dims, slices.Repeat([]int{c.rank}, local.Order()), fmt.Sprintf("--rank %d", c.rank), true)
	if err != nil {
		return err
	}
	if len(c.formats) > 1 && len(c.formats) != local.Order() {
		return fmt.Errorf("--format lists %d formats for a tensor of order %d: give one, or one per mode", len(c.formats), local.Order())
	}
	// --format auto: each rank's engine predicts (or finds cached) the
	// format of every mode for its own block.
	var eng *engine.Engine
	if c.formatAuto {
		if eng, err = engine.New([]hetero.Device{hetero.NewCPU(c.threads)}, engine.Options{Predictor: defaultPredictor(stderr, hetero.MTTKRP)}); err != nil {
			return err
		}
	}
	start = time.Now()
	res, drep, err := dist.CPALSOn(cmd.Context(), comm, eng, local, decomp.Options{Rank: c.rank, Iters: c.iters, Tol: c.tol, Seed: c.seed, Init: c.init,
		InitFactors: init, LineSearch: c.lineSearch, Threads: c.threads, Formats: c.formats,
		Progress: func(s decomp.IterStat) { printIter(stderr, s, false) }})
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if rank != 0 {
		return nil // rank 0 reports and writes
	}
	var nnz int64
	for _, n := range drep.LocalNNZ {
		nnz += n
	}
	rep := cpReport(path, local.Dims, int(nnz), c, res, time.Since(start), read)
	switch {
	case len(drep.Formats) > 0:
		rep.Formats = drep.Formats // rank 0's, predicted for its block
	case len(rep.Formats) == 0:
		rep.Formats = []string{decomp.DefaultMTTKRPFormat}
	}
	rep.fill(res.History, false)
	if c.out != "" {
		if rep.Files, err = writeDecompModel(stderr, c.out, res); err != nil {
			return err
		}
	}
	out := &distReport{decompReport: rep, MPIRanks: drep.Ranks, Grid: drep.Grid, LocalNNZ: drep.LocalNNZ, Imbalance: drep.Imbalance,
		CommSeconds: drep.CommSeconds, CommBytes: drep.CommBytes, RedistributeSeconds: drep.RedistributeSeconds, RedistributeBytes: drep.RedistributeBytes, Relabelled: drep.Relabelled}
	w := cmd.OutOrStdout()
	if c.asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(out)
	}
	if err := printReport(w, rep, false); err != nil {
		return err
	}
	relabelled := ""
	if out.Relabelled {
		relabelled = ", indices relabelled to balance the cells"
	}
	fmt.Fprintf(w, "distributed over %d ranks, grid %s, nonzeros per rank %v (imbalance %.3f%s); rank 0 spent %.3fs in %s of communication, %.3fs redistributing\n",
		out.MPIRanks, formats.FormatDims(out.Grid), out.LocalNNZ, out.Imbalance, relabelled, out.CommSeconds, byteSize(out.CommBytes), out.RedistributeSeconds)
	return nil
}

// readPart reads this rank's share of the nonzeros of path: a .stb file
// by its own byte ranges (the parts' checksums then verified together),
// any other format whole on every rank, keeping a contiguous share.
func readPart(comm *mpi.Comm, stderr io.Writer, path string) (*formats.COO, error) {
	rank, size := comm.Rank(), comm.Size()
	if strings.HasSuffix(path, ".stb") {
		p, err := formats.ReadBinaryPart(path, rank, size)
		// Every rank must learn of any rank's failure, or the others
		// would wait for it in the next collective.
		failed := []uint32{0}
		if err != nil {
			failed[0] = 1
		}
		if cerr := mpi.Allreduce(comm, failed, failed, mpi.Max); cerr != nil {
			return nil, cerr
		}
		if err != nil {
			return nil, err
		}
		if failed[0] != 0 {
			return nil, fmt.Errorf("%s: another rank could not read its part", path)
		}
		n := len(p.Sums)
		all := make([]uint32, n*size)
		lens := make([]uint64, size)
		if err := mpi.Allgather(comm, p.Sums, all); err != nil {
			return nil, err
		}
		if err := mpi.Allgather(comm, []uint64{uint64(p.NNZ())}, lens); err != nil {
			return nil, err
		}
		sums := make([][]uint32, size)
		ls := make([]int, size)
		for r := range size {
			sums[r], ls[r] = all[r*n:(r+1)*n], int(lens[r])
		}
		if err := formats.VerifyBinaryParts(path, p.Stored, sums, ls); err != nil {
			return nil, err
		}
		return p.COO, nil
	}
	x, err := readTensor(stderr, path)
	if err != nil {
		return nil, err
	}
	if size > 1 {
		fmt.Fprintf(stderr, "%s: every rank reads the whole text file and keeps its share; convert it to .stb (sparsetune convert) for each rank to read only its part\n", path)
	}
	lo, hi := rank*x.NNZ()/size, (rank+1)*x.NNZ()/size
	part := &formats.COO{Dims: x.Dims, Inds: make([][]uint32, x.Order()), Vals: x.Vals[lo:hi]}
	for m, ind := range x.Inds {
		part.Inds[m] = ind[lo:hi]
	}
	return part, nil
}

// byteSize writes n bytes in the largest binary unit that keeps it >= 1.
func byteSize(n int64) string {
	v, unit := float64(n), "B"
	for _, u := range []string{"KiB", "MiB", "GiB", "TiB"} {
		if v < 1024 {
			break
		}
		v, unit = v/1024, u
	}
	return fmt.Sprintf("%.1f %s", v, unit)
}
