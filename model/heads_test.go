package model

import (
	"strings"
	"testing"
)

// TestHeadFor: a cpu prediction takes the head of its inner loops, else
// the single cpu head, else the cpu head of the same vector width, and
// warns whenever the head's labels came from other inner loops; other
// classes take the head of their name and never warn.
func TestHeadFor(t *testing.T) {
	heads := func(names ...string) []Head {
		var hs []Head
		for _, n := range names {
			hs = append(hs, Head{Name: n, Classes: []string{"coo", "csf"}})
		}
		return hs
	}
	split := heads("cpu/avx2+pext", "cpu/avx512+pext", "cuda-gpu", "opencl-cpu")
	for _, c := range []struct {
		heads    []Head
		cpuLoops []string
		class    string
		loops    string
		want     int
		warn     bool
	}{
		{split, nil, "cpu", "avx512+pext", 1, false},
		{split, nil, "cpu", "avx2+pext", 0, false},
		{split, nil, "cpu", "avx512", 1, true}, // no pext: the same width
		{split, nil, "cpu", "avx2", 0, true},
		{split, nil, "cpu", "scalar", 0, true}, // the first
		{split, nil, "cpu/avx512+pext", "avx2+pext", 1, false},
		{split, nil, "cpu/avx512", "avx2+pext", 1, true}, // a labels row names its loops
		{split, nil, "cuda-gpu", "avx2+pext", 2, false},
		{split, nil, "opencl-gpu", "avx2+pext", -1, false},
		{heads("cpu", "cuda-gpu"), []string{"avx512+pext"}, "cpu", "avx512+pext", 0, false},
		{heads("cpu", "cuda-gpu"), []string{"avx512+pext"}, "cpu", "avx2+pext", 0, true},
		{heads("cpu", "cuda-gpu"), nil, "cpu", "avx2+pext", 0, false}, // not recorded
		{heads("cuda-gpu"), nil, "cpu", "avx2+pext", -1, false},
	} {
		h, w := (&Info{Heads: c.heads, CPUInnerLoops: c.cpuLoops}).HeadFor(c.class, c.loops)
		if h != c.want || (w != "") != c.warn {
			t.Errorf("heads %v, recorded %v: %s on %s: head %d, warning %q; want head %d, a warning: %v", headNames(c.heads), c.cpuLoops, c.class, c.loops, h, w, c.want, c.warn)
		}
		if w != "" && (!strings.Contains(w, "tune-model") || !strings.Contains(w, c.loops) && !strings.HasPrefix(c.class, "cpu/")) {
			t.Errorf("%s on %s: warning %q does not name this CPU's inner loops and tune-model", c.class, c.loops, w)
		}
	}
}
