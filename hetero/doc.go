// Package hetero runs work on heterogeneous devices. It owns the Device
// interface, the CPU device, the accelerator backends (hetero/opencl and
// hetero/cuda, loaded at run time without cgo), device profiles (peak FMA
// rate, memory and host-to-device bandwidth, memory size), the task mapper
// that splits slices between CPU and accelerator by the peak-power formula,
// and the executor that runs both sides concurrently and gathers the result.
//
// It is told which format each device uses; choosing formats is the job of
// package model.
package hetero
