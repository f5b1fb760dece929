package buildlog

import (
	"fmt"
	"strings"
	"testing"
)

func TestAppend(t *testing.T) {
	long := make([]string, Lines+10)
	for i := range long {
		long[i] = fmt.Sprintf("line %d\r", i)
	}
	for _, tc := range []struct {
		log, want string
	}{
		{"  \n", "; build log is empty"},
		{"a.cl:1: error\n\n", "; build log:\n\ta.cl:1: error"},
		{strings.Join(long, "\n"), "; build log:\n\tline 0\n\tline 1\n"},
	} {
		var b strings.Builder
		Append(&b, "build log", tc.log)
		if !strings.HasPrefix(b.String(), tc.want) {
			t.Errorf("%q: got %q, want prefix %q", tc.log, b.String(), tc.want)
		}
	}
	var b strings.Builder
	Append(&b, "log", strings.Join(long, "\n"))
	got := b.String()
	if strings.Count(got, "\n") != Lines+1 || !strings.HasSuffix(got, "\t... (10 more lines)") || strings.Contains(got, "\r") {
		t.Errorf("long log: %q", got)
	}
}
