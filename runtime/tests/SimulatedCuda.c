/* SimulatedCuda.c - a libcuda stand-in with one simulated device, for the
 * runtime's CUDA launch path on machines without a GPU (SimulatedDeviceTest).
 *
 * "Device memory" is host memory: cuMemAlloc hands out malloc'd blocks and
 * remembers them, so cuPointerGetAttributes answers as the driver does (the
 * allocation's base and size, memory type, ordinal 0; memory type 0 for any
 * other pointer). Copies happen at once, events are always complete and
 * launches run nothing: each is recorded with its grid and argument values,
 * so a test reads the descriptors and tile map the runtime uploaded from the
 * pointers it passed (sim_set_arg_count says how many; a log of every launch
 * by its entry point's name keeps them too). sim_count(name) returns how often an entry point was
 * called since sim_reset(). Events complete at once unless
 * sim_set_events_pending(1) holds them in flight. A module's globals are
 * the byte arrays its PTX declares (cuModuleGetGlobal_v2). The occupancy
 * query answers sim_set_occupancy's blocks (0 by default: the driver cannot
 * say, and the runtime takes the manifest's suggestion) and keeps the block
 * size it was asked about (sim_last_occupancy_block). Not thread-safe: the
 * tests call it from one thread. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define API __attribute__((visibility("default")))

typedef unsigned long long devptr;

enum { kMaxAllocs = 4096, kMaxArgs = 16 };

struct Alloc {
  void *base;
  size_t bytes;
  int host; /* cuMemHostAlloc (pinned host memory) */
};

static struct Alloc allocs[kMaxAllocs];
static int numAllocs;
static struct {
  long pointerQueries, launches, copies, copiedBytes, allocsMade, eventQueries,
      eventWaits, globalLookups;
} counts;
static int eventsPending; /* cuEventQuery answers CUDA_ERROR_NOT_READY */
static unsigned lastGrid;
static int argCount;
static uint64_t lastArgs[kMaxArgs];
static int numLogged; /* entries of launchLog (below) */

API void sim_reset(void) {
  memset(&counts, 0, sizeof counts);
  numLogged = 0;
}

/* Nonzero: every event stays in flight for cuEventQuery (a device far
 * behind the host); cuEventSynchronize still returns. */
API void sim_set_events_pending(int pending) { eventsPending = pending; }

/* How many arguments a launch records (the kernel's manifest "args"). */
API void sim_set_arg_count(int n) { argCount = n < kMaxArgs ? n : kMaxArgs; }

API long sim_count(const char *name) {
  if (!strcmp(name, "cuPointerGetAttributes")) return counts.pointerQueries;
  if (!strcmp(name, "cuLaunchKernel")) return counts.launches;
  if (!strcmp(name, "cuMemcpyHtoDAsync")) return counts.copies;
  if (!strcmp(name, "copied_bytes")) return counts.copiedBytes;
  if (!strcmp(name, "cuMemAlloc")) return counts.allocsMade;
  if (!strcmp(name, "cuEventQuery")) return counts.eventQueries;
  if (!strcmp(name, "cuEventSynchronize")) return counts.eventWaits;
  if (!strcmp(name, "cuModuleGetGlobal")) return counts.globalLookups;
  return -1;
}

/* The last launch: grid and block size, and its i-th argument read as a
 * 64-bit value (pointers and num_tiles are 8 bytes in the qopt ABI). */
API unsigned sim_last_grid(void) { return lastGrid; }
API uint64_t sim_last_arg(int i) { return i >= 0 && i < kMaxArgs ? lastArgs[i] : 0; }

static int addAlloc(void *base, size_t bytes, int host) {
  if (numAllocs == kMaxAllocs) return 2; /* CUDA_ERROR_OUT_OF_MEMORY */
  allocs[numAllocs].base = base;
  allocs[numAllocs].bytes = bytes;
  allocs[numAllocs].host = host;
  ++numAllocs;
  return 0;
}

static int removeAlloc(void *base) {
  for (int i = 0; i < numAllocs; ++i)
    if (allocs[i].base == base) {
      allocs[i] = allocs[--numAllocs];
      free(base);
      return 0;
    }
  return 1; /* CUDA_ERROR_INVALID_VALUE */
}

