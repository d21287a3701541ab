/*===- steps.h - libqopt_runtime's steps --------------------------*- C -*-===*\
 *
 * The step calls of the C interface (runtime.h, which includes this file
 * and states the conventions): the tensor list, one launch, several
 * launches on one stream, and the two calls of a step with whole-step
 * reductions for callers that all-reduce between them (docs/abi.md,
 * "Whole-step reductions").
 *
\*===----------------------------------------------------------------------===*/

#ifndef QOPT_STEPS_H
#define QOPT_STEPS_H

#include "qopt/runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

/*===------------------------------------------------------------------===*
 * Steps
 *===------------------------------------------------------------------===*/

/// The tensors of one step, as flat arrays (easy to build from ctypes).
typedef struct qopt_tensor_list {
  size_t num_tensors;
  /// Streams per tensor as the caller built `data`; must equal the kernel's
  /// num_streams (a mismatch is a "wrong count" validation error).
  size_t num_streams;
  /// [num_tensors] elements of each tensor (>= 0; may exceed 2^31).
  const int64_t *numels;
  /// [num_tensors * num_streams] buffer pointers, tensor-major, each stream
  /// in ABI order; a null pointer is allowed only for a stream of 0 bytes.
  void *const *data;
  /// Optional [num_tensors * num_streams]: the bytes the caller holds at each
  /// pointer (e.g. tensor.nbytes); checked >= the bytes the kernel touches.
  const uint64_t *bytes;
  /// Optional [num_tensors * num_streams]: the dtype (qopt_dtype values) the
  /// caller holds at each pointer; checked equal to the stream's dtype.
  const int32_t *dtypes;
  /// Optional [num_tensors]: names used in messages ("tensor 3" otherwise).
  const char *const *names;
} qopt_tensor_list;

/// Checks a step's arguments without launching: stream count, numel >= 0,
/// null pointers, 16-byte alignment, dtypes and byte sizes (when given),
/// overlapping buffers (any overlap that touches a written stream), the
/// table count; CUDA also checks with cuPointerGetAttributes that every
/// pointer is device (or managed) memory of the context's device and that
/// the buffer lies inside its allocation. Errors: QOPT_ERROR_VALIDATION with
/// the tensor's name, the stream's name and the problem.
///
/// Each fact is checked once: a list equal to the last list this kernel
/// accepted (numels, pointers, bytes, dtypes, tables, device uniforms) is
/// accepted without a second look, and the driver's answer for a pointer is
/// kept for its whole allocation (base and size), per context, so a buffer
/// inside an allocation the driver described before is not asked about
/// again. Neither sees memory freed since (the kernel would then touch it):
/// a trainer that gives memory back to the driver calls
/// qopt_context_forget_allocations, and qopt_buffer_free forgets its own.
QOPT_RUNTIME_API qopt_status qopt_validate(qopt_kernel *kernel,
                                           const qopt_tensor_list *tensors,
                                           const void *const *tables,
                                           size_t num_tables);

/// Steps every tensor of the list in one launch on `stream` (a CUstream;
/// NULL is the legacy default stream; ignored by the host backend, whose
/// steps run to completion before the call returns, their tiles split over
/// the hardware threads or $QOPT_HOST_THREADS, with at least 2^18 elements
/// and 16 tiles per thread). Validates first (as
/// qopt_validate) and evaluates the uniforms (as
/// qopt_manifest_evaluate_uniforms); on any error nothing is launched.
/// `tables`: one device pointer (host pointer for host) per manifest table,
/// 256 float32 each.
///
/// CUDA: the descriptor table, tile map and uniforms are written into a
/// pinned staging buffer and copied with cuMemcpyHtoDAsync; buffers are
/// reused across steps once their previous step has finished (checked with
/// events, never by waiting), so the call does not synchronize. Grid:
/// qopt_launch_grid, one wave being multiprocessors * resident blocks per
/// multiprocessor (the driver's occupancy; the manifest's
/// suggested_blocks_per_sm without it).
/// A list with no tiles launches nothing.
///
/// Stream capture: a step called on a capturing stream records its copy and
/// launch into the graph and keeps its staging buffer for the graph's life
/// (until qopt_kernel_destroy). It uses a buffer reserved by an earlier
/// uncaptured step of this kernel with at least as many tensors and tiles,
/// so run one step outside capture first (warm-up), as for any CUDA graph;
/// otherwise QOPT_ERROR_CAPTURE. A replay re-reads the uniforms evaluated at
/// capture: to replay with a new learning rate or step, capture
/// qopt_step_device_uniforms instead.
/// qopt_step and qopt_step_device_uniforms count nothing (numerics counters
/// NULL); qopt_step_many takes them per launch.
QOPT_RUNTIME_API qopt_status qopt_step(qopt_kernel *kernel,
                                       const qopt_tensor_list *tensors,
                                       const qopt_hyper *hypers,
                                       size_t num_hypers, int64_t step,
                                       const void *const *tables,
                                       size_t num_tables, void *stream);

