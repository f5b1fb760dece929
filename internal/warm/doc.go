// Package warm lends small buffers out of memory the process has already
// used and no longer needs.
//
// Why: the first touch of a page of fresh memory is a page fault, and on
// some hosts a costly one. On the 2-core Firecracker VMs this project is
// measured on, a 4 KiB page costs 14-20 µs the first time user code
// writes it, against about 25 ns the second (docs/model.md, "Where a
// fresh page's cost lies"). A format decision in a fresh process
// (sparsetune predict) needs a few dozen KiB of scratch: its sample's
// positions and indices, and the tables that count them. Taken fresh,
// those pages cost more than all the decision's arithmetic; taken from
// memory a reader has just parsed and let go of, they cost nothing.
//
// A reader that is done with a buffer it filled and read (formats' text
// reader, with its blocks of file text) hands it over with Give; code
// that needs a buffer (a decision's sample, counts, ranks and graph, the
// network's values) takes slices with Uint64s, Uint32s and Float32s,
// which are carved from the memory given, cleared, and fall back to fresh
// memory when none is left. Where no reader gives (a .stb file is read
// straight into the tensor's arrays), Fill writes a buffer ahead and
// gives it, on a goroutine that would otherwise wait: the page faults
// are paid there, not on the decision's time. Slices taken are never
// given back: each keeps the whole buffer it was cut from alive, as any
// slice does, so the pool keeps buffers of at most MaxGift bytes and
// lends from at most MaxLentGifts of them in a process's life.
//
// Only plain numbers may live in the memory lent: it is typed as bytes,
// so the collector does not look for pointers in it.
package warm
