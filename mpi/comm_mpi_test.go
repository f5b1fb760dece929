//go:build mpi

package mpi

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"
)

// The tests below that need several ranks run this test binary under
// mpirun, with childEnv naming the test each rank runs.
const childEnv = "SPARSETUNE_MPI_CHILD"

func TestMain(m *testing.M) {
	code := m.Run()
	if err := Finalize(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		code = 1
	}
	os.Exit(code)
}

// mpirun runs the child test name on np ranks and returns its output and
// error; a job that outlives the timeout is killed and reported.
func mpirun(t *testing.T, np int, name string) (string, error) {
	t.Helper()
	if _, err := exec.LookPath("mpirun"); err != nil {
		t.Skip("mpirun not found (apt-get install openmpi-bin)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "mpirun", "--allow-run-as-root", "--oversubscribe", "-np", fmt.Sprint(np),
		os.Args[0], "-test.run=^"+name+"$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), childEnv+"="+name)
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("mpirun -np %d %s hung: killed after 60 s\n%s", np, name, out)
	}
	return string(out), err
}

func TestCollectives(t *testing.T) {
	for _, np := range []int{1, 2, 4} {
		out, err := mpirun(t, np, "TestCollectivesRank")
		if err != nil || strings.Count(out, "--- PASS: TestCollectivesRank") != np {
			t.Errorf("mpirun -np %d: %v\n%s", np, err, out)
		}
	}
}

// A rank that exits before a collective fails the job, with mpirun's
// message, within the timeout: it does not hang the others.
func TestEarlyExit(t *testing.T) {
	out, err := mpirun(t, 2, "TestEarlyExitRank")
	if err == nil {
		t.Fatalf("a job whose rank 1 exited early succeeded\n%s", out)
	}
	if !strings.Contains(out, "exit") {
		t.Errorf("mpirun's output does not say a process exited:\n%s", out)
	}
}

func child(t *testing.T) *Comm {
	if os.Getenv(childEnv) != t.Name() {
		t.Skip("runs as a rank of an mpirun job started by another test")
	}
	c, err := Init()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestEarlyExitRank(t *testing.T) {
	c := child(t)
	if c.Rank() == 1 {
		os.Exit(3)
	}
	buf := []float32{1}
	Allreduce(c, buf, buf, Sum)
	c.Barrier()
}

func TestCollectivesRank(t *testing.T) {
	c := child(t)
	r, p := c.Rank(), c.Size()

	send := []float32{float32(r + 1), float32(r + 1), float32(r + 1)}
	recv := make([]float32, 3)
	if err := Allreduce(c, send, recv, Sum); err != nil {
		t.Fatal(err)
	}
	if want := float32(p * (p + 1) / 2); recv[0] != want || recv[2] != want {
		t.Errorf("allreduce sum: %v, want %g", recv, want)
	}
	inPlace := []float64{float64(r), -float64(r)}
	if err := Allreduce(c, inPlace, inPlace, Max); err != nil {
		t.Fatal(err)
	}
	if inPlace[0] != float64(p-1) || inPlace[1] != 0 {
		t.Errorf("allreduce max in place: %v", inPlace)
	}
	u := []uint64{uint64(10 + r)}
	if err := Allreduce(c, u, u, Min); err != nil || u[0] != 10 {
		t.Errorf("allreduce min uint64: %v %v", u, err)
	}

	all := make([]uint32, 2*p)
	if err := Allgather(c, []uint32{uint32(r), uint32(10 * r)}, all); err != nil {
		t.Fatal(err)
	}
	for q := range p {
		if all[2*q] != uint32(q) || all[2*q+1] != uint32(10*q) {
			t.Errorf("allgather: %v", all)
			break
		}
	}

	counts := make([]int, p)
	var want []float64
	for q := range p {
		counts[q] = q + 1
		for range q + 1 {
			want = append(want, float64(q))
		}
	}
	mine := make([]float64, r+1)
	for i := range mine {
		mine[i] = float64(r)
	}
	got := make([]float64, len(want))
	if err := Allgatherv(c, mine, got, counts); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) {
		t.Errorf("allgatherv: %v, want %v", got, want)
	}
	if err := Allgatherv(c, mine[:0], got, counts); err == nil {
		t.Error("allgatherv with a send length other than counts[rank] accepted")
	}

	ones := make([]float32, len(want))
	for i := range ones {
		ones[i] = 1
	}
	block := make([]float32, r+1)
	if err := ReduceScatter(c, ones, block, counts, Sum); err != nil {
		t.Fatal(err)
	}
	for _, v := range block {
		if v != float32(p) {
			t.Errorf("reduce-scatter: %v, want all %d", block, p)
			break
		}
	}

	// Rank r sends d+1 elements r*100+d to each rank d.
	var out []uint32
	sendCounts, recvCounts := make([]int, p), make([]int, p)
	for d := range p {
		sendCounts[d], recvCounts[d] = d+1, r+1
		for range d + 1 {
			out = append(out, uint32(r*100+d))
		}
	}
	in := make([]uint32, p*(r+1))
	if err := Alltoallv(c, out, sendCounts, in, recvCounts); err != nil {
		t.Fatal(err)
	}
	for s := range p {
		for k := range r + 1 {
			if in[s*(r+1)+k] != uint32(s*100+r) {
				t.Fatalf("alltoallv: %v", in)
			}
		}
	}

	b := []float64{float64(r)}
	if err := Bcast(c, b, p-1); err != nil || b[0] != float64(p-1) {
		t.Errorf("bcast: %v %v", b, err)
	}
	if err := Bcast(c, b, p); err == nil {
		t.Error("bcast from a rank beyond the job accepted")
	}

	sub, err := c.Split(r%2, r)
	if err != nil {
		t.Fatal(err)
	}
	if want := (p + 1 - r%2) / 2; sub.Size() != want || sub.Rank() != r/2 {
		t.Errorf("split: rank %d of %d, want %d of %d", sub.Rank(), sub.Size(), r/2, want)
	}
	if err := c.Barrier(); err != nil {
		t.Fatal(err)
	}
}