API int cuInit(unsigned flags) { (void)flags; return 0; }
API int cuDriverGetVersion(int *v) { *v = 13000; return 0; }
API int cuGetErrorName(int r, const char **s) { (void)r; *s = "CUDA_ERROR_SIMULATED"; return 0; }
API int cuGetErrorString(int r, const char **s) { (void)r; *s = "simulated error"; return 0; }
API int cuDeviceGetCount(int *n) { *n = 1; return 0; }
API int cuDeviceGet(int *d, int ordinal) { *d = ordinal; return ordinal == 0 ? 0 : 101; }
API int cuDeviceGetAttribute(int *v, int attr, int dev) {
  (void)dev;
  switch (attr) {
  case 16: *v = 132; break;        /* multiprocessors */
  case 41: *v = 1; break;          /* unified addressing */
  case 75: *v = 9; break;          /* compute capability */
  case 76: *v = 0; break;
  case 97: *v = 232448; break;     /* shared memory per block, opt-in */
  default: *v = 0;
  }
  return 0;
}
API int cuDeviceGetName(char *name, int len, int dev) {
  (void)dev;
  strncpy(name, "Simulated sm_90", (size_t)len);
  return 0;
}
static int primary;
API int cuDevicePrimaryCtxRetain(void **ctx, int dev) { (void)dev; *ctx = &primary; return 0; }
API int cuDevicePrimaryCtxRelease_v2(int dev) { (void)dev; return 0; }
API int cuCtxPushCurrent_v2(void *ctx) { (void)ctx; return 0; }
API int cuCtxPopCurrent_v2(void **ctx) { if (ctx) *ctx = &primary; return 0; }
/* Entry points by name: cuModuleGetFunction hands out one function per name,
 * and each launch is logged with its function's name and its arguments
 * (sim_set_function_args says how many a name takes; the others record
 * none). */
enum { kMaxFunctions = 64, kMaxLog = 256, kNameBytes = 64 };
static struct Function {
  char name[kNameBytes];
  int args;
} functions[kMaxFunctions];
static int numFunctions;
static struct LogEntry {
  int function;
  unsigned grid, block;
  uint64_t args[kMaxArgs];
} launchLog[kMaxLog];

static int functionIndex(const char *name) {
  for (int i = 0; i < numFunctions; ++i)
    if (!strcmp(functions[i].name, name)) return i;
  if (numFunctions == kMaxFunctions) return -1;
  strncpy(functions[numFunctions].name, name, kNameBytes - 1);
  functions[numFunctions].args = -1;
  return numFunctions++;
}

API void sim_set_function_args(const char *name, int n) {
  int i = functionIndex(name);
  if (i >= 0) functions[i].args = n < kMaxArgs ? n : kMaxArgs;
}
API int sim_logged(void) { return numLogged; }
API const char *sim_logged_name(int i) {
  return i >= 0 && i < numLogged && launchLog[i].function >= 0
             ? functions[launchLog[i].function].name : "";
}
API unsigned sim_logged_grid(int i) { return i >= 0 && i < numLogged ? launchLog[i].grid : 0; }
API unsigned sim_logged_block(int i) { return i >= 0 && i < numLogged ? launchLog[i].block : 0; }
API uint64_t sim_logged_arg(int i, int j) {
  return i >= 0 && i < numLogged && j >= 0 && j < kMaxArgs ? launchLog[i].args[j] : 0;
}

/* Modules: each keeps its image's text (a PTX image; a cubin or fatbin is
 * kept up to its first NUL, which holds no declaration) and the globals
 * cuModuleGetGlobal_v2 read from it: a PTX byte array
 * `.b8 <name>[<n>] = {b0, b1, ...};` as NVPTX writes it (zeros without an
 * initializer), in "device memory". */
enum { kMaxGlobals = 8 };
struct Module {
  char *image;
  int numGlobals;
  struct Global {
    char name[kNameBytes];
    void *data;
    size_t bytes;
  } globals[kMaxGlobals];
};

