// Package hetero runs work on heterogeneous devices. It owns the Device
// interface, the CPU device, the accelerator backends (hetero/opencl and
// hetero/cuda, loaded at run time without cgo), device profiles (peak FMA
// rate, memory and host-to-device bandwidth, memory size), the task mapper
// that splits slices between CPU and accelerator by the peak-power formula,
// and the executor that runs both sides concurrently and gathers the result.
//
// Device profiles ([Profile], [DeviceProfile]) hold the numbers of the
// paper's split formula per device: peak multiply-add rate, memory and
// host-to-device bandwidth, and per operation λ (fraction of the peak
// reached) and μ (flops per byte), measured by [Calibrate], kept by
// [SaveProfile] and [LoadProfile] in the user config directory, found or
// measured on first use by [ProfileFor], and overridden from a config by
// [Profile.ApplyOverrides]. [MapSlices] splits slices by a [Strategy]
// (peak, dynamic, random, cpu, acc); the dynamic one hands out chunks from
// a [ChunkQueue] sized by [ChunkNNZ]. docs/hetero.md describes every
// number, how it is measured, the formula's derivation and the chunk rule.
//
// It is told which format each device uses; choosing formats is the job of
// package model.
package hetero
