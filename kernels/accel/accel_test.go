package accel

import (
	"strings"
	"testing"
)

func TestSource(t *testing.T) {
	for _, tc := range []struct {
		b    Backend
		want []string
	}{
		{OpenCL, []string{"#define KERNEL __kernel", "atomic_cmpxchg", "#define WG 128"}},
		{CUDA, []string{`#define KERNEL extern "C" __global__`, "atomicAdd", "#define WG 128"}},
	} {
		src, err := Source(tc.b, 128)
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range append(tc.want, "KERNEL void "+MTTKRPALTO+"(", "KERNEL void "+SpTTMCSR+"(") {
			if !strings.Contains(src, w) {
				t.Errorf("%v source lacks %q", tc.b, w)
			}
		}
	}
	// Every kernel name the backends look up is defined in the body.
	for _, name := range []string{FillZero, SpTTMCSR, SpTTMELL, SpTTMCOO, MTTKRPCOO, MTTKRPCSF, MTTKRPALTO} {
		if !strings.Contains(body, "KERNEL void "+name+"(") {
			t.Errorf("body lacks kernel %s", name)
		}
	}
	if _, err := Source(Backend(7), 64); err == nil {
		t.Error("unknown backend accepted")
	}
	if _, err := Source(OpenCL, 0); err == nil {
		t.Error("work-group size 0 accepted")
	}
}
