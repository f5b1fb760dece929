package warm

import (
	"os"
	"sync"
	"testing"
	"unsafe"
)

// within reports whether the n bytes at p lie inside b.
func within(p unsafe.Pointer, n int, b []byte) bool {
	lo := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	at := uintptr(p)
	return at >= lo && at+uintptr(n) <= lo+uintptr(len(b))
}

func gift(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = 0xff // what a reader leaves: anything but zeros
	}
	return b
}

func TestTakeFromGift(t *testing.T) {
	Reset()
	defer Reset()
	b := gift(MinGift)
	Give(b)
	if got := Free(); got != len(b) {
		t.Fatalf("Free after a gift of %d bytes: %d", len(b), got)
	}
	u32 := Uint32s(3) // leaves the next one unaligned but for the pool's care
	u64 := Uint64s(100)
	f32 := Float32s(7)
	for _, c := range []struct {
		name  string
		p     unsafe.Pointer
		bytes int
		zero  bool
	}{
		{"Uint32s", unsafe.Pointer(&u32[0]), 4 * len(u32), u32[0] == 0 && u32[2] == 0},
		{"Uint64s", unsafe.Pointer(&u64[0]), 8 * len(u64), u64[0] == 0 && u64[99] == 0},
		{"Float32s", unsafe.Pointer(&f32[0]), 4 * len(f32), f32[0] == 0 && f32[6] == 0},
	} {
		if !within(c.p, c.bytes, b) {
			t.Errorf("%s: not cut from the gift", c.name)
		}
		if uintptr(c.p)%8 != 0 {
			t.Errorf("%s: at %#x, not aligned to 8", c.name, uintptr(c.p))
		}
		if !c.zero {
			t.Errorf("%s: not cleared", c.name)
		}
	}
	if len(u32) != 3 || cap(u32) != 3 || len(u64) != 100 || cap(u64) != 100 || len(f32) != 7 || cap(f32) != 7 {
		t.Errorf("lengths and capacities: %d/%d, %d/%d, %d/%d", len(u32), cap(u32), len(u64), cap(u64), len(f32), cap(f32))
	}
	// Writing each to the full does not reach the others.
	for i := range u64 {
		u64[i] = ^uint64(0)
	}
	if u32[2] != 0 || f32[0] != 0 {
		t.Error("writing one slice changed another")
	}
	if used := len(b) - Free(); used < 12+800+28 || used > 12+800+28+16 {
		t.Errorf("the pool lent %d bytes for 840 asked", used)
	}
}

func TestGiveKeepsOnlyFittingGifts(t *testing.T) {
	for _, c := range []struct {
		name string
		held int // the pool's free bytes before the gift
		b    []byte
		kept bool
	}{
		{"smaller than MinGift", 0, gift(MinGift - 1), false},
		{"MinGift", 0, gift(MinGift), true},
		{"MaxGift", 0, gift(MaxGift), true},
		{"part of a larger allocation", 0, gift(MaxGift + 1)[:MinGift], false},
		{"larger than MaxGift", 0, gift(MaxGift + 1), false},
		{"no larger than what is left", 2 * MinGift, gift(2 * MinGift), false},
		{"larger than what is left", MinGift, gift(2 * MinGift), true},
	} {
		t.Run(c.name, func(t *testing.T) {
			Reset()
			defer Reset()
			if c.held > 0 {
				Give(gift(c.held))
			}
			Give(c.b)
			want := c.held
			if c.kept {
				want = len(c.b)
			}
			if got := Free(); got != want {
				t.Errorf("Free = %d, want %d", got, want)
			}
		})
	}
}

func TestFreshWhenSpent(t *testing.T) {
	Reset()
	defer Reset()
	b := gift(MinGift)
	Give(b)
	big := Uint64s(MinGift/8 + 1)
	if len(big) != MinGift/8+1 || within(unsafe.Pointer(&big[0]), 8, b) {
		t.Error("a slice larger than the pool was cut from it")
	}
	if Free() != MinGift {
		t.Errorf("a refused take changed the pool: %d bytes free", Free())
	}
	all := Uint32s(MinGift / 4)
	if !within(unsafe.Pointer(&all[0]), MinGift, b) {
		t.Error("a slice of the whole pool was not cut from it")
	}
	if Free() != 0 {
		t.Errorf("%d bytes free after taking all", Free())
	}
	if s := Uint64s(1); len(s) != 1 || s[0] != 0 || within(unsafe.Pointer(&s[0]), 8, b) {
		t.Error("an empty pool did not fall back to fresh memory")
	}
	if s := Uint64s(0); len(s) != 0 {
		t.Errorf("Uint64s(0) has %d elements", len(s))
	}
}

