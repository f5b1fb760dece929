package par

import (
	"runtime"
	"sync/atomic"
	"testing"
	"time"
)

func TestRange(t *testing.T) {
	for _, c := range []struct{ n, parts, calls int }{
		{0, 4, 0}, {1, 4, 1}, {3, 8, 3}, {10, 1, 1}, {10, 0, 1}, {1000, 7, 7},
	} {
		seen := make([]int32, c.n)
		var calls atomic.Int32
		prevHi := make([]int, max(c.parts, 1))
		Range(c.n, c.parts, func(part, lo, hi int) {
			calls.Add(1)
			if lo > hi {
				t.Errorf("n=%d parts=%d: part %d is [%d,%d)", c.n, c.parts, part, lo, hi)
			}
			prevHi[part] = hi
			for i := lo; i < hi; i++ {
				atomic.AddInt32(&seen[i], 1)
			}
		})
		if int(calls.Load()) != c.calls {
			t.Errorf("n=%d parts=%d: %d calls, want %d", c.n, c.parts, calls.Load(), c.calls)
		}
		for i, s := range seen {
			if s != 1 {
				t.Errorf("n=%d parts=%d: index %d covered %d times", c.n, c.parts, i, s)
			}
		}
	}
}

func TestMaxUint32(t *testing.T) {
	for _, n := range []int{0, 1, 3, 4, 5, 1000, 3*maxGrain + 7} {
		for _, at := range []int{0, n / 2, n - 1} {
			if at < 0 || at >= max(n, 1) {
				continue
			}
			a := make([]uint32, n)
			for i := range a {
				a[i] = uint32(i % 977)
			}
			want := uint32(0)
			if n > 0 {
				a[at] = 1 << 31
				want = 1 << 31
			}
			if got := MaxUint32(a); got != want {
				t.Errorf("n=%d, the largest at %d: got %d, want %d", n, at, got, want)
			}
		}
	}
}

// TestMaxMasked: the largest under a mask, whichever chunk holds it.
func TestMaxMasked(t *testing.T) {
	const mask = 0x7f800000
	for _, n := range []int{0, 5, 3*maxGrain + 7} {
		a := make([]uint32, n)
		for i := range a {
			a[i] = uint32(i) | 0x80000000 // bits the mask drops
		}
		if n > 0 {
			a[n-1] |= mask
		}
		want := uint32(0)
		if n > 0 {
			want = mask
		}
		if got := MaxMasked(a, mask); got != want {
			t.Errorf("n=%d: got %#x, want %#x", n, got, want)
		}
	}
}

// Each calls f once for every index, whatever the Helper's state: polling,
// never started (nil), stopped, or past its spin; and the Helper takes
// some of the calls while it polls.
func TestHelperEach(t *testing.T) {
	polling := StartHelper(1, time.Minute, nil)
	defer polling.Stop()
	stopped := StartHelper(1, time.Minute, nil)
	stopped.Stop()
	expired := StartHelper(1, time.Nanosecond, nil)
	time.Sleep(time.Millisecond)
	for _, c := range []struct {
		name string
		h    *Helper
	}{{"polling", polling}, {"nil", nil}, {"stopped", stopped}, {"expired", expired}} {
		for _, n := range []int{0, 1, 2, 7, 1000} {
			calls := make([]atomic.Int32, n)
			c.h.Each(n, func(i int) { calls[i].Add(1) })
			for i := range calls {
				if got := calls[i].Load(); got != 1 {
					t.Fatalf("%s, n=%d: f(%d) called %d times", c.name, n, i, got)
				}
			}
		}
	}
	if polling == nil {
		t.Skip("GOMAXPROCS is 1: no Helper")
	}
	takeAtOnce(t, polling, 2)
}

// takeAtOnce checks that n goroutines, the caller of h.Each and n-1 of
// h's, take n calls at once: each call waits until n have been taken.
func takeAtOnce(t *testing.T, h *Helper, n int32) {
	t.Helper()
	var entered atomic.Int32
	done := make(chan struct{})
	go func() {
		h.Each(int(n), func(int) {
			entered.Add(1)
			for entered.Load() < n {
				runtime.Gosched()
			}
		})
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatalf("%d of %d calls taken at once in 10 s", entered.Load(), n)
	}
}

// A Helper of several goroutines has them all take calls at once, and
// has no more of them than the processors less one.
func TestHelperGoroutines(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4))
	if h := StartHelper(1, time.Minute, nil); h == nil {
		t.Fatal("no Helper with 4 processors")
	} else {
		h.Stop()
	}
	h := StartHelper(8, time.Minute, nil) // 3 goroutines
	defer h.Stop()
	takeAtOnce(t, h, 4)
	runtime.GOMAXPROCS(1)
	if h := StartHelper(4, time.Minute, nil); h != nil {
		t.Error("a Helper with one processor")
	}
}

// TestOnce: of many goroutines asking at once, one runs the function,
// and none returns before it has (each sees its result); a panicking
// function counts as run.
func TestOnce(t *testing.T) {
	for range 50 {
		var o Once
		var runs, result atomic.Int32
		start := make(chan struct{})
		done := make(chan int32)
		for range 8 {
			go func() {
				<-start
				o.Do(func() {
					runs.Add(1)
					time.Sleep(100 * time.Microsecond)
					result.Store(42)
				})
				done <- result.Load()
			}()
		}
		close(start)
		for range 8 {
			if got := <-done; got != 42 {
				t.Fatalf("Do returned before the function had: saw %d", got)
			}
		}
		if n := runs.Load(); n != 1 {
			t.Fatalf("the function ran %d times", n)
		}
	}
	var o Once
	func() {
		defer func() { _ = recover() }()
		o.Do(func() { panic("boom") })
	}()
	ran := false
	o.Do(func() { ran = true })
	if ran {
		t.Error("Do ran the function again after it panicked")
	}
}

// A Helper's goroutines run warm once each before they take calls, and
// Each does not wait for them to finish it.
func TestHelperWarm(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4))
	var warmed atomic.Int32
	release := make(chan struct{})
	var sawBusy atomic.Bool
	h := StartHelper(8, time.Minute, func(busy func() bool) { // 3 goroutines
		warmed.Add(1)
		<-release
		if busy() {
			sawBusy.Store(true)
		}
	})
	defer h.Stop()
	// Every call goes to the caller while the goroutines warm.
	for warmed.Load() < 3 {
		runtime.Gosched()
	}
	calls := make([]atomic.Int32, 100)
	h.Each(len(calls), func(i int) { calls[i].Add(1) })
	for i := range calls {
		if got := calls[i].Load(); got != 1 {
			t.Fatalf("while warming: f(%d) called %d times", i, got)
		}
	}
	// busy reports calls handed out: the goroutines still warming see
	// them once released.
	started, done := make(chan struct{}), make(chan struct{})
	go func() {
		h.Each(3, func(i int) {
			if i == 0 {
				close(started)
			}
			for !sawBusy.Load() {
				runtime.Gosched()
			}
		})
		close(done)
	}()
	<-started
	close(release)
	<-done
	takeAtOnce(t, h, 4)
	if got := warmed.Load(); got != 3 {
		t.Errorf("warm called %d times by 3 goroutines", got)
	}
}
