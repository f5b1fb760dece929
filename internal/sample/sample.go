// Package sample embeds the small tensor that sparsetune runs on when no
// file is given, so the README's first command works on a fresh machine.
//
// The tensor is synthetic and reproducible: Generate builds it from a fixed
// seed, and a test checks that the embedded file is exactly its output. It
// mimics a ratings tensor (user x item x month): power-law activity per
// user and popularity per item, a few active months per user, ratings 1 to 5.
package sample

import (
	"bytes"
	_ "embed"
	"math/rand/v2"

	"github.com/sparsetune/sparsetune/formats"
)

// Name is the name the embedded tensor goes by in messages.
const Name = "sample:ratings-400x300x24.tns"

//go:embed ratings.tns
var tns []byte

// Tensor parses and returns the embedded sample tensor.
func Tensor() (*formats.COO, error) {
	return formats.ReadTNS(bytes.NewReader(tns), Name)
}

// Generate builds the sample tensor from its fixed seed.
func Generate() *formats.COO {
	const users, items, months, ratings = 400, 300, 24, 12000
	rng := rand.New(rand.NewPCG(2026, 11))
	userZipf := rand.NewZipf(rng, 1.3, 4, users-1)
	itemZipf := rand.NewZipf(rng, 1.1, 2, items-1)
	// Users are active in a window of months that starts at a random month.
	start := make([]int, users)
	for u := range start {
		start[u] = rng.IntN(months)
	}
	t, err := formats.NewCOO([]int{users, items, months}, ratings)
	if err != nil {
		panic(err) // constant dims
	}
	// Shuffle user and item ids so popular ones are not all at low indices.
	userID, itemID := rng.Perm(users), rng.Perm(items)
	for range ratings {
		u := int(userZipf.Uint64())
		i := int(itemZipf.Uint64())
		m := (start[u] + rng.IntN(4)) % months
		r := 1 + rng.IntN(5)
		t.Append([]uint32{uint32(userID[u]), uint32(itemID[i]), uint32(m)}, float32(r))
	}
	// .tns infers dims from the largest index of each mode: make sure the
	// largest ones occur.
	t.Append([]uint32{users - 1, items - 1, months - 1}, 3)
	// A user rates an item once a month: keep the last rating, not the sum.
	t.Sort()
	out := 0
	for k := 1; k < t.NNZ(); k++ {
		same := true
		for m := range t.Inds {
			same = same && t.Inds[m][k] == t.Inds[m][out]
		}
		if !same {
			out++
		}
		for m := range t.Inds {
			t.Inds[m][out] = t.Inds[m][k]
		}
		t.Vals[out] = t.Vals[k]
	}
	for m := range t.Inds {
		t.Inds[m] = t.Inds[m][:out+1]
	}
	t.Vals = t.Vals[:out+1]
	return t
}
