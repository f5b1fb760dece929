// Package engine is the library's front door: it runs SpTTM and MTTKRP on
// a tensor the way the paper's Algorithm 1 does, input-aware and on every
// device at once.
//
// One call ([Engine.TTM] or [Engine.MTTKRP]):
//
//  1. counts the nonzeros of each slice (SpTTM: the slices of the mode-n
//     fiber matrix, cut by [formats.DefaultSliceMode]; MTTKRP: the slices
//     of the output mode, so each device owns whole rows of the result);
//  2. splits the slices between the CPU and the accelerator with
//     [hetero.MapSlices] and the devices' calibrated profiles
//     ([hetero.ProfileFor]), by a [hetero.Strategy]: peak, dynamic (the
//     devices pull chunks from a [hetero.ChunkQueue] as they run), random,
//     cpu or acc;
//  3. picks the storage format of each device: the one [Options] forces,
//     else a decision cached for this tensor by measurement
//     ([model.Decisions]), else a prediction ([model.SummaryPredictor],
//     the hand rule [model.RulePredictor] unless told otherwise) from one
//     [features.Summarize] of the tensor;
//  4. converts each device's slices to its format, runs both sides
//     concurrently (one goroutine drives the accelerator, the CPU kernels
//     use their own threads) and gathers the rows into one result.
//
// A caller running the same op, mode and rank many times with new dense
// operands (a decomposition) keeps a [Plan] ([Engine.PlanTTM],
// [Engine.PlanMTTKRP]): steps 1 to 4 up to the binding happen once, and
// each [Plan.Run] only sends the operands, runs and gathers. TTM and
// MTTKRP are a plan run once.
//
// An accelerator that fails, or cannot run its format, has its slices
// redone on the CPU: the result is still exact and [Result.Warnings] says
// what happened. With only a CPU device everything runs on the CPU.
// Cancelling the context stops the run between chunks.
//
// The package owns no kernels, formats or model math: it only joins
// packages formats, hetero and model. docs/engine.md describes the
// pipeline, the result and the commands built on it.
package engine
