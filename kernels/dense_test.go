package kernels

import (
	"math"
	"strings"
	"testing"

	"github.com/sparsetune/sparsetune/formats"
)

func TestCheckDenseFits(t *testing.T) {
	x, err := formats.NewCOO([]int{formats.MaxDim, 40, 3}, 8)
	if err != nil {
		t.Fatal(err)
	}
	for k := range uint32(8) {
		x.Append([]uint32{k * 1000, k * 5, k % 3}, 1)
	}
	tests := []struct {
		name   string
		shapes [][2]int
		want   []string // substrings of the error; nil: fits
	}{
		{"nothing", nil, nil},
		{"small", [][2]int{{40, 16}, {3, 16}}, nil},
		{"past any address space", [][2]int{{math.MaxInt / 2, 16}, {40, 16}},
			[]string{"factors need more than 16 EiB, more than a", "mode 1 uses only 8 of its "}},
	}
	for _, tt := range tests {
		err := CheckDenseFits(x, "factors", tt.shapes...)
		switch {
		case tt.want == nil && err != nil:
			t.Errorf("%s: %v", tt.name, err)
		case tt.want != nil && err == nil:
			t.Errorf("%s: fits", tt.name)
		case err != nil:
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%s: error %q lacks %q", tt.name, err, w)
				}
			}
		}
	}
	// Modes that use most of their indices are not named.
	if err := CheckDenseFits(nil, "factors", [2]int{math.MaxInt, 4}); err == nil || strings.Contains(err.Error(), "uses only") {
		t.Errorf("without a tensor: %v", err)
	}
}
