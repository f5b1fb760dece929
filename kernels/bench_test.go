package kernels

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/sparsetune/sparsetune/formats"
)

// benchTensor returns the tensor named by SPARSETUNE_BENCH_TENSOR (a path),
// or the shared kg_wn18 (the real tensor with the most nonzeros), or skips.
func benchTensor(b *testing.B) (string, *formats.COO) {
	path := os.Getenv("SPARSETUNE_BENCH_TENSOR")
	if path == "" {
		path = filepath.Join("..", "..", "shared", "data", "tensors", "kg_wn18.tns")
	}
	x, err := formats.ReadFile(path)
	if err != nil {
		b.Skipf("no benchmark tensor: %v", err)
	}
	return filepath.Base(path), x
}

// BenchmarkSpTTM times every SpTTM format per mode at R = 16 and reports
// GFLOP/s (2·nnz·R) and GB/s (the plan's bytes model).
func BenchmarkSpTTM(b *testing.B) {
	name, x := benchTensor(b)
	const R = 16
	rng := rand.New(rand.NewPCG(1, 1))
	for mode := range x.Order() {
		f, err := formats.NewFiberMatrix(x, mode, formats.DefaultSliceMode(mode))
		if err != nil {
			b.Fatal(err)
		}
		ut := randomFactors(rng, []int{x.Dims[mode]}, R)[0]
		for _, fname := range formats.FiberFormatNames {
			if fname == "ell" && int64(f.Rows())*int64(f.MaxRowLen()) > formats.MaxELLSlotsPerNNZ*int64(f.NNZ()) {
				continue
			}
			b.Run(fmt.Sprintf("%s/mode%d/%s", name, mode+1, fname), func(b *testing.B) {
				ff, err := formats.NewFiberFormat(f, fname)
				if err != nil {
					b.Fatal(err)
				}
				p, err := NewSpTTM(ff, R, 0)
				if err != nil {
					b.Fatal(err)
				}
				out := NewMatrix(f.Rows(), R)
				b.ReportAllocs()
				b.ResetTimer()
				for b.Loop() {
					if err := p.Run(out, ut); err != nil {
						b.Fatal(err)
					}
				}
				sec := b.Elapsed().Seconds() / float64(b.N)
				b.ReportMetric(p.Flops()/sec/1e9, "GFLOP/s")
				b.ReportMetric(p.Bytes()/sec/1e9, "GB/s")
			})
		}
	}
}

// BenchmarkMTTKRP times every MTTKRP format per mode at R = 16 and reports
// GFLOP/s (N·nnz·R) and GB/s (the plan's bytes model).
func BenchmarkMTTKRP(b *testing.B) {
	name, x := benchTensor(b)
	const R = 16
	rng := rand.New(rand.NewPCG(2, 2))
	fs := randomFactors(rng, x.Dims, R)
	for mode := range x.Order() {
		for _, fname := range formats.TensorFormatNames {
			b.Run(fmt.Sprintf("%s/mode%d/%s", name, mode+1, fname), func(b *testing.B) {
				tf, err := formats.NewTensorFormat(x, fname, mode)
				if err != nil {
					b.Fatal(err)
				}
				p, err := NewMTTKRP(tf, mode, R, 0)
				if err != nil {
					b.Fatal(err)
				}
				out := NewMatrix(x.Dims[mode], R)
				b.ReportAllocs()
				b.ResetTimer()
				for b.Loop() {
					if err := p.Run(out, fs); err != nil {
						b.Fatal(err)
					}
				}
				sec := b.Elapsed().Seconds() / float64(b.N)
				b.ReportMetric(p.Flops()/sec/1e9, "GFLOP/s")
				b.ReportMetric(p.Bytes()/sec/1e9, "GB/s")
			})
		}
	}
}
