/*===- qopt/runtime.h - C API of the qopt launch runtime ------------------===*\
 *
 * The stable C interface of libqopt_runtime.so: it loads the fused optimizer
 * kernels that qopt-opt emits (PTX, cubin or fatbin for the CUDA backend; a
 * shared object for the host backend), checks a trainer's tensors against the
 * kernel ABI of docs/abi.md, and steps a whole list of tensors in one launch.
 *
 * Conventions
 * - Every function returns a qopt_status (except qopt_last_error and
 *   qopt_status_string, which return strings). On failure, qopt_last_error()
 *   returns a message for the calling thread that names the file, field,
 *   tensor or driver call at fault; on success it returns "". The message stays
 *   valid until the next qopt_* call on the same thread.
 * - Handles are opaque; each has a create (or load) function and a destroy
 *   function. Destroying NULL is a no-op that returns QOPT_SUCCESS. A handle
 *   keeps what it needs alive: a kernel keeps its context and manifest alive,
 *   so handles may be destroyed in any order.
 * - Strings returned through the info structs are owned by the handle they
 *   were read from and live as long as it does.
 * - Sizes: element counts are int64_t (tensors past 2^31 elements are
 *   supported), byte counts uint64_t, list lengths size_t.
 * - Pointers handed to a step are device pointers (CUDA backend) or host
 *   pointers (host backend). CUDA streams and pointers are passed as void* /
 *   uint64_t so this header needs no CUDA header.
 * - The library never prints and never exits; it loads libcuda.so.1 with
 *   dlopen on first use (override the path with the environment variable
 *   QOPT_CUDA_LIBRARY), so it builds and runs where there is no driver; a CUDA
 *   request there fails with QOPT_ERROR_NO_DRIVER.
 * - Thread safety: manifests are immutable; registries, contexts and kernels
 *   lock internally, so any call may be made from any thread.
\*===----------------------------------------------------------------------===*/

#ifndef QOPT_RUNTIME_H
#define QOPT_RUNTIME_H

#include <stddef.h>
#include <stdint.h>

#if defined(_WIN32)
#if defined(QOPT_RUNTIME_BUILDING)
#define QOPT_RUNTIME_API __declspec(dllexport)
#else
#define QOPT_RUNTIME_API __declspec(dllimport)
#endif
#else
#define QOPT_RUNTIME_API __attribute__((visibility("default")))
#endif