// TestConcurrentTakes checks that slices taken at once from several
// goroutines never overlap: each writes its own mark to all of its
// slices, then finds every mark intact.
func TestConcurrentTakes(t *testing.T) {
	Reset()
	defer Reset()
	Give(gift(MaxGift))
	const workers, takes = 8, 200
	var wg sync.WaitGroup
	bad := make([]int, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var got [][]uint32
			for k := range takes {
				s := Uint32s(1 + (k*7+w)%61)
				for i := range s {
					s[i] = uint32(w + 1)
				}
				got = append(got, s)
			}
			for _, s := range got {
				for _, v := range s {
					if v != uint32(w+1) {
						bad[w]++
					}
				}
			}
		}()
	}
	wg.Wait()
	for w, n := range bad {
		if n > 0 {
			t.Errorf("worker %d: %d elements overwritten by another", w, n)
		}
	}
}

// TestLentGiftsBounded checks that Give refuses gifts once slices were
// cut from MaxLentGifts of them, and that gifts nothing was cut from do
// not count.
func TestLentGiftsBounded(t *testing.T) {
	Reset()
	defer Reset()
	for range 3 {
		Give(gift(MinGift)) // replaced before anything is cut from it
	}
	Give(gift(2 * MinGift))
	for i := range MaxLentGifts {
		Give(gift(MaxGift))
		if Free() != MaxGift {
			t.Fatalf("gift %d refused after %d were lent from", i+1, i)
		}
		Uint64s(1)
	}
	Give(gift(MaxGift))
	if Free() == MaxGift {
		t.Fatalf("a gift kept after %d were lent from", MaxLentGifts)
	}
	if Free() != MaxGift-8 {
		t.Errorf("the last gift's rest: %d bytes, want %d", Free(), MaxGift-8)
	}
}

func TestFill(t *testing.T) {
	for _, c := range []struct {
		name  string
		given int // a gift before Fill, 0 for none
		n     int // asked of Fill
		want  int // Free after Fill
	}{
		{"empty pool", 0, 4 * MinGift, 4 * MinGift},
		{"below MinGift", 0, MinGift - 1, 0},
		{"capped at MaxGift", 0, 2 * MaxGift, MaxGift},
		{"pool already holds enough", 4 * MinGift, 2 * MinGift, 4 * MinGift},
		{"pool holds too little", MinGift, 4 * MinGift, 4 * MinGift},
	} {
		t.Run(c.name, func(t *testing.T) {
			Reset()
			defer Reset()
			if c.given > 0 {
				Give(gift(c.given))
			}
			Fill(c.n, func() bool { return false })
			if got := Free(); got != c.want {
				t.Errorf("Free after Fill(%d): %d, want %d", c.n, got, c.want)
			}
		})
	}
}

// TestFillStopped checks that a Fill told to stop after its first pages
// gives those, when they make a gift, and asks no more.
func TestFillStopped(t *testing.T) {
	Reset()
	defer Reset()
	n := 4 * MinGift
	first := min(fillStride*os.Getpagesize(), n)
	asked := 0
	Fill(n, func() bool { asked++; return true })
	want, wantAsked := first, 1
	if first == n {
		wantAsked = 0 // done before the first ask
	}
	if first < MinGift {
		want = 0
	}
	if got := Free(); got != want || asked != wantAsked {
		t.Fatalf("Fill(%d) stopped at once: Free %d, asked %d; want %d, %d", n, got, asked, want, wantAsked)
	}
}

func TestFillNilStop(t *testing.T) {
	Reset()
	defer Reset()
	Fill(MinGift, nil)
	if got := Free(); got != MinGift {
		t.Fatalf("Free after Fill(MinGift, nil): %d", got)
	}
	if got := Uint32s(MinGift / 4); len(got) != MinGift/4 || got[len(got)-1] != 0 {
		t.Fatalf("lent %d words from the filled pool, last %d", len(got), got[len(got)-1])
	}
	if Free() != 0 {
		t.Fatalf("pool not spent by a take of all it held: %d left", Free())
	}
}
