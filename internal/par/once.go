package par

import (
	"runtime"
	"sync/atomic"
)

// Once runs a function once, as sync.Once does, for work of microseconds
// that goroutines on several cores may ask for at the same moment: the
// counts and ranks a summary shares between the modes decided side by
// side (Helper). A caller that finds the function running waits actively,
// yielding its processor between looks, where sync.Once parks it on a
// mutex: on a VM whose idle vCPU is woken through the hypervisor, a
// parked goroutine resumed 85-150 µs later, longer than the function it
// waited for (a mode of predict --mode all waited 89-149 µs for a fiber
// count of a few µs that the other mode's decision had started).
//
// The zero Once is ready to use. A Once must not be copied after first
// use.
type Once struct {
	state atomic.Uint32 // onceIdle, onceRunning or onceDone
	_     noCopy
}

const (
	onceIdle uint32 = iota
	onceRunning
	onceDone
)

// Do calls f if and only if Do is being called for the first time on o,
// and returns once f has returned, whoever called it. As with sync.Once,
// if f panics Do considers it returned, and f must not call Do on o.
func (o *Once) Do(f func()) {
	if o.state.Load() == onceDone {
		return
	}
	if o.state.CompareAndSwap(onceIdle, onceRunning) {
		defer o.state.Store(onceDone)
		f()
		return
	}
	for o.state.Load() != onceDone {
		runtime.Gosched()
	}
}

// noCopy makes go vet's copylocks check report a copied Once.
type noCopy struct{}

func (*noCopy) Lock()   {}
func (*noCopy) Unlock() {}
