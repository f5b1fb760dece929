//go:build !((amd64 && !amd64.v3) || 386)

package model

// exactRounding: see rounding_exact_test.go. This build may fuse
// multiply-adds, so a training's last bits may differ from the fixtures'.
const exactRounding = false
