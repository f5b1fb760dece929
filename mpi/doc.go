// Package mpi is sparsetune's message-passing layer: a communicator and
// the collectives a distributed decomposition and distributed labelling
// need, over Open MPI (MPICH should work too; it is not tested).
//
// It is built only with the mpi build tag, which links the MPI library
// through cgo (pkg-config package ompi: apt-get install libopenmpi-dev
// openmpi-bin):
//
//	go build -tags mpi -o sparsetune-mpi ./cmd/sparsetune
//	mpirun -np 4 ./sparsetune-mpi cpd FILE --rank 16
//
// The default build stays cgo-free: there Init returns ErrNotBuilt, whose
// message says how to build the MPI binary, and every collective returns
// it too. Launched tells, in either build, whether mpirun started the
// process.
//
// Collectives are generic over the element types a tensor code sends
// (float32, float64, uint32, uint64) and take Go slices. Calls from
// several goroutines are serialised (MPI_THREAD_SERIALIZED); errors come
// back as Go errors with MPI's message, never as an abort.
package mpi
