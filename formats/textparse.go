package formats

import (
	"math"
	"strconv"
)

// Field scanners shared by the .tns and .mtx readers. They work on a line's
// bytes without allocating; the caller turns a non-empty message into a
// ParseError with the file and line.

// spaces has bit c set for each byte c that separates fields: ' ', '\t',
// '\v', '\f' and '\r'.
const spaces uint64 = 1<<' ' | 1<<'\t' | 1<<'\v' | 1<<'\f' | 1<<'\r'

// isSpace reports whether c separates fields. One comparison settles
// every byte above ' ', as digits are: the scanners call it on every byte
// of a file.
func isSpace(c byte) bool { return c <= ' ' && spaces>>c&1 != 0 }

// nextField returns the next whitespace-delimited field of line at or after
// pos and the position after it; the field is empty at the end of the line.
// A '#' starts a comment that runs to the end of the line.
func nextField(line []byte, pos int) (field []byte, next int) {
	for pos < len(line) && isSpace(line[pos]) {
		pos++
	}
	start := pos
	if pos < len(line) && line[pos] == '#' {
		return nil, len(line)
	}
	for pos < len(line) && !isSpace(line[pos]) {
		pos++
	}
	return line[start:pos], pos
}

// countFields returns the number of fields of line before any comment.
func countFields(line []byte) int {
	n := 0
	for f, pos := nextField(line, 0); len(f) > 0; f, pos = nextField(line, pos) {
		n++
	}
	return n
}

// parseIndex parses a 1-based index field and returns it 0-based. The
// message is empty on success.
func parseIndex(f []byte) (uint32, string) {
	if len(f) == 0 {
		return 0, "expected an index, found the end of the line"
	}
	var v uint64
	for _, c := range f {
		if c < '0' || c > '9' {
			if f[0] == '-' {
				return 0, "expected a positive 1-based index, found " + quoteField(f)
			}
			return 0, "expected an integer index, found " + quoteField(f)
		}
		v = v*10 + uint64(c-'0')
		if v > MaxDim {
			return 0, "expected an index of at most " + strconv.Itoa(MaxDim) + ", found " + quoteField(f)
		}
	}
	if v == 0 {
		return 0, "expected a 1-based index (>= 1), found 0"
	}
	return uint32(v - 1), ""
}

// scanIndex reads the common index field of line at or after pos in one
// pass, where nextField and parseIndex take two: separators, then at most
// ten digits making an index from 1 to limit, then a separator or the end.
// It returns the index 0-based and the position after it, or false for
// anything else (a sign, a comment, more digits, an index out of range),
// which the two-pass path words as an error or, for leading zeros past
// ten digits, accepts.
func scanIndex(line []byte, pos int, limit uint64) (uint32, int, bool) {
	for pos < len(line) && isSpace(line[pos]) {
		pos++
	}
	start, v := pos, uint64(0)
	for ; pos < len(line) && pos-start <= 10; pos++ {
		d := line[pos] - '0'
		if d > 9 {
			break
		}
		v = v*10 + uint64(d)
	}
	if pos == start || pos-start > 10 || pos < len(line) && !isSpace(line[pos]) || v < 1 || v > limit {
		return 0, 0, false
	}
	return uint32(v - 1), pos, true
}

// pow10 holds the powers of ten that float64 represents exactly.
var pow10 = [...]float64{1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10,
	1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22}

