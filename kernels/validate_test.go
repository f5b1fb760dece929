package kernels

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/sparsetune/sparsetune/formats"
)

// TestPlansRejectMalformedFormats: the inner loops do not check bounds, so
// a plan must refuse a format whose arrays were corrupted after it was
// built, with an error that says what is wrong.
func TestPlansRejectMalformedFormats(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 9))
	x := randomCOO(rng, []int{30, 40, 50}, 600)
	// fiber builds the fiber matrix anew for each case: CSR and FiberCOO
	// share its arrays, so a case that corrupts them corrupts F.
	fiber := func() *formats.FiberMatrix {
		f, err := formats.NewFiberMatrix(x, 1, formats.DefaultSliceMode(1))
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	f := fiber()
	tensor := func(name string) formats.TensorFormat {
		tf, err := formats.NewTensorFormat(x, name, 0)
		if err != nil {
			t.Fatal(err)
		}
		return tf
	}
	cases := []struct {
		name, want string
		build      func() error
	}{
		{"csr column", "column index", func() error {
			c := formats.NewCSR(fiber())
			c.ColInd[7] = 40
			_, err := NewCSRSpTTM(c, 16, 1)
			return err
		}},
		{"csr pointers", "pointer", func() error {
			c := formats.NewCSR(fiber())
			c.RowPtr[3], c.RowPtr[4] = c.RowPtr[4]+1, c.RowPtr[3]
			_, err := NewCSRSpTTM(c, 16, 1)
			return err
		}},
		{"coo row order", "row order", func() error {
			c := formats.NewFiberCOO(fiber())
			c.RowInd[0] = c.RowInd[len(c.RowInd)-1]
			_, err := NewCOOSpTTM(c, 16, 1)
			return err
		}},
		{"ell column", "column index", func() error {
			e := formats.NewELL(f)
			e.ColInd[0] = 1 << 30
			_, err := NewELLSpTTM(e, 16, 1)
			return err
		}},
		{"hyb remainder", "COO part", func() error {
			h := formats.NewHYB(f, 1)
			h.COO.ColInd[0] = 40
			_, err := NewHYBSpTTM(h, 16, 1)
			return err
		}},
		{"mttkrp coo", "mode-2 index", func() error {
			c := tensor("coo").(*formats.COO)
			c.Inds[1][5] = 40
			_, err := NewCOOMTTKRP(c, 0, 16, 1)
			return err
		}},
		{"mttkrp csf", "level-2 index", func() error {
			c := tensor("csf").(*formats.CSF)
			c.FiberIdx[2][0] = 1000
			_, err := NewCSFMTTKRP(c, 0, 16, 1)
			return err
		}},
		{"mttkrp hicoo", "out of range", func() error {
			h := tensor("hicoo").(*formats.HiCOO)
			h.BlockInds[2][len(h.BlockInds[2])-1] = 1 << 20
			_, err := NewHiCOOMTTKRP(h, 0, 16, 1)
			return err
		}},
		{"mttkrp alto", "out of range", func() error {
			a := tensor("alto").(*formats.ALTO)
			a.Lin[3] = ^uint64(0) // every mode at its all-ones index, past dims that are not powers of two
			_, err := NewALTOMTTKRP(a, 0, 16, 1)
			return err
		}},
	}
	for _, c := range cases {
		err := c.build()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one mentioning %q", c.name, err, c.want)
		}
	}
}
