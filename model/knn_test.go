package model

import (
	"slices"
	"testing"
)

// TestKNNTies checks that every tie has the documented answer, whatever
// the run: equal distances go to the earlier example, equal votes to the
// format whose voters are nearer, then to the format listed first.
func TestKNNTies(t *testing.T) {
	// One feature, examples placed symmetrically about the query at 0 so
	// that standardising them leaves equal distances exactly equal.
	type ex struct {
		at   float64
		best string
	}
	for _, tc := range []struct {
		name    string
		formats []string
		ex      []ex
		want    string
		zero    []string // formats with no vote
	}{
		{"nearer voters win a vote tie", []string{"coo", "csr", "ell"},
			[]ex{{1, "csr"}, {-1, "csr"}, {2, "coo"}, {-2, "coo"}, {3, "ell"}, {-3, "ell"}}, "csr", nil},
		{"equal votes and distances: first listed", []string{"coo", "csr", "ell"},
			[]ex{{1, "csr"}, {-1, "coo"}, {2, "csr"}, {-2, "coo"}, {3, "ell"}, {-3, "ell"}}, "coo", nil},
		{"equal votes and distances: first listed, other order", []string{"csr", "coo", "ell"},
			[]ex{{1, "csr"}, {-1, "coo"}, {2, "csr"}, {-2, "coo"}, {3, "ell"}, {-3, "ell"}}, "csr", nil},
		{"equal distances at the k-th: the earlier example", []string{"coo", "csr", "ell", "hyb"},
			[]ex{{1, "coo"}, {-1, "coo"}, {2, "csr"}, {-2, "csr"}, {3, "ell"}, {-3, "hyb"}}, "coo", []string{"hyb"}},
		{"equal distances at the k-th: the earlier example, swapped", []string{"coo", "csr", "ell", "hyb"},
			[]ex{{1, "coo"}, {-1, "coo"}, {2, "csr"}, {-2, "csr"}, {-3, "hyb"}, {3, "ell"}}, "coo", []string{"ell"}},
		{"majority beats nearness", []string{"coo", "csr"},
			[]ex{{0.5, "csr"}, {-0.5, "csr"}, {2, "coo"}, {-2, "coo"}, {3, "coo"}, {-3, "csr"}, {4, "csr"}, {-4, "csr"}}, "coo", nil},
	} {
		var examples []BaselineExample
		for _, e := range tc.ex {
			examples = append(examples, BaselineExample{Features: []float64{e.at}, Best: e.best})
		}
		c, err := fitKNN(tc.formats, examples)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		for range 20 {
			s, err := c.scores([]float64{0})
			if err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
			r := rank(tc.formats, s)
			if r[0].Format != tc.want {
				t.Fatalf("%s: ranked %+v, want %s first", tc.name, r, tc.want)
			}
			if r[0].Score <= 0 || r[0].Score > 1 || (len(r) > 1 && r[1].Score >= r[0].Score && r[0].Format != tc.formats[0]) {
				t.Fatalf("%s: scores %+v", tc.name, r)
			}
			for _, f := range tc.zero {
				if s[slices.Index(tc.formats, f)] != 0 {
					t.Fatalf("%s: %s has score %v, want no vote (scores %v)", tc.name, f, s[slices.Index(tc.formats, f)], s)
				}
			}
		}
	}
	if _, err := fitKNN([]string{"coo"}, []BaselineExample{{Features: []float64{1}, Best: "csr"}}); err == nil {
		t.Error("an example of a format not in the list was accepted")
	}
}