// parseValue parses a finite float32 value field. The message is empty on
// success.
//
// The fast path handles plain decimals whose significant digits fit in 53
// bits and whose decimal exponent is at most 22 in magnitude: the float64
// result of one exact multiplication or division is correctly rounded, and
// rounding that float64 to float32 is then correct too, because double
// rounding is innocuous when the wider format has at least 2p+2 bits
// (53 >= 2*24+2). Anything else goes through strconv.
func parseValue(f []byte) (float32, string) {
	if len(f) == 0 {
		return 0, "expected a value, found the end of the line"
	}
	i, neg := 0, false
	if f[0] == '-' || f[0] == '+' {
		neg = f[0] == '-'
		i++
	}
	var mant uint64
	digits, exp, sawDigit := 0, 0, false
	for ; i < len(f) && f[i] >= '0' && f[i] <= '9'; i++ {
		sawDigit = true
		if mant == 0 && f[i] == '0' {
			continue
		}
		mant = mant*10 + uint64(f[i]-'0')
		digits++
	}
	if i < len(f) && f[i] == '.' {
		for i++; i < len(f) && f[i] >= '0' && f[i] <= '9'; i++ {
			sawDigit = true
			if mant == 0 && f[i] == '0' {
				exp--
				continue
			}
			mant = mant*10 + uint64(f[i]-'0')
			digits++
			exp--
		}
	}
	if sawDigit && i < len(f) && (f[i] == 'e' || f[i] == 'E') {
		j, eneg, e := i+1, false, 0
		if j < len(f) && (f[j] == '-' || f[j] == '+') {
			eneg = f[j] == '-'
			j++
		}
		start := j
		for ; j < len(f) && f[j] >= '0' && f[j] <= '9' && e < 10000; j++ {
			e = e*10 + int(f[j]-'0')
		}
		if j > start {
			if eneg {
				e = -e
			}
			exp += e
			i = j
		}
	}
	if sawDigit && i == len(f) && digits <= 15 && exp >= -22 && exp <= 22 {
		v := float64(mant)
		if exp < 0 {
			v /= pow10[-exp]
		} else {
			v *= pow10[exp]
		}
		if neg {
			v = -v
		}
		if !onFloat32Midpoint(v) {
			return finite32(f, v)
		}
	}
	// strconv rounds the decimal straight to float32, once.
	v, err := strconv.ParseFloat(string(f), 32)
	if err != nil {
		if ne, ok := err.(*strconv.NumError); ok && ne.Err == strconv.ErrRange {
			return 0, "expected a finite float32 value, found " + quoteField(f) + " (out of range)"
		}
		return 0, "expected a numeric value, found " + quoteField(f)
	}
	if v == 0 && nonzeroMantissa(f) {
		// strconv gives 0 and no error for a value below float32's
		// smallest: the nonzero would be read as a zero, silently.
		return 0, "expected a float32 value, found " + quoteField(f) + " (below float32's smallest, 1.4e-45: it would read as 0)"
	}
	return finite32(f, v)
}

// nonzeroMantissa reports whether the number f, which strconv parsed,
// has a nonzero digit before its exponent: whether it names a nonzero
// value, whatever float32 makes of it.
func nonzeroMantissa(f []byte) bool {
	if len(f) > 0 && (f[0] == '+' || f[0] == '-') {
		f = f[1:]
	}
	hex := len(f) > 1 && f[0] == '0' && (f[1] == 'x' || f[1] == 'X')
	if hex {
		f = f[2:]
	}
	for _, c := range f {
		switch {
		case !hex && (c == 'e' || c == 'E'), hex && (c == 'p' || c == 'P'):
			return false
		case c >= '1' && c <= '9', hex && (c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'):
			return true
		}
	}
	return false
}

// onFloat32Midpoint reports whether v lies exactly halfway between two
// adjacent float32 values. The float64 nearest a decimal is on the same
// side of every float32 midpoint as the decimal itself unless it is the
// midpoint: only then can rounding it to float32 differ from rounding the
// decimal, and the caller must parse the decimal again, directly to float32.
func onFloat32Midpoint(v float64) bool {
	v32 := float32(v)
	if float64(v32) == v || math.IsInf(float64(v32), 0) {
		return false
	}
	// The neighbour of v32 on v's side; their mean is exact in float64.
	other := math.Nextafter32(v32, float32(math.Copysign(math.Inf(1), v-float64(v32))))
	return v == (float64(v32)+float64(other))/2
}

// maxQuoted is how many bytes of a field an error message quotes.
const maxQuoted = 40

// quoteField quotes f for an error message, cut to its first bytes when it
// is long (a corrupted file may hold megabytes without a separator), so the
// message stays one short line.
func quoteField(f []byte) string {
	if len(f) <= maxQuoted {
		return strconv.Quote(string(f))
	}
	return strconv.Quote(string(f[:maxQuoted])) + "... (" + strconv.Itoa(len(f)) + " bytes)"
}

func finite32(f []byte, v float64) (float32, string) {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, "expected a finite value, found " + quoteField(f)
	}
	// The conversion rounds to nearest, so only values that round beyond
	// MaxFloat32 (not every float64 above it) become infinite.
	v32 := float32(v)
	if math.IsInf(float64(v32), 0) {
		return 0, "expected a finite float32 value, found " + quoteField(f) + " (beyond float32 range)"
	}
	return v32, ""
}
