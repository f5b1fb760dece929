//go:build mpi

package dist

import (
	"context"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sparsetune/sparsetune/decomp"
	"github.com/sparsetune/sparsetune/formats"
	"github.com/sparsetune/sparsetune/mpi"
)

// Tests that need several ranks run this test binary under mpirun, with
// childEnv naming the test each rank runs.
const childEnv = "SPARSETUNE_DIST_CHILD"

func TestMain(m *testing.M) {
	code := m.Run()
	if err := mpi.Finalize(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		code = 1
	}
	os.Exit(code)
}

// TestCPALSRanks runs the distributed CP-ALS on 1, 2 and 4 ranks; each
// rank checks its result against the single-process run.
func TestCPALSRanks(t *testing.T) {
	if _, err := exec.LookPath("mpirun"); err != nil {
		t.Skip("mpirun not found (apt-get install openmpi-bin)")
	}
	if _, err := os.Stat(realTensor); err != nil {
		t.Skipf("real data absent (%v): skipping", err)
	}
	for _, np := range []int{1, 2, 4} {
		ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
		cmd := exec.CommandContext(ctx, "mpirun", "--allow-run-as-root", "--oversubscribe", "-np", fmt.Sprint(np),
			os.Args[0], "-test.run=^TestCPALSRank$", "-test.v", "-test.count=1")
		cmd.Env = append(os.Environ(), childEnv+"=1")
		out, err := cmd.CombinedOutput()
		hung := ctx.Err() != nil
		cancel()
		if hung {
			t.Fatalf("mpirun -np %d hung: killed after 120 s\n%s", np, out)
		}
		if err != nil || strings.Count(string(out), "--- PASS: TestCPALSRank") != np {
			t.Errorf("mpirun -np %d: %v\n%s", np, err, out)
		}
	}
}

var realTensor = filepath.Join("..", "..", "shared", "data", "tensors", "kg_wn11.tns")

func TestCPALSRank(t *testing.T) {
	if os.Getenv(childEnv) == "" {
		t.Skip("runs as a rank of an mpirun job started by TestCPALSRanks")
	}
	c, err := mpi.Init()
	if err != nil {
		t.Fatal(err)
	}
	x, err := formats.ReadFile(realTensor)
	if err != nil {
		t.Fatal(err)
	}
	for _, lineSearch := range []bool{false, true} {
		opts := decomp.Options{Rank: 8, Iters: 15, Seed: 7, Threads: 1, LineSearch: lineSearch}
		want, err := decomp.CPALS(x, opts)
		if err != nil {
			t.Fatal(err)
		}
		// Each rank takes a contiguous share, as a reader of byte ranges would.
		r, p, nnz := c.Rank(), c.Size(), x.NNZ()
		lo, hi := r*nnz/p, (r+1)*nnz/p
		local, _ := formats.NewCOO(x.Dims, hi-lo)
		coord := make([]uint32, x.Order())
		for k := lo; k < hi; k++ {
			local.Append(x.Coord(k, coord), x.Vals[k])
		}
		got, rep, err := CPALS(c, local, opts)
		if err != nil {
			t.Fatal(err)
		}
		if math.Abs(got.Fit-want.Fit) > 1e-3 || got.Iterations != want.Iterations {
			t.Errorf("rank %d of %d: fit %.6f after %d iterations, single process %.6f after %d", r, p, got.Fit, got.Iterations, want.Fit, want.Iterations)
		}
		// Every rank holds the same model.
		fit := []float64{got.Fit}
		lowest, highest := []float64{0}, []float64{0}
		if err := mpi.Allreduce(c, fit, lowest, mpi.Min); err != nil {
			t.Fatal(err)
		}
		if err := mpi.Allreduce(c, fit, highest, mpi.Max); err != nil {
			t.Fatal(err)
		}
		if lowest[0] != highest[0] {
			t.Errorf("ranks disagree: fits from %v to %v", lowest[0], highest[0])
		}
		var total int64
		for _, n := range rep.LocalNNZ {
			total += n
		}
		if rep.Ranks != p || total != int64(nnz) || len(rep.Grid) != x.Order() {
			t.Errorf("report %+v: want %d ranks holding %d nonzeros", rep, p, nnz)
		}
		t.Logf("rank %d of %d: line search %v: grid %v, local nnz %v, imbalance %.3f, comm %.4f s %d B, fit %.6f (single %.6f)", r, p, lineSearch, rep.Grid, rep.LocalNNZ, rep.Imbalance, rep.CommSeconds, rep.CommBytes, got.Fit, want.Fit)
	}
}
