// Package heterotest gives the tests of the packages that split work
// between devices (engine, decomp) an accelerator that runs anywhere and
// made-up device profiles, in the manner of net/http/httptest.
package heterotest
