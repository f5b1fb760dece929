//go:build !mpi

package mpi

import "os"

// Built reports whether the binary links MPI.
const Built = false

// Comm is a communicator. In a build without the mpi tag none exists.
type Comm struct{ rank, size int }

// Init returns ErrNotBuilt: this build has no MPI.
func Init() (*Comm, error) { return nil, ErrNotBuilt }

// Finalize does nothing: this build has no MPI.
func Finalize() error { return nil }

func (c *Comm) Rank() int                           { return c.rank }
func (c *Comm) Size() int                           { return c.size }
func (c *Comm) Barrier() error                      { return ErrNotBuilt }
func (c *Comm) Abort(code int)                      { os.Exit(code) }
func (c *Comm) Split(color, key int) (*Comm, error) { return nil, ErrNotBuilt }

func Allreduce[T Number](c *Comm, send, recv []T, op Op) error { return ErrNotBuilt }
func ReduceScatter[T Number](c *Comm, send, recv []T, counts []int, op Op) error {
	return ErrNotBuilt
}
func Allgather[T Number](c *Comm, send, recv []T) error                { return ErrNotBuilt }
func Allgatherv[T Number](c *Comm, send, recv []T, counts []int) error { return ErrNotBuilt }
func Alltoallv[T Number](c *Comm, send []T, sendCounts []int, recv []T, recvCounts []int) error {
	return ErrNotBuilt
}
func Bcast[T Number](c *Comm, buf []T, root int) error { return ErrNotBuilt }
