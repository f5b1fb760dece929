// Package radix sorts unsigned integer keys of a known bit width: a
// least-significant-digit radix sort for the few-thousand to
// hundred-thousand keys of a tensor's sample, where it runs in a few
// sequential passes and a comparison sort or a hash table would spend
// its time on branches and cache misses.
package radix

// Sort sorts keys, whose values fit in width bits, using tmp (of the
// same length) as scratch, and returns the sorted slice: keys or tmp. It
// is a least-significant-digit radix sort in as few passes of at most
// 11-bit digits as the width needs (a 2,048-entry histogram still sits in
// L1), skipping the digits on which every key agrees. There may be at
// most 2^32-1 keys.
//
// The histogram is 32-bit: at 8 KiB it keeps the frame within what a
// goroutine's stack usually has room for. A 16 KiB one made the first
// sort in a one-shot process grow the stack onto fresh pages, which cost
// more than the sort (about 35 µs on the 2-core VM).
func Sort(keys, tmp []uint64, width int) []uint64 {
	n := len(keys)
	if n == 0 || width <= 0 {
		return keys
	}
	if uint64(n) >= 1<<32 {
		panic("radix: 2^32 keys or more")
	}
	passes := (width + 10) / 11
	digit := (width + passes - 1) / passes
	mask := uint64(1)<<digit - 1
	var count [1 << 11]uint32
	for shift := 0; shift < width; shift += digit {
		clear(count[:mask+1])
		for _, k := range keys {
			count[k>>shift&mask]++
		}
		if int(count[keys[0]>>shift&mask]) == n {
			continue // every key has this digit
		}
		at := uint32(0)
		for d, c := range count[:mask+1] {
			count[d] = at
			at += c
		}
		for _, k := range keys {
			d := k >> shift & mask
			tmp[count[d]] = k
			count[d]++
		}
		keys, tmp = tmp, keys
	}
	return keys
}