/// As qopt_step, but the kernel reads its uniforms from `device_uniforms`
/// (num_uniforms float32 in device memory, 4-byte aligned, owned by the
/// caller; fill it with qopt_manifest_evaluate_uniforms and a copy ordered
/// before the step). For CUDA graphs: capture once, then update the buffer
/// before each replay.
QOPT_RUNTIME_API qopt_status qopt_step_device_uniforms(
    qopt_kernel *kernel, const qopt_tensor_list *tensors,
    const float *device_uniforms, const void *const *tables, size_t num_tables,
    void *stream);

/// One launch of qopt_step_many: the arguments of qopt_step (when
/// `device_uniforms` is NULL) or of qopt_step_device_uniforms (when it is
/// not; `hypers` and `step` are then ignored), and the numerics counters.
typedef struct qopt_launch {
  qopt_kernel *kernel;
  const qopt_tensor_list *tensors;
  const qopt_hyper *hypers;
  size_t num_hypers;
  int64_t step;
  const float *device_uniforms;
  const void *const *tables;
  size_t num_tables;
  /// QOPT_NUMERICS_COUNTERS int64 values (device memory for CUDA, 8-byte
  /// aligned) that a kernel taking numerics counters adds to (see
  /// qopt_numerics_counter), or NULL: not counted. Validated as a written
  /// buffer (alignment, device memory, no overlap with a stream); ignored by
  /// a kernel that takes none. Several launches may share one buffer. A
  /// trainer reads them without a host synchronization (a copy ordered after
  /// the step) and resets them when it likes.
  int64_t *numerics_counters;
} qopt_launch;

/// Several launches on one stream, in order (an optimizer step over several
/// param groups or parameter dtypes): every launch is validated and its
/// uniforms evaluated first, and only when all pass is any launched, so a
/// refused launch leaves every tensor of every launch as it was. Errors are
/// those of qopt_step, the message prefixed with "launch <i>: " where there
/// are two launches or more. A driver
/// failure while launching launch i (after validation) leaves launches
/// 0..i-1 enqueued; the message says so. The buffers are checked across the
/// launches as within one: no byte that one launch writes is a byte of
/// another launch's buffers (QOPT_ERROR_VALIDATION naming both launches'
/// buffers), except that the launches may share one numerics counters
/// buffer (each adds to it).
///
/// Step reductions (docs/abi.md, "Step reductions"): where any launch's
/// kernel has them, every launch's kernel must have the same list of step
/// reduction kinds (QOPT_ERROR_VALIDATION naming the launches otherwise;
/// nothing is launched). The step then runs in two phases over the step's
/// T tensors (all launches): phase A, launch by launch, writes each tensor's
/// S float64 accumulations (the reduce and finish launches; the host's
/// partials function); phase B, launch by launch, combines the T rows into
/// the uniform slots U + s (each launch's combine, into its own uniforms)
/// and steps. The T * S * 8 bytes of rows are the runtime's (on CUDA in the
/// first launch's staging buffer: reserved by an uncaptured step, kept by a
/// captured graph).
QOPT_RUNTIME_API qopt_status qopt_step_many(const qopt_launch *launches,
                                            size_t num_launches, void *stream);

/// The rows of a step's reductions: T, the tensors of every launch, and S,
/// the step reductions of their kernels (0 where none has any; the same
/// kinds check as qopt_step_many). A caller of the split API below holds
/// T * S float64.
QOPT_RUNTIME_API qopt_status qopt_step_partials_shape(
    const qopt_launch *launches, size_t num_launches,
    int64_t *num_step_tensors, int64_t *num_step_reductions);

/// Phase A of qopt_step_many into the caller's buffer, for an all-reduce
/// between the phases (sharded training: SUM for the rows of sum and norm,
/// whose accumulation is a sum of squares; MAX for max): validates
/// everything qopt_step_many validates, then writes the T x S rows
/// (tensor (base + k) of launch i, base the tensors of the launches before
/// it, at step_partials[(base + k) * S + s]). Steps nothing.
/// `step_partials`: device memory of the context for CUDA (host memory for
/// the host backend), 8-byte aligned, T * S float64, sharing no byte with
/// any launch's buffers (QOPT_ERROR_VALIDATION). Kernels without step
/// reductions are refused (INVALID_ARGUMENT).
QOPT_RUNTIME_API qopt_status qopt_step_many_partials(
    const qopt_launch *launches, size_t num_launches, double *step_partials,
    void *stream);

/// Phase B of qopt_step_many from the caller's rows (as
/// qopt_step_many_partials wrote them, all-reduced): validates, runs the
/// reduce and finish of kernels that also have per-tensor reductions (their
/// finish writes its rows to the runtime's workspace, not the caller's),
/// then each launch's combine, reading `step_partials`, and its step.
/// `step_partials` shares no byte with any launch's buffers.
QOPT_RUNTIME_API qopt_status qopt_step_many_from_partials(
    const qopt_launch *launches, size_t num_launches,
    const double *step_partials, void *stream);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* QOPT_STEPS_H */