#ifdef __cplusplus
extern "C" {
#endif

/// Version of this library (major * 10000 + minor * 100 + patch).
#define QOPT_RUNTIME_VERSION 700
/// The newest manifest "version" this library reads (it reads 1 to this; a
/// manifest with launch.producer_warps needs 2).
#define QOPT_MANIFEST_VERSION 2

/*===------------------------------------------------------------------===*
 * Status and errors
 *===------------------------------------------------------------------===*/

typedef enum qopt_status {
  QOPT_SUCCESS = 0,
  /// A null handle or pointer, an unknown enum value, a capacity too small.
  QOPT_ERROR_INVALID_ARGUMENT = 1,
  /// A host or device allocation failed.
  QOPT_ERROR_OUT_OF_MEMORY = 2,
  /// A file or directory could not be read; the message names it.
  QOPT_ERROR_IO = 3,
  /// A manifest is malformed; the message names the file and the field
  /// (for example `a.manifest.json: streams[2].dtype: unknown dtype "fp8"`).
  QOPT_ERROR_MANIFEST = 4,
  /// No kernel, hyperparameter, binary or entry point of that name.
  QOPT_ERROR_NOT_FOUND = 5,
  /// libcuda.so.1 could not be loaded, lacks a required symbol, or cuInit
  /// failed. Host-side calls keep working.
  QOPT_ERROR_NO_DRIVER = 6,
  /// The driver is there but there is no device of the requested ordinal.
  QOPT_ERROR_NO_DEVICE = 7,
  /// A CUDA driver call failed; the message names the call and its CUresult.
  QOPT_ERROR_CUDA = 8,
  /// PTX JIT or cubin/fatbin loading failed; the message holds the JIT log.
  QOPT_ERROR_MODULE_LOAD = 9,
  /// The request needs something this build or kernel does not have (for
  /// example a host-backend step for a kernel with no host implementation).
  QOPT_ERROR_UNSUPPORTED = 10,
  /// The tensor list was rejected before any launch; the message names the
  /// tensor, the stream and the problem. Nothing was modified.
  QOPT_ERROR_VALIDATION = 11,
  /// A step on a capturing stream could not be captured (see qopt_step).
  QOPT_ERROR_CAPTURE = 12,
  /// A bug in this library; please report the message.
  QOPT_ERROR_INTERNAL = 13
} qopt_status;

/// The calling thread's message for its last failed call, "" after a success.
/// At most about 1100 characters: a longer one (a field path thousands of
/// levels deep) keeps its first 640 and last 384, the rest counted.
QOPT_RUNTIME_API const char *qopt_last_error(void);
/// A constant name for a status ("QOPT_ERROR_VALIDATION"); never NULL.
QOPT_RUNTIME_API const char *qopt_status_string(qopt_status status);
/// Library and manifest versions (QOPT_RUNTIME_VERSION, QOPT_MANIFEST_VERSION).
QOPT_RUNTIME_API qopt_status qopt_get_version(int32_t *runtime_version,
                                              int32_t *manifest_version);

/*===------------------------------------------------------------------===*
 * Enumerations of the ABI (docs/abi.md)
 *===------------------------------------------------------------------===*/

typedef enum qopt_dtype {
  QOPT_DTYPE_INVALID = 0,
  QOPT_DTYPE_F32 = 1,   ///< "f32", 4 bytes
  QOPT_DTYPE_BF16 = 2,  ///< "bf16", 2 bytes
  QOPT_DTYPE_F16 = 3,   ///< "f16", 2 bytes (IEEE half)
  QOPT_DTYPE_INT8 = 4,  ///< "int8", 1 byte
  QOPT_DTYPE_UINT8 = 5, ///< "uint8", 1 byte
  QOPT_DTYPE_INT16 = 6  ///< "int16", 2 bytes
} qopt_dtype;

/// Size in bytes of one element of `dtype`.
QOPT_RUNTIME_API qopt_status qopt_dtype_size(qopt_dtype dtype, size_t *bytes);
/// The manifest's name of `dtype` ("bf16"). Every function taking an
/// enumeration of this header refuses a value that is none of its
/// enumerators with QOPT_ERROR_INVALID_ARGUMENT.
QOPT_RUNTIME_API qopt_status qopt_dtype_name(qopt_dtype dtype,
                                             const char **name);

typedef enum qopt_stream_role {
  QOPT_ROLE_PARAM = 1,        ///< the 16- or 32-bit parameter, read-write
  QOPT_ROLE_ERROR_BITS = 2,   ///< `<param>.ecc`: int8/int16 rho, read-write
  QOPT_ROLE_GRAD = 3,         ///< the gradient, read-only
  QOPT_ROLE_STATE = 4,        ///< a plain f32/bf16 state
  QOPT_ROLE_STATE_CODES = 5,  ///< `<state>.codes`: int8/uint8 per element
  QOPT_ROLE_STATE_SCALES = 6, ///< `<state>.scales`: f16/f32 per group
  QOPT_ROLE_STATE_ABSMAX = 7  ///< `<state>.absmax`: f32 per block
} qopt_stream_role;

typedef enum qopt_stream_per {
  QOPT_PER_ELEMENT = 1, ///< count = numel
  QOPT_PER_GROUP = 2,   ///< count = ceil(numel / group)
  QOPT_PER_BLOCK = 3    ///< count = ceil(numel / block)
} qopt_stream_per;

typedef enum qopt_access {
  QOPT_ACCESS_READ = 1,
  QOPT_ACCESS_READ_WRITE = 2
} qopt_access;

/// The numerics counters (docs/abi.md, "Numerics counters"): a kernel whose
/// manifest lists the argument `numerics_counters` (one with a state of
/// overflow policy `saturate`, docs/numerics.md "Overflow") adds, with atomic
/// adds, to QOPT_NUMERICS_COUNTERS int64 values in the caller's memory, one
/// per group or codebook block that it stored saturated. The counters are
/// never reset by a step: they count over every launch given them.
#define QOPT_NUMERICS_COUNTERS 2
typedef enum qopt_numerics_counter {
  /// Groups and blocks whose absmax was finite but did not fit the scale's
  /// type: a group scale above 65504 for f16, stored as its largest value.
  /// (A positive f16 one of at most 2^-25, which rounds to 0, is stored as
  /// 2^-24 and not counted.)
  QOPT_COUNTER_SATURATED_GROUPS = 0,
  /// Groups and blocks holding a NaN or an infinity: stored saturated (a
  /// codebook block with a NaN restarts from zero).
  QOPT_COUNTER_NONFINITE_GROUPS = 1
} qopt_numerics_counter;

typedef enum qopt_backend {
  /// Host functions with the kernel ABI (see qopt_host_kernel_fn), loaded
  /// from the shared object a manifest names, or handed over directly.
  QOPT_BACKEND_HOST = 0,
  /// CUDA driver API: PTX, cubin or fatbin modules.
  QOPT_BACKEND_CUDA = 1
} qopt_backend;

typedef enum qopt_binary_format {
  QOPT_BINARY_AUTO = 0, ///< detect: ELF magic = cubin, fatbin magic, else PTX
  QOPT_BINARY_PTX = 1,
  QOPT_BINARY_CUBIN = 2,
  QOPT_BINARY_FATBIN = 3,
  QOPT_BINARY_HOST = 4 ///< a host shared object (host backend)
} qopt_binary_format;

/*===------------------------------------------------------------------===*
 * CUDA driver
 *===------------------------------------------------------------------===*/

/// Loads libcuda.so.1 (once per process) and calls cuInit(0).
/// QOPT_ERROR_NO_DRIVER, with the dlopen/dlsym/cuInit reason, when that fails.
QOPT_RUNTIME_API qopt_status qopt_cuda_driver_load(void);
/// Driver API version (cuDriverGetVersion, e.g. 13000 for CUDA 13.0).
QOPT_RUNTIME_API qopt_status qopt_cuda_driver_version(int32_t *version);
/// Number of CUDA devices; QOPT_ERROR_NO_DRIVER without a driver.
QOPT_RUNTIME_API qopt_status qopt_cuda_device_count(int32_t *count);

/*===------------------------------------------------------------------===*
 * Context: one backend on one device
 *===------------------------------------------------------------------===*/

typedef struct qopt_context qopt_context;

typedef struct qopt_device_info {
  qopt_backend backend;
  int32_t ordinal;           ///< CUDA device ordinal; 0 for host
  int32_t cc_major;          ///< compute capability (0 for host)
  int32_t cc_minor;
  int32_t multiprocessors;   ///< SM count (host: hardware threads)
  int32_t driver_version;    ///< cuDriverGetVersion (0 for host)
  char arch[16];             ///< "sm_90" ("host" for host)
  char name[256];            ///< device name
} qopt_device_info;

/// Creates a context. CUDA: retains the device's primary context (the one
/// PyTorch and the runtime API use), so pointers from those libraries are
/// valid here. Host: no device; `device` must be 0.
QOPT_RUNTIME_API qopt_status qopt_context_create(qopt_backend backend,
                                                 int32_t device,
                                                 qopt_context **out);
QOPT_RUNTIME_API qopt_status qopt_context_destroy(qopt_context *context);
QOPT_RUNTIME_API qopt_status
qopt_context_get_device_info(const qopt_context *context,
                             qopt_device_info *info);
/// Forgets what the driver said about the allocations of this context's
/// pointers (see qopt_validate): the next step asks the driver about every
/// buffer again. Call it after memory was given back to the driver and may
/// have been allocated again at the same addresses (for example after
/// torch.cuda.empty_cache()). A no-op for the host backend.
QOPT_RUNTIME_API qopt_status
qopt_context_forget_allocations(qopt_context *context);

/*===------------------------------------------------------------------===*
 * Buffers: memory of the context's backend, for tools and tests
 *===------------------------------------------------------------------===*/

/// Allocates `bytes` of uninitialized memory a step on `context` can use:
/// device memory (cuMemAlloc) for CUDA, host memory for host; 256-byte
/// aligned. 0 bytes gives *out = NULL (a valid pointer for a stream of 0
/// bytes). The context keeps a table of its buffers: those still allocated
/// when qopt_context_destroy is called are freed then.
/// Errors: QOPT_ERROR_OUT_OF_MEMORY, QOPT_ERROR_CUDA.
QOPT_RUNTIME_API qopt_status qopt_buffer_alloc(qopt_context *context,
                                               uint64_t bytes, void **out);
/// Frees a buffer qopt_buffer_alloc returned on `context`; NULL is a no-op.
/// Any other pointer (another context's, an offset into a buffer, one freed
/// already) is QOPT_ERROR_INVALID_ARGUMENT and frees nothing. No step using
/// the buffer may be in flight.
QOPT_RUNTIME_API qopt_status qopt_buffer_free(qopt_context *context,
                                              void *pointer);
/// Copies `bytes` from host memory `src` to `dst`, which with its `bytes`
/// must lie inside one buffer of `context` (at any offset; otherwise
/// QOPT_ERROR_INVALID_ARGUMENT and nothing is copied). Synchronous: CUDA
/// waits for all work of the context's device (cuCtxSynchronize), then
/// copies (cuMemcpyHtoD) and returns when the copy is done. Not meant for a
/// training loop's hot path.
QOPT_RUNTIME_API qopt_status qopt_buffer_upload(qopt_context *context,
                                                void *dst, const void *src,
                                                uint64_t bytes);
/// The reverse of qopt_buffer_upload: `bytes` from `src`, inside one buffer
/// of `context`, to host memory `dst`, after all work of the device (so
/// after every step enqueued before, on any stream).
QOPT_RUNTIME_API qopt_status qopt_buffer_download(qopt_context *context,
                                                  void *dst, const void *src,
                                                  uint64_t bytes);

/*===------------------------------------------------------------------===*
 * Manifest: the description of one kernel (docs/abi.md)
 *===------------------------------------------------------------------===*/

typedef struct qopt_manifest qopt_manifest;

typedef struct qopt_launch_info {
  int32_t threads_per_block;
  int32_t elements_per_thread;
  int64_t tile_elements;      ///< threads_per_block * elements_per_thread
  int64_t descriptor_bytes;   ///< 16 + 8 * num_streams
  int64_t shared_bytes;       ///< dynamic shared memory per block
  int32_t suggested_blocks_per_sm;
  int32_t waves;              ///< at most this many waves of resident blocks (<= 0: 1)
  /// the fewest tiles per block a launch of more than one wave keeps (<= 0:
  /// QOPT_MIN_TILES_PER_BLOCK)
  int32_t min_tiles_per_block;
  /// extra warps of the block after the threads_per_block that compute the
  /// tile (a bulk-copy producer); the block is threads_per_block + 32 *
  /// producer_warps threads
  int32_t producer_warps;
} qopt_launch_info;

typedef struct qopt_manifest_info {
  const char *kernel;    ///< kernel name (registry key)
  const char *entry;     ///< entry point symbol (default: kernel)
  const char *optimizer; ///< "" when absent
  const char *mode;      ///< "strict", "fast" or ""
  const char *arch;      ///< target of the binaries, e.g. "sm_90"
  const char *source;    ///< file it was read from, or the name given
  size_t num_streams;
  size_t num_hypers;
  size_t num_uniforms;
  size_t num_tables;
  size_t num_args;
  qopt_dtype param_dtype;
  qopt_dtype grad_dtype;
  qopt_dtype error_bits_dtype; ///< QOPT_DTYPE_INVALID without error bits
  qopt_launch_info launch;
  /// QOPT_NUMERICS_COUNTERS where the kernel takes numerics counters (its
  /// args list `numerics_counters`), else 0.
  int32_t num_numerics_counters;
  /// The manifest's "reductions" (qopt_manifest_get_reduction): all of
  /// them, and the step reductions among them (S). num_uniforms counts the
  /// S uniform slots of the step reductions too.
  size_t num_reductions;
  size_t num_step_reductions;
} qopt_manifest_info;

/// A reduction's kind (docs/dsl.md, "Reductions"). Step reductions are
/// sum, max or norm.
typedef enum qopt_reduction_kind {
  QOPT_REDUCTION_SUM = 1,
  QOPT_REDUCTION_MEAN = 2,
  QOPT_REDUCTION_MAX = 3,
  QOPT_REDUCTION_NORM = 4,
  QOPT_REDUCTION_RMS = 5,
} qopt_reduction_kind;

/// Per tensor, or over every tensor of a step (all launches of one
/// qopt_step_many call).
typedef enum qopt_reduction_scope {
  QOPT_REDUCTION_SCOPE_TENSOR = 0,
  QOPT_REDUCTION_SCOPE_STEP = 1,
} qopt_reduction_scope;

typedef struct qopt_reduction_info {
  qopt_reduction_kind kind;
  qopt_reduction_scope scope;
  /// Its index among the reductions of its scope (r_t or s).
  int64_t index;
  /// A step reduction's uniform slot (U + s, U the evaluated uniforms); -1
  /// for a per-tensor one.
  int64_t uniform;
} qopt_reduction_info;

typedef struct qopt_stream_info {
  const char *name;  ///< "p", "p.ecc", "m.codes", ...
  const char *state; ///< the state it belongs to ("" for param/grad)
  qopt_stream_role role;
  qopt_dtype dtype;
  qopt_stream_per per;
  int64_t per_size; ///< group or block size; 1 per element
  qopt_access access;
} qopt_stream_info;

typedef struct qopt_hyper_info {
  const char *name;
  double default_value; ///< meaningful when has_default
  int32_t has_default;  ///< 0: the value must be given at every step
  int32_t is_bool;      ///< 1: value must be 0 or 1
} qopt_hyper_info;

typedef struct qopt_table_info {
  const char *name;  ///< e.g. "m2.qmap"
  const char *state; ///< the codebook state it serves
  qopt_dtype dtype;  ///< QOPT_DTYPE_F32
  int64_t count;     ///< 256
} qopt_table_info;

/// Parses a manifest from memory. `source_name` (may be NULL) is used in
/// messages in place of a file name and as the base for relative binary paths
/// (its directory). Errors: QOPT_ERROR_MANIFEST naming the field.
QOPT_RUNTIME_API qopt_status qopt_manifest_parse(const char *json,
                                                 size_t length,
                                                 const char *source_name,
                                                 qopt_manifest **out);
/// Reads and parses `<kernel>.manifest.json`. QOPT_ERROR_IO if unreadable.
QOPT_RUNTIME_API qopt_status qopt_manifest_load(const char *path,
                                                qopt_manifest **out);
QOPT_RUNTIME_API qopt_status qopt_manifest_destroy(qopt_manifest *manifest);
QOPT_RUNTIME_API qopt_status
qopt_manifest_get_info(const qopt_manifest *manifest, qopt_manifest_info *info);
/// Stream `index` in ABI stream order (0 <= index < num_streams).
QOPT_RUNTIME_API qopt_status
qopt_manifest_get_stream(const qopt_manifest *manifest, size_t index,
                         qopt_stream_info *info);
QOPT_RUNTIME_API qopt_status
qopt_manifest_get_hyper(const qopt_manifest *manifest, size_t index,
                        qopt_hyper_info *info);
QOPT_RUNTIME_API qopt_status
qopt_manifest_get_table(const qopt_manifest *manifest, size_t index,
                        qopt_table_info *info);
/// Reduction `index` of the manifest's "reductions", in update order
/// (0 <= index < num_reductions).
QOPT_RUNTIME_API qopt_status
qopt_manifest_get_reduction(const qopt_manifest *manifest, size_t index,
                            qopt_reduction_info *info);

/// A hyperparameter value by name. Names the manifest does not list are an
/// error (QOPT_ERROR_NOT_FOUND); listed names not given take their default.
typedef struct qopt_hyper {
  const char *name;
  double value;
} qopt_hyper;

/// Evaluates the manifest's uniform expressions in float64 and rounds each to
/// float32 once: out[i] = (float)eval(uniforms[i]); the step reductions'
/// slots after them (num_uniforms counts them) are 0.0. `step` is the 1-based
/// step count as the spec sees it. `capacity` must be >= num_uniforms.
/// Errors (QOPT_ERROR_INVALID_ARGUMENT): `step` < 1, unknown or missing
/// hyperparameter, a bool hyperparameter not 0/1, a NaN result (the message
/// names the uniform and its expression). An infinite result is allowed (a
/// threshold of inf can be meant); range checks of hyperparameters (beta1 < 1)
/// are the caller's, as in torch.optim.
QOPT_RUNTIME_API qopt_status qopt_manifest_evaluate_uniforms(
    const qopt_manifest *manifest, const qopt_hyper *hypers, size_t num_hypers,
    int64_t step, float *out, size_t capacity);

/*===------------------------------------------------------------------===*
 * State layout
 *===------------------------------------------------------------------===*/

typedef enum qopt_init_kind {
  /// The trainer's own tensor (parameter, gradient): nothing to initialize.
  QOPT_INIT_CALLER = 0,
  /// Fill every element with the bit pattern `fill_bits` (value `fill_value`).
  QOPT_INIT_FILL = 1,
  /// Error bits: 0 when the float32 master equals the 16-bit parameter,
  /// otherwise compute them with qopt_error_bits_init from the master.
  QOPT_INIT_FROM_MASTER = 2,
  /// Codebook codes when no table was given to the layout call: fill with
  /// qopt_codebook_zero_code(table) of the state's table.
  QOPT_INIT_CODEBOOK_ZERO = 3
} qopt_init_kind;

typedef struct qopt_buffer_layout {
  const char *name; ///< stream name, owned by the manifest
  qopt_stream_role role;
  qopt_dtype dtype;
  qopt_stream_per per;
  int64_t per_size;   ///< group/block size, 1 per element
  int64_t count;      ///< elements of this buffer
  uint64_t bytes;     ///< count * dtype size (allocate at 16-byte alignment)
  qopt_init_kind init;
  uint64_t fill_bits; ///< one element's bit pattern (QOPT_INIT_FILL)
  double fill_value;  ///< the value it encodes (code value for codes)
} qopt_buffer_layout;

/// For a parameter of `numel` elements, fills out[0..num_streams) with the
/// size, dtype and initial value of every stream, in ABI stream order.
/// `host_tables` (may be NULL) holds one 256-entry float32 host table per
/// manifest table, in table order; with it a codebook state's codes get
/// QOPT_INIT_FILL with the code of 0.0, without it QOPT_INIT_CODEBOOK_ZERO.
QOPT_RUNTIME_API qopt_status qopt_manifest_state_layout(
    const qopt_manifest *manifest, int64_t numel,
    const float *const *host_tables, size_t num_tables,
    qopt_buffer_layout *out, size_t capacity);

/// The code the codebook quantizer gives 0.0 for an ascending 256-entry
/// table: #{k : (qmap[k] + qmap[k+1]) * 0.5f < 0}. The table must be finite
/// and non-decreasing.
QOPT_RUNTIME_API qopt_status qopt_codebook_zero_code(const float *qmap,
                                                     uint8_t *code);

/*===------------------------------------------------------------------===*
 * Split master weights (docs/numerics.md section 3), host memory
 *===------------------------------------------------------------------===*/

/// Splits float32 masters into 16-bit parameters and error bits:
/// param_out[i] = round_to_nearest_even(master[i]) (bf16 or f16 bits) and
/// ecc_out[i] = rho (int8 or int16). `param_dtype` is QOPT_DTYPE_BF16 or
/// QOPT_DTYPE_F16, `ecc_dtype` QOPT_DTYPE_INT8 or QOPT_DTYPE_INT16.
/// `param_out` may be NULL (then only the error bits are written). NaN and
/// infinite parameters, and masters beyond the 16-bit range, get rho = 0.
QOPT_RUNTIME_API qopt_status qopt_error_bits_init(qopt_dtype param_dtype,
                                                  qopt_dtype ecc_dtype,
                                                  const float *master,
                                                  int64_t numel,
                                                  void *param_out,
                                                  void *ecc_out);
/// The inverse: master_out[i] = f32(param) + rho correction.
QOPT_RUNTIME_API qopt_status qopt_error_bits_decode(qopt_dtype param_dtype,
                                                    qopt_dtype ecc_dtype,
                                                    const void *param,
                                                    const void *ecc,
                                                    int64_t numel,
                                                    float *master_out);

/*===------------------------------------------------------------------===*
 * Tile map (docs/abi.md)
 *===------------------------------------------------------------------===*/

/// first_tile[k] = sum_{j<k} ceil(numels[j] / tile_elements);
/// tile_map[t] = k for each tile t of tensor k; *num_tiles = the total.
/// `first_tile` (num_tensors entries) and `tile_map` may be NULL to only
/// count; otherwise `tile_map_capacity` must be >= the total.
QOPT_RUNTIME_API qopt_status qopt_tile_map_build(const int64_t *numels,
                                                 size_t num_tensors,
                                                 int64_t tile_elements,
                                                 int64_t *first_tile,
                                                 int32_t *tile_map,
                                                 size_t tile_map_capacity,
                                                 int64_t *num_tiles);

/*===------------------------------------------------------------------===*
 * Registry: kernels by name, from manifests and the binaries beside them
 *===------------------------------------------------------------------===*/

typedef struct qopt_registry qopt_registry;

QOPT_RUNTIME_API qopt_status qopt_registry_create(qopt_registry **out);
QOPT_RUNTIME_API qopt_status qopt_registry_destroy(qopt_registry *registry);
/// Adds the kernel of one manifest file. Its binaries are those listed in the
/// manifest's "binaries", else `<kernel>.cubin`, `<kernel>.fatbin` and
/// `<kernel>.ptx` beside the manifest, whichever exist. A kernel name already
/// in the registry is an error naming both files.
QOPT_RUNTIME_API qopt_status
qopt_registry_add_manifest_file(qopt_registry *registry, const char *path);
/// Adds every `*.manifest.json` in `directory` (not recursive), in name
/// order, all or none: on the first error (a manifest refused, a kernel name
/// defined twice, here or already in the registry) nothing is added and
/// `num_added` is left as it was. `num_added` may be NULL.
QOPT_RUNTIME_API qopt_status qopt_registry_add_directory(
    qopt_registry *registry, const char *directory, size_t *num_added);
/// Adds an already-parsed manifest (the registry keeps a reference) and an
/// optional in-memory binary image (copied) for it.
QOPT_RUNTIME_API qopt_status qopt_registry_add_manifest(
    qopt_registry *registry, const qopt_manifest *manifest,
    qopt_binary_format format, const void *image, size_t image_size);
/// Adds a kernel embedded in the caller's binary (libqopt_kernels adds the
/// shipped kernels so): `kernel` is its name, `manifest_json` (`manifest_size`
/// bytes) its manifest, `image` (`image_size` bytes, may be NULL and 0) its
/// binary, `source` its name in messages. Both are only referred to until the
/// kernel is first asked for (qopt_registry_get_manifest,
/// qopt_kernel_create), when the manifest is parsed and the image copied: they
/// must stay valid and unchanged while the registry exists (static data). A
/// malformed manifest, or one whose "kernel" is not `kernel`, is
/// QOPT_ERROR_MANIFEST then; a name already in the registry is
/// QOPT_ERROR_INVALID_ARGUMENT now.
QOPT_RUNTIME_API qopt_status qopt_registry_add_embedded(
    qopt_registry *registry, const char *kernel, const char *manifest_json,
    size_t manifest_size, const char *source, qopt_binary_format format,
    const void *image, size_t image_size);
QOPT_RUNTIME_API qopt_status qopt_registry_count(const qopt_registry *registry,
                                                 size_t *count);
/// Kernel names in sorted order; the string lives as long as the registry.
QOPT_RUNTIME_API qopt_status qopt_registry_kernel_name(
    const qopt_registry *registry, size_t index, const char **name);
/// A new reference to a kernel's manifest (destroy it with
/// qopt_manifest_destroy). QOPT_ERROR_NOT_FOUND lists the known kernels.
QOPT_RUNTIME_API qopt_status qopt_registry_get_manifest(
    const qopt_registry *registry, const char *kernel, qopt_manifest **out);

/*===------------------------------------------------------------------===*
 * Kernels
 *===------------------------------------------------------------------===*/

typedef struct qopt_kernel qopt_kernel;

/// The host backend's kernel: the GPU kernel's arguments (docs/abi.md), with
/// the codebook tables as one array, plus the half-open range of tiles to
/// process. The runtime calls it with [0, num_tiles) or with disjoint ranges
/// from several threads; it must not keep the pointers.
typedef void (*qopt_host_kernel_fn)(const void *descriptors,
                                    const int32_t *tile_map, int64_t num_tiles,
                                    const float *uniforms,
                                    const float *const *tables,
                                    int64_t tile_begin, int64_t tile_end);
/// The host function of a kernel that takes numerics counters (its
/// manifest's args list `numerics_counters`): qopt_host_kernel_fn's
/// arguments, then QOPT_NUMERICS_COUNTERS int64 values it adds to
/// atomically (NULL: not counted). Given to qopt_kernel_create_host cast to
/// qopt_host_kernel_fn; the runtime calls it with all eight arguments.
typedef void (*qopt_host_counted_kernel_fn)(
    const void *descriptors, const int32_t *tile_map, int64_t num_tiles,
    const float *uniforms, const float *const *tables, int64_t tile_begin,
    int64_t tile_end, int64_t *numerics_counters);

/// The host backend's phase A of a kernel with step reductions (docs/abi.md,
/// "Step reductions"): for each tensor whose first tile lies in
/// [tile_begin, tile_end), its S float64 accumulations at
/// step_partials[k * S + s] (k: the tensor's index in this launch). Reads
/// the tensors only.
typedef void (*qopt_host_partials_fn)(const void *descriptors,
                                      const int32_t *tile_map,
                                      int64_t num_tiles, const float *uniforms,
                                      const float *const *tables,
                                      int64_t tile_begin, int64_t tile_end,
                                      double *step_partials);
/// Phase B: the tree over the step's `num_step_tensors` rows of S
/// accumulations, finished and rounded to float32 into uniforms[U + s].
typedef void (*qopt_host_combine_fn)(int64_t num_step_tensors,
                                     const double *step_partials,
                                     float *uniforms);

/// Loads a kernel of the registry onto the context's device. CUDA: picks the
/// binary for the device's architecture (cubin for the same sm, then a cubin
/// the device can run, then fatbin, then PTX through the driver JIT, trying
/// the next on failure; the error lists every attempt with its JIT log).
/// Host: dlopens the manifest's "host" library and resolves its symbol; a
/// library that carries its own manifest (`<symbol>_manifest`, docs/abi.md)
/// refuses a manifest that differs from it in its ABI: QOPT_ERROR_MANIFEST
/// naming the first differing field and both values, no kernel made.
QOPT_RUNTIME_API qopt_status qopt_kernel_create(qopt_context *context,
                                                const qopt_registry *registry,
                                                const char *kernel,
                                                qopt_kernel **out);
/// Loads a kernel from an in-memory image (PTX text, with or without a
/// terminating NUL; cubin; fatbin) for a CUDA context.
QOPT_RUNTIME_API qopt_status qopt_kernel_create_from_image(
    qopt_context *context, const qopt_manifest *manifest,
    qopt_binary_format format, const void *image, size_t image_size,
    qopt_kernel **out);
/// Makes a host-backend kernel from a function with the ABI's signature: a
/// qopt_host_kernel_fn, or, for a manifest whose args list
/// `numerics_counters`, a qopt_host_counted_kernel_fn cast to it.
QOPT_RUNTIME_API qopt_status qopt_kernel_create_host(
    qopt_context *context, const qopt_manifest *manifest,
    qopt_host_kernel_fn function, qopt_kernel **out);
/// Gives a qopt_kernel_create_host kernel whose manifest has step
/// reductions its phase functions: `phase` "partials" (a
/// qopt_host_partials_fn) or "combine" (a qopt_host_combine_fn), cast to
/// void (*)(void). A kernel loaded from a manifest's host library has them
/// from its "phases" already. Errors: INVALID_ARGUMENT for another name, a
/// NULL function or a kernel that is not a host kernel with step
/// reductions.
typedef void (*qopt_host_phase_fn)(void);
QOPT_RUNTIME_API qopt_status qopt_kernel_set_host_phase(qopt_kernel *kernel,
                                                        const char *phase,
                                                        qopt_host_phase_fn function);

/// Destroys a kernel. Its staging buffers (including those kept for captured
/// graphs) are freed: no step of it may be in flight or replayed later.
QOPT_RUNTIME_API qopt_status qopt_kernel_destroy(qopt_kernel *kernel);
/// A new reference to the kernel's manifest.
QOPT_RUNTIME_API qopt_status qopt_kernel_get_manifest(const qopt_kernel *kernel,
                                                      qopt_manifest **out);

typedef struct qopt_kernel_info {
  qopt_backend backend;
  qopt_binary_format format; ///< what was loaded
  const char *arch;          ///< arch of the loaded binary ("" if unknown)
  const char *origin;        ///< file path or "<memory>"
  const char *jit_log;       ///< JIT info log of a PTX load ("" otherwise)
  int32_t max_blocks;        ///< one wave: multiprocessors * resident blocks per SM
} qopt_kernel_info;
QOPT_RUNTIME_API qopt_status qopt_kernel_get_info(const qopt_kernel *kernel,
                                                  qopt_kernel_info *info);

/// The fewest tiles per block that a launch of more than one wave keeps
/// (qopt_launch_grid) where the manifest's launch.min_tiles_per_block does
/// not say.
#define QOPT_MIN_TILES_PER_BLOCK 24

/// The grid of one step over `num_tiles` tiles (the runtime's choice; the
/// kernels are persistent, each block stepping one contiguous range of
/// tiles, so any grid is correct): whole waves of `wave_blocks` blocks (one
/// wave: multiprocessors * resident blocks per multiprocessor, the kernel
/// info's max_blocks), as many as `launch->waves` allows while each block
/// keeps at least `launch->min_tiles_per_block` tiles
/// (QOPT_MIN_TILES_PER_BLOCK where that is <= 0), at least one, and never
/// more blocks than tiles nor than 2^31 - 1 (cuLaunchKernel's limit). 0 for
/// no tiles, no blocks or no launch info. Measured on the H200
/// (bench/NOTES.md, eighth and ninth sessions): FlashLion and FlashSGD ran
/// 9% faster at 64 Mi parameters with 4 waves (31 tiles per block) and 5%
/// slower at 16 Mi (8 tiles per block) than with one; FlashAdamW runs
/// fastest with one wave of 124 tiles per block at 64 Mi, but faster with
/// 3 or 4 waves than with one at 256 Mi.
QOPT_RUNTIME_API int64_t qopt_launch_grid(const qopt_launch_info *launch,
                                          int64_t wave_blocks,
                                          int64_t num_tiles);

#ifdef __cplusplus
} /* extern "C" */
#endif

/* Steps: one launch, several launches, and the split step of whole-step
 * reductions (qopt/steps.h, part of this interface). */
#include "qopt/steps.h"

#endif /* QOPT_RUNTIME_H */
