//go:build (amd64 && !amd64.v3) || 386

package model

// exactRounding says whether this build rounds as the one that wrote the
// committed fixtures: amd64 below GOAMD64=v3 and 386, where the compiler
// never fuses a multiply and an add into one FMA with a single rounding.
// Elsewhere (arm64, ppc64le, s390x, riscv64, GOAMD64=v3 and up) it may,
// and a training's last bits differ (TestSanityFixture).
const exactRounding = true
