package formats

import (
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
)

// TestConverter: a Converter builds every format of every mode as
// NewTensorFormat does, returns one shared value of a mode-free format for
// all modes and from concurrent callers, a new COO or CSF per call, and
// NewTensorFormat's errors.
func TestConverter(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	x := summedCOO(t, rng, []int{40, 30, 20, 10}, 4000)
	conv := NewConverter(x)
	for _, name := range TensorFormatNames {
		var first TensorFormat
		for mode := range x.Order() {
			got, err := conv.Format(name, mode)
			if err != nil {
				t.Fatalf("%s, mode %d: %v", name, mode+1, err)
			}
			want, err := NewTensorFormat(x, name, mode)
			if err != nil {
				t.Fatal(err)
			}
			if !got.ToCOO().Equal(want.ToCOO()) {
				t.Errorf("%s, mode %d: the Converter's tensor differs from NewTensorFormat's", name, mode+1)
			}
			if csf, ok := got.(*CSF); ok && !slices.Equal(csf.ModeOrder, want.(*CSF).ModeOrder) {
				t.Errorf("csf, mode %d: order %v, NewTensorFormat's %v", mode+1, csf.ModeOrder, want.(*CSF).ModeOrder)
			}
			if mode == 0 {
				first = got
				continue
			}
			if shared := got == first; shared != ModeFree(name) {
				t.Errorf("%s, mode %d: the same value as mode 1's %v, want %v", name, mode+1, shared, ModeFree(name))
			}
		}
	}

	// Concurrent first calls build one value.
	conv = NewConverter(x)
	got := make([]TensorFormat, 8)
	var wg sync.WaitGroup
	for i := range got {
		wg.Go(func() {
			f, err := conv.Format("alto", i%x.Order())
			if err != nil {
				t.Error(err)
			}
			got[i] = f
		})
	}
	wg.Wait()
	for i, f := range got {
		if f != got[0] {
			t.Errorf("concurrent call %d got a copy of its own", i)
		}
	}

	for _, c := range []struct {
		name string
		mode int
		err  string
	}{
		{"csf", 4, "mode 5 out of range"},
		{"alto", -1, "mode 0 out of range"},
		{"ell", 0, "unknown tensor format"},
	} {
		if _, err := conv.Format(c.name, c.mode); err == nil || !strings.Contains(err.Error(), c.err) {
			t.Errorf("Format(%q, %d): error %v, want one saying %q", c.name, c.mode, err, c.err)
		}
	}
}
