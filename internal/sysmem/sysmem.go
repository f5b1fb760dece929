package sysmem

import (
	"errors"
	"fmt"
	"math/bits"
)

// ErrTooLarge is what the errors of Fits wrap: an allocation the machine
// cannot make, which a caller may skip (a benchmark's row) rather than
// end on.
var ErrTooLarge = errors.New("too large for this machine's memory")

// tooLarge is a Fits error: its text says how much, and it is ErrTooLarge.
type tooLarge struct{ msg string }

func (e *tooLarge) Error() string        { return e.msg }
func (e *tooLarge) Is(target error) bool { return target == ErrTooLarge }

// Available returns the bytes of memory the process can still allocate
// without the machine swapping or the kernel ending it, and whether that
// is known. Where it is not (other systems, an unreadable /proc), callers
// should only refuse sizes that cannot be addressed at all.
func Available() (uint64, bool) { return available() }

// Size adds up byte counts, saturating at the largest uint64 instead of
// wrapping, so that a product of dims that overflows still compares as
// too large.
type Size uint64

// Add adds n elements of elem bytes each; negative counts add nothing.
func (s *Size) Add(n, elem int) {
	if n <= 0 || elem <= 0 {
		return
	}
	hi, lo := bits.Mul64(uint64(n), uint64(elem))
	if hi != 0 {
		*s = Size(^uint64(0))
		return
	}
	sum, carry := bits.Add64(uint64(*s), lo, 0)
	if carry != 0 {
		sum = ^uint64(0)
	}
	*s = Size(sum)
}

// AddMatrix adds a rows x cols matrix of elem-byte elements.
func (s *Size) AddMatrix(rows, cols, elem int) {
	if rows <= 0 || cols <= 0 || elem <= 0 {
		return
	}
	hi, lo := bits.Mul64(uint64(rows), uint64(cols))
	if hi != 0 || lo > uint64(maxInt) {
		*s = Size(^uint64(0))
		return
	}
	s.Add(int(lo), elem)
}

const maxInt = int(^uint(0) >> 1)

// Fits returns nil when s bytes can be allocated: they are addressable by
// an int (a Go slice's limit on this platform) and, where the available
// memory is known, no more than it. Otherwise the error says how much was
// needed and how much there is, in binary units ("256 GiB, more than the
// 22.9 GiB of memory available"), for the caller to say what needs it;
// it is ErrTooLarge (errors.Is).
func (s Size) Fits() error {
	if uint64(s) > uint64(maxInt) {
		return &tooLarge{fmt.Sprintf("%s, more than a %d-bit process can address", Bytes(uint64(s)), bits.UintSize)}
	}
	if avail, ok := Available(); ok && uint64(s) > avail {
		return &tooLarge{fmt.Sprintf("%s, more than the %s of memory available", Bytes(uint64(s)), Bytes(avail))}
	}
	return nil
}

// Bytes formats n bytes in binary units with three significant digits:
// "512 B", "1.50 KiB", "21.3 GiB".
func Bytes(n uint64) string {
	if n == ^uint64(0) {
		return "more than 16 EiB"
	}
	const units = "KMGTPE"
	if n < 1024 {
		return fmt.Sprintf("%d B", n)
	}
	v, u := float64(n)/1024, 0
	for v >= 1024 && u < len(units)-1 {
		v /= 1024
		u++
	}
	switch {
	case v < 10:
		return fmt.Sprintf("%.2f %ciB", v, units[u])
	case v < 100:
		return fmt.Sprintf("%.1f %ciB", v, units[u])
	}
	return fmt.Sprintf("%.0f %ciB", v, units[u])
}