API int cuModuleLoadDataEx(void **m, const void *image, unsigned n, int *o, void **v) {
  (void)n; (void)o; (void)v;
  struct Module *mod = (struct Module *)calloc(1, sizeof *mod);
  if (!mod) return 2;
  mod->image = strdup((const char *)image);
  *m = mod;
  return 0;
}

/* The initializer of byte array `name` in `text` into a new allocation;
 * 500 (CUDA_ERROR_NOT_FOUND) where the text declares none, 218
 * (CUDA_ERROR_INVALID_PTX) where its initializer is malformed. */
static int readGlobal(const char *text, const char *name, void **data, size_t *bytes) {
  char needle[kNameBytes + 8];
  snprintf(needle, sizeof needle, ".b8 %s[", name);
  const char *at = text ? strstr(text, needle) : NULL;
  if (!at) return 500;
  char *end = NULL;
  unsigned long long n = strtoull(at + strlen(needle), &end, 10);
  if (end == at + strlen(needle) || *end != ']') return 218;
  void *b = NULL;
  if (posix_memalign(&b, 256, n ? n : 1)) return 2;
  memset(b, 0, n ? n : 1);
  const char *p = end + 1;
  while (*p == ' ') ++p;
  if (*p == '=') {
    /* At most n values; NVPTX leaves trailing zeros out. */
    p = strchr(p, '{');
    for (unsigned long long i = 0; p && *p != '}'; ++i) {
      unsigned long v = strtoul(p + 1, &end, 10);
      if (i == n || end == p + 1 || v > 255 || (*end != ',' && *end != '}')) { p = NULL; break; }
      ((unsigned char *)b)[i] = (unsigned char)v;
      p = end;
    }
    if (!p) { free(b); return 218; }
  }
  *data = b;
  *bytes = (size_t)n;
  return addAlloc(b, (size_t)n, 0);
}

