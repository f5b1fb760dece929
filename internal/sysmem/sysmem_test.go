package sysmem

import (
	"math"
	"math/bits"
	"os"
	"runtime"
	"strings"
	"testing"
)

func TestSizeSaturates(t *testing.T) {
	tests := []struct {
		name string
		add  func(*Size)
		want uint64
	}{
		{"empty", func(*Size) {}, 0},
		{"matrix", func(s *Size) { s.AddMatrix(1000, 16, 4) }, 64000},
		{"two", func(s *Size) { s.AddMatrix(10, 16, 4); s.Add(3, 8) }, 664},
		{"negative adds nothing", func(s *Size) { s.Add(-5, 4); s.AddMatrix(3, -1, 4) }, 0},
		{"rows*cols past int", func(s *Size) { s.AddMatrix(math.MaxInt, 2, 4) }, math.MaxUint64},
		{"bytes past uint64", func(s *Size) { *s = math.MaxUint64 - 10; s.Add(5, 4) }, math.MaxUint64},
	}
	for _, tt := range tests {
		var s Size
		tt.add(&s)
		if uint64(s) != tt.want {
			t.Errorf("%s: %d, want %d", tt.name, uint64(s), tt.want)
		}
	}
}

func TestFits(t *testing.T) {
	var small Size
	small.AddMatrix(1024, 16, 4)
	if err := small.Fits(); err != nil {
		t.Errorf("64 KiB: %v", err)
	}
	var huge Size
	huge.AddMatrix(math.MaxInt, 16, 4)
	err := huge.Fits()
	if err == nil {
		t.Fatal("a matrix past the address space fits")
	}
	if !strings.Contains(err.Error(), "more than 16 EiB, more than a") {
		t.Errorf("error %q does not say what was needed", err)
	}
	if _, ok := Available(); ok && bits.UintSize == 64 {
		// Addressable (4 EiB), but past what any machine has.
		var big Size
		big.Add(math.MaxInt/2, 1)
		if big.Fits() == nil {
			t.Error("4 EiB fits")
		}
	}
}

func TestAvailableOnLinux(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("only Linux reports available memory")
	}
	if _, err := os.Stat("/proc/meminfo"); err != nil {
		t.Skip("no /proc/meminfo")
	}
	n, ok := Available()
	if !ok || n == 0 {
		t.Fatalf("Available() = %d, %v on Linux with /proc/meminfo", n, ok)
	}
}

func TestBytes(t *testing.T) {
	for _, tt := range []struct {
		n    uint64
		want string
	}{
		{0, "0 B"}, {1023, "1023 B"}, {1536, "1.50 KiB"}, {21 << 30, "21.0 GiB"},
		{128 << 30, "128 GiB"}, {math.MaxUint64, "more than 16 EiB"},
	} {
		if got := Bytes(tt.n); got != tt.want {
			t.Errorf("Bytes(%d) = %q, want %q", tt.n, got, tt.want)
		}
	}
}
