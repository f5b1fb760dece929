package engine_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/sparsetune/sparsetune/engine"
	"github.com/sparsetune/sparsetune/features"
	"github.com/sparsetune/sparsetune/formats"
	"github.com/sparsetune/sparsetune/hetero"
	"github.com/sparsetune/sparsetune/kernels"
)

// Example runs an SpTTM on a small tensor: the engine chooses the format,
// splits the slices between the devices (here only the CPU; add
// hetero.Lookup("opencl:0", 0) to share the work with an accelerator) and
// returns one result.
func Example() {
	x, _ := formats.NewCOO([]int{2, 3, 2}, 4)
	x.Append([]uint32{0, 0, 0}, 1)
	x.Append([]uint32{0, 2, 0}, 2)
	x.Append([]uint32{1, 1, 1}, 3)
	x.Append([]uint32{1, 2, 1}, 4)
	ut := &kernels.Matrix{Rows: 3, Cols: 2, Data: []float32{1, 0, 0, 1, 1, 1}} // Uᵀ: mode-2 dim x rank

	e, err := engine.New([]hetero.Device{hetero.NewCPU(0)}, engine.Options{})
	if err != nil {
		log.Fatal(err)
	}
	res, err := e.TTM(context.Background(), x, 1, ut)
	if err != nil {
		log.Fatal(err)
	}
	for r := range res.Fibers.Rows() {
		fmt.Println("fiber", r, res.Y.Row(r))
	}
	fmt.Println("split", res.Strategy, "on", res.Devices[0].Device, "format", res.FormatSource)
	// Output:
	// fiber 0 [3 2]
	// fiber 1 [4 7]
	// split cpu on cpu format predicted
}

// ExamplePlan prepares an MTTKRP once (format, split, conversion) and runs
// it with two sets of factors, as a decomposition does every iteration.
func ExamplePlan() {
	x, _ := formats.NewCOO([]int{2, 2, 2}, 3)
	x.Append([]uint32{0, 0, 0}, 1)
	x.Append([]uint32{0, 1, 1}, 2)
	x.Append([]uint32{1, 1, 0}, 3)

	e, err := engine.New([]hetero.Device{hetero.NewCPU(0)}, engine.Options{})
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	p, err := e.PlanMTTKRP(ctx, x, 0, 1) // mode 1, rank 1
	if err != nil {
		log.Fatal(err)
	}
	defer p.Close()
	m := kernels.NewMatrix(p.OutputShape())
	for _, v := range []float32{1, 2} {
		b := &kernels.Matrix{Rows: 2, Cols: 1, Data: []float32{v, v}}
		c := &kernels.Matrix{Rows: 2, Cols: 1, Data: []float32{1, 1}}
		if _, err := p.Run(ctx, []*kernels.Matrix{nil, b, c}, m); err != nil {
			log.Fatal(err)
		}
		fmt.Println(m.Data)
	}
	// Output:
	// [3 3]
	// [6 6]
}

// ExampleEngine_UsePicks reads a tensor file while picking the sample the
// format choice summarises (tensors of more than features.ExactNNZ
// nonzeros are summarised from a sample), and hands the picks to the
// engine: the choice then gathers nothing from the tensor in memory.
func ExampleEngine_UsePicks() {
	x, _ := formats.NewCOO([]int{400, 300, 24}, 0)
	for i := range 100_000 {
		x.Append([]uint32{uint32(i % 400), uint32(i / 400 % 300), uint32(i % 24)}, 1)
	}
	dir, err := os.MkdirTemp("", "picks")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "x.stb")
	if err := formats.WriteFile(path, x); err != nil {
		log.Fatal(err)
	}

	t, picks, _, err := formats.ReadFilePicked(path, features.PickPositions)
	if err != nil {
		log.Fatal(err)
	}
	e, err := engine.New([]hetero.Device{hetero.NewCPU(0)}, engine.Options{})
	if err != nil {
		log.Fatal(err)
	}
	e.UsePicks(t, picks)
	p, err := e.PlanMTTKRP(context.Background(), t, 0, 16)
	if err != nil {
		log.Fatal(err)
	}
	defer p.Close()
	fmt.Println("picked", len(picks.Pos), "of", t.NNZ(), "nonzeros; format", p.Report().FormatSource)
	// Output:
	// picked 10737 of 100000 nonzeros; format predicted
}

// ExampleResult_Verify checks a result against the op's definition,
// computed on the CPU in float64: how to trust an accelerator on a new
// driver (sparsetune ttm and mttkrp --verify do this).
func ExampleResult_Verify() {
	x, _ := formats.NewCOO([]int{3, 2, 2}, 4)
	x.Append([]uint32{0, 0, 0}, 1)
	x.Append([]uint32{1, 1, 0}, 2)
	x.Append([]uint32{2, 0, 1}, 3)
	x.Append([]uint32{2, 1, 1}, 4)
	factors := []*kernels.Matrix{nil, // mode 1 is the output's
		{Rows: 2, Cols: 2, Data: []float32{1, 2, 3, 4}},
		{Rows: 2, Cols: 2, Data: []float32{0.5, 1, 1, 0.5}}}

	e, err := engine.New([]hetero.Device{hetero.NewCPU(0)}, engine.Options{})
	if err != nil {
		log.Fatal(err)
	}
	res, err := e.MTTKRP(context.Background(), x, 0, factors)
	if err != nil {
		log.Fatal(err)
	}
	relErr, err := res.Verify(x, factors)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("M row 3:", res.Y.Row(2))
	fmt.Println("within 1e-4 of the definition:", relErr <= 1e-4)
	// Output:
	// M row 3: [15 11]
	// within 1e-4 of the definition: true
}

// ExampleEngine_MTTKRP runs one MTTKRP: a single call converts nothing on
// the CPU (a conversion would cost many runs of the kernel it speeds up),
// where a plan runs the predicted format.
func ExampleEngine_MTTKRP() {
	x, _ := formats.NewCOO([]int{3, 2, 2}, 4)
	x.Append([]uint32{2, 1, 1}, 4)
	x.Append([]uint32{0, 0, 0}, 1)
	x.Append([]uint32{2, 0, 1}, 3)
	x.Append([]uint32{1, 1, 0}, 2)
	factors := []*kernels.Matrix{
		{Rows: 3, Cols: 2, Data: []float32{1, 1, 2, 2, 3, 3}},
		nil, // mode 2 is the output's
		{Rows: 2, Cols: 2, Data: []float32{0.5, 1, 1, 0.5}}}

	e, err := engine.New([]hetero.Device{hetero.NewCPU(0)}, engine.Options{})
	if err != nil {
		log.Fatal(err)
	}
	res, err := e.MTTKRP(context.Background(), x, 1, factors)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.Devices[0].Format, res.Devices[0].FormatSource)
	fmt.Println("M:", res.Y.Data)

	p, err := e.PlanMTTKRP(context.Background(), x, 1, 2)
	if err != nil {
		log.Fatal(err)
	}
	defer p.Close()
	fmt.Println("a plan:", p.Report().Devices[0].FormatSource)
	// Output:
	// coo one-run
	// M: [9.5 5.5 14 10]
	// a plan: predicted
}