API int cuModuleGetGlobal_v2(devptr *dptr, size_t *bytes, void *m, const char *name) {
  struct Module *mod = (struct Module *)m;
  ++counts.globalLookups;
  struct Global *g = NULL;
  for (int i = 0; i < mod->numGlobals && !g; ++i)
    if (!strcmp(mod->globals[i].name, name)) g = &mod->globals[i];
  if (!g) {
    if (mod->numGlobals == kMaxGlobals || strlen(name) >= kNameBytes) return 2;
    g = &mod->globals[mod->numGlobals];
    int r = readGlobal(mod->image, name, &g->data, &g->bytes);
    if (r) return r;
    strcpy(g->name, name);
    ++mod->numGlobals;
  }
  if (dptr) *dptr = (devptr)(uintptr_t)g->data;
  if (bytes) *bytes = g->bytes;
  return 0;
}
API int cuModuleGetFunction(void **f, void *m, const char *name) {
  (void)m;
  int i = functionIndex(name);
  if (i < 0) return 500; /* CUDA_ERROR_NOT_FOUND */
  *f = &functions[i];
  return 0;
}
static int occupancyBlocks;
static int lastOccupancyBlock;
API void sim_set_occupancy(int blocks) { occupancyBlocks = blocks; }
API int sim_last_occupancy_block(void) { return lastOccupancyBlock; }
API int cuOccupancyMaxActiveBlocksPerMultiprocessor(int *blocks, void *f, int blockSize,
                                                    size_t dynamicShared) {
  (void)f; (void)dynamicShared;
  lastOccupancyBlock = blockSize;
  *blocks = occupancyBlocks;
  return 0;
}
API int cuModuleUnload(void *m) {
  struct Module *mod = (struct Module *)m;
  for (int i = 0; i < mod->numGlobals; ++i) removeAlloc(mod->globals[i].data);
  free(mod->image);
  free(mod);
  return 0;
}
API int cuFuncSetAttribute(void *f, int a, int v) { (void)f; (void)a; (void)v; return 0; }
API int cuMemAlloc_v2(devptr *p, size_t bytes) {
  void *b = NULL;
  if (posix_memalign(&b, 256, bytes ? bytes : 1)) return 2;
  ++counts.allocsMade;
  *p = (devptr)(uintptr_t)b;
  return addAlloc(b, bytes, 0);
}
API int cuMemFree_v2(devptr p) { return removeAlloc((void *)(uintptr_t)p); }
API int cuMemHostAlloc(void **p, size_t bytes, unsigned flags) {
  (void)flags;
  if (posix_memalign(p, 256, bytes ? bytes : 1)) return 2;
  return addAlloc(*p, bytes, 1);
}
API int cuMemFreeHost(void *p) { return removeAlloc(p); }
API int cuMemcpyHtoDAsync_v2(devptr dst, const void *src, size_t bytes, void *stream) {
  (void)stream;
  ++counts.copies;
  counts.copiedBytes += (long)bytes;
  memcpy((void *)(uintptr_t)dst, src, bytes);
  return 0;
}
API int cuMemcpyHtoD_v2(devptr dst, const void *src, size_t bytes) {
  memcpy((void *)(uintptr_t)dst, src, bytes);
  return 0;
}
API int cuMemcpyDtoH_v2(void *dst, devptr src, size_t bytes) {
  memcpy(dst, (const void *)(uintptr_t)src, bytes);
  return 0;
}
API int cuLaunchKernel(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                       unsigned by, unsigned bz, unsigned shared, void *stream,
                       void **params, void **extra) {
  (void)gy; (void)gz; (void)by; (void)bz; (void)shared;
  (void)stream; (void)extra;
  ++counts.launches;
  lastGrid = gx;
  memset(lastArgs, 0, sizeof lastArgs);
  const struct Function *fn = (const struct Function *)f;
  int n = fn->args >= 0 ? fn->args : argCount;
  for (int i = 0; params && i < n; ++i)
    memcpy(&lastArgs[i], params[i], 8);
  if (numLogged < kMaxLog) {
    struct LogEntry *e = &launchLog[numLogged++];
    e->function = (int)(fn - functions);
    e->grid = gx;
    e->block = bx;
    memcpy(e->args, lastArgs, sizeof lastArgs);
  }
  return 0;
}
static int event;
API int cuEventCreate(void **e, unsigned flags) { (void)flags; *e = &event; return 0; }
API int cuEventDestroy_v2(void *e) { (void)e; return 0; }
API int cuEventRecord(void *e, void *s) { (void)e; (void)s; return 0; }
API int cuEventQuery(void *e) {
  (void)e;
  ++counts.eventQueries;
  return eventsPending ? 600 : 0;
}
API int cuEventSynchronize(void *e) {
  (void)e;
  ++counts.eventWaits;
  return 0;
}
/* Nonzero: every stream reports an active capture (CU_STREAM_CAPTURE_STATUS_ACTIVE);
 * what a capture records runs nothing here either. */
static int capturing;
API void sim_set_capturing(int c) { capturing = c; }
API int cuStreamIsCapturing(void *s, int *status) { (void)s; *status = capturing ? 1 : 0; return 0; }
API int cuCtxSynchronize(void) { return 0; }

/* Attributes: 2 memory type, 8 is managed, 9 device ordinal, 11 range start,
 * 12 range size. */
API int cuPointerGetAttributes(unsigned n, int *attrs, void **data, devptr p) {
  ++counts.pointerQueries;
  const struct Alloc *a = NULL;
  for (int i = 0; i < numAllocs && !a; ++i) {
    uintptr_t b = (uintptr_t)allocs[i].base;
    if (p >= b && p < b + allocs[i].bytes) a = &allocs[i];
  }
  for (unsigned i = 0; i < n; ++i) {
    switch (attrs[i]) {
    case 2: *(unsigned *)data[i] = a ? (a->host ? 1u : 2u) : 0u; break;
    case 8: *(unsigned *)data[i] = 0; break;
    case 9: *(int *)data[i] = a ? 0 : -1; break;
    case 11: *(devptr *)data[i] = a ? (devptr)(uintptr_t)a->base : 0; break;
    case 12: *(size_t *)data[i] = a ? a->bytes : 0; break;
    default: return 1;
    }
  }
  return 0;
}
