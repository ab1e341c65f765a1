/* A stand-in NCCL-API library plus HIP runtime for the CPU tests of `rcclfix verify`.
 *
 * "Device memory" is host memory and a collective runs on the host at ncclGroupEnd, so the real
 * parent/child machinery of verify (protocol, watchdog, checks, crash and error handling) runs
 * end to end without a GPU. It exports the hip* runtime functions and the nccl* functions verify
 * loads. One process driving every rank (ncclCommInitAll) runs a group's collectives at
 * ncclGroupEnd. One process per rank (ncclGetUniqueId + ncclCommInitRank) shares a file in
 * /dev/shm named after the unique id: a collective deposits the rank's data there when called and
 * completes in hipStreamQuery once every rank has deposited, so a rank that never joins shows up
 * as a stream that never finishes, as on a GPU. At most SLOTS collectives may be in flight.
 *
 * FAKENCCL_FAULT selects a fault:
 *   (unset)           correct collectives
 *   rank0-everywhere  all_gather writes rank 0's data into every slot
 *   flip:N            all_reduce result element N flipped on rank 1 (lowest bit)
 *   hang:K            the K-th collective call (0-based) never completes
 *   abort:K           the K-th collective call aborts the process
 *   hostcall          every collective fails like a hostcall kernel refused at dispatch on a GPU
 *                     without PCIe atomics (hipErrorIllegalState, ncclUnhandledCudaError)
 *
 * Built by tests/it/verify.rs with `cc -shared -fPIC`. Written for rcclfix; no NCCL or HIP code.
 */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define MAXR 8
#define SLOTS 64
#define SLOT_BYTES (1 << 18) /* per rank and collective; the tests use 64 KiB */
#define QMAX 256

/* One process per rank: the shared file. */
typedef struct {
  int joined;
  long arrived[SLOTS][MAXR]; /* generation + 1 that rank r deposited in slot g % SLOTS */
  unsigned char data[SLOTS][MAXR][SLOT_BYTES];
} shared_t;

typedef struct {
  int coll; /* 0 all_reduce, 1 all_gather */
  long gen;
  void *recv;
  size_t count;
  int dtype;
  int never; /* fault: never completes */
} pending_t;

typedef struct {
  int pending_forever;
  pending_t q[QMAX];
  int head, tail;
  struct comm *comm;
} stream_t;
typedef struct { double t; } event_t;
typedef struct comm { int rank, nranks, dev; shared_t *shm; long gen; } comm_t;
typedef struct { char internal[128]; } uid_t_;

typedef struct {
  int coll; /* 0 all_reduce, 1 all_gather */
  const void *send;
  void *recv;
  size_t count;
  int dtype;
  comm_t *comm;
  stream_t *stream;
} op_t;

static int last_error;
static int in_group;
static op_t ops[MAXR];
static int nops;
static long calls;

static const char *fault(void) { const char *f = getenv("FAKENCCL_FAULT"); return f ? f : ""; }
static long fault_arg(const char *name) {
  size_t n = strlen(name);
  if (strncmp(fault(), name, n) == 0 && fault()[n] == ':') return atol(fault() + n + 1);
  return -1;
}

/* ---------------------------------------------------------------- runtime */
int hipGetDeviceCount(int *n) { *n = 2; return 0; }
int hipSetDevice(int d) { return (d < 0 || d >= 2) ? (last_error = 101) : 0; }
int hipMalloc(void **p, size_t n) { *p = malloc(n); return *p ? 0 : (last_error = 2); }
int hipFree(void *p) { free(p); return 0; }
int hipMemcpy(void *d, const void *s, size_t n, int kind) { (void)kind; memcpy(d, s, n); return 0; }
int hipMemset(void *d, int v, size_t n) { memset(d, v, n); return 0; }
int hipStreamCreate(stream_t **s) { *s = calloc(1, sizeof(stream_t)); return 0; }
static int progress(stream_t *s); /* below: completes one-process-per-rank collectives */
int hipStreamQuery(stream_t *s) { return s->pending_forever || !progress(s) ? 600 : 0; }
int hipStreamSynchronize(stream_t *s) {
  while (s->pending_forever || !progress(s)) { struct timespec t = {0, 1000000}; nanosleep(&t, 0); }
  return 0;
}
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9; }
int hipEventCreate(event_t **e) { *e = calloc(1, sizeof(event_t)); return 0; }
int hipEventRecord(event_t *e, stream_t *s) { (void)s; e->t = now(); return 0; }
int hipEventElapsedTime(float *ms, event_t *a, event_t *b) { *ms = (float)((b->t - a->t) * 1e3); return 0; }
const char *hipGetErrorString(int e) {
  switch (e) {
    case 0: return "no error";
    case 401: return "the operation cannot be performed in the present state";
    case 600: return "device not ready";
    default: return "unknown error";
  }
}
int hipGetLastError(void) { int e = last_error; last_error = 0; return e; }
int hipDeviceGetAttribute(int *v, int attr, int dev) {
  (void)dev;
  if (attr != 15) return (last_error = 1);
  *v = strcmp(fault(), "hostcall") == 0 ? 0 : 1;
  return 0;
}

/* ---------------------------------------------------------------- element arithmetic */
static float f16_to_f32(uint16_t h) {
  uint32_t s = (uint32_t)(h & 0x8000) << 16, e = (h >> 10) & 0x1f, m = h & 0x3ff, b;
  if (e == 0 && m == 0) b = s; /* the inputs are normal numbers or zero */
  else b = s | ((e + 112) << 23) | (m << 13);
  float f; memcpy(&f, &b, 4); return f;
}
static uint16_t f32_to_f16(float f) { /* exact values only: the sums are representable */
  uint32_t b; memcpy(&b, &f, 4);
  uint32_t s = (b >> 16) & 0x8000, e = (b >> 23) & 0xff, m = b & 0x7fffff;
  if (e == 0) return (uint16_t)s;
  return (uint16_t)(s | ((e - 112) << 10) | (m >> 13));
}
static float load(int dtype, const void *p, size_t i) {
  if (dtype == 7) return ((const float *)p)[i];
  uint16_t h = ((const uint16_t *)p)[i];
  if (dtype == 6) return f16_to_f32(h);
  uint32_t b = (uint32_t)h << 16; float f; memcpy(&f, &b, 4); return f;
}
static void store(int dtype, void *p, size_t i, float v) {
  if (dtype == 7) { ((float *)p)[i] = v; return; }
  if (dtype == 6) { ((uint16_t *)p)[i] = f32_to_f16(v); return; }
  uint32_t b; memcpy(&b, &v, 4); ((uint16_t *)p)[i] = (uint16_t)(b >> 16);
}
static size_t esize(int dtype) { return dtype == 7 ? 4 : 2; }

/* ---------------------------------------------------------------- NCCL API */
int ncclGetVersion(int *v) { *v = 22809; return 0; }
int ncclGetUniqueId(uid_t_ *u) {
  memset(u, 0, sizeof *u);
  snprintf(u->internal, sizeof u->internal, "fakenccl-%d-%ld", (int)getpid(), (long)time(0));
  return 0;
}
int ncclCommInitRank(comm_t **c, int n, uid_t_ id, int r) {
  if (n > MAXR || r < 0 || r >= n) return 4;
  char path[200];
  id.internal[100] = 0;
  snprintf(path, sizeof path, "/dev/shm/%s", id.internal);
  int fd = open(path, O_RDWR | O_CREAT, 0600);
  if (fd < 0 || ftruncate(fd, sizeof(shared_t)) != 0) return 2;
  shared_t *shm = mmap(0, sizeof(shared_t), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (shm == MAP_FAILED) return 2;
  /* Like NCCL, block until every rank has joined. */
  __atomic_add_fetch(&shm->joined, 1, __ATOMIC_SEQ_CST);
  while (__atomic_load_n(&shm->joined, __ATOMIC_SEQ_CST) < n) { struct timespec t = {0, 1000000}; nanosleep(&t, 0); }
  if (r == 0) unlink(path); /* every rank has it mapped now */
  comm_t *cm = calloc(1, sizeof(comm_t));
  cm->rank = r; cm->nranks = n; cm->shm = shm;
  *c = cm;
  return 0;
}
int ncclCommInitAll(comm_t **comms, int n, const int *devs) {
  if (n > MAXR) return 4;
  for (int i = 0; i < n; i++) {
    comms[i] = calloc(1, sizeof(comm_t));
    comms[i]->rank = i; comms[i]->nranks = n; comms[i]->dev = devs ? devs[i] : i;
  }
  return 0;
}
int ncclCommDestroy(comm_t *c) {
  if (c->shm) munmap(c->shm, sizeof(shared_t));
  free(c);
  return 0;
}
const char *ncclGetErrorString(int r) {
  switch (r) {
    case 0: return "no error";
    case 1: return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
    default: return "invalid usage";
  }
}
const char *ncclGetLastError(comm_t *c) { (void)c; return ""; }
int ncclGroupStart(void) { in_group++; return 0; }

static void run_ops(void) {
  int n = ops[0].comm->nranks;
  if (nops < n) { /* a rank never joined: the collective never finishes */
    for (int i = 0; i < nops; i++) ops[i].stream->pending_forever = 1;
    nops = 0; return;
  }
  size_t es = esize(ops[0].dtype);
  if (ops[0].coll == 0) {
    size_t cnt = ops[0].count;
    float *sum = calloc(cnt ? cnt : 1, sizeof(float));
    for (int r = 0; r < n; r++)
      for (size_t i = 0; i < cnt; i++) sum[i] += load(ops[r].dtype, ops[r].send, i);
    for (int r = 0; r < n; r++)
      for (size_t i = 0; i < cnt; i++) store(ops[r].dtype, ops[r].recv, i, sum[i]);
    long flip = fault_arg("flip");
    if (flip >= 0 && (size_t)flip < cnt) ((unsigned char *)ops[1].recv)[flip * es] ^= 1;
    free(sum);
  } else {
    size_t slot = ops[0].count * es;
    unsigned char *all = malloc(slot * n + 1);
    for (int r = 0; r < n; r++) {
      int from = strcmp(fault(), "rank0-everywhere") == 0 ? 0 : ops[r].comm->rank;
      memcpy(all + (size_t)ops[r].comm->rank * slot, ops[from].send, slot);
    }
    for (int r = 0; r < n; r++) memcpy(ops[r].recv, all, slot * n);
    free(all);
  }
  nops = 0;
}

/* One process per rank: deposit this rank's data for the comm's next generation and queue the
 * completion on the stream. */
static int enqueue_shared(op_t op, int never) {
  comm_t *c = op.comm;
  stream_t *s = op.stream;
  size_t bytes = op.count * esize(op.dtype);
  if (bytes > SLOT_BYTES || (s->tail + 1) % QMAX == s->head) return 4;
  long g = c->gen++;
  memcpy(c->shm->data[g % SLOTS][c->rank], op.send, bytes);
  __atomic_store_n(&c->shm->arrived[g % SLOTS][c->rank], g + 1, __ATOMIC_SEQ_CST);
  pending_t p = {op.coll, g, op.recv, op.count, op.dtype, never};
  s->comm = c;
  s->q[s->tail] = p;
  s->tail = (s->tail + 1) % QMAX;
  return 0;
}

/* Complete the stream's queued collectives whose every rank has deposited; 1 when none is left. */
static int progress(stream_t *s) {
  while (s->head != s->tail) {
    pending_t *p = &s->q[s->head];
    comm_t *c = s->comm;
    if (p->never) return 0;
    int slot = (int)(p->gen % SLOTS);
    for (int r = 0; r < c->nranks; r++)
      if (__atomic_load_n(&c->shm->arrived[slot][r], __ATOMIC_SEQ_CST) != p->gen + 1) return 0;
    size_t es = esize(p->dtype);
    if (p->coll == 0) {
      for (size_t i = 0; i < p->count; i++) {
        float sum = 0;
        for (int r = 0; r < c->nranks; r++) sum += load(p->dtype, c->shm->data[slot][r], i);
        store(p->dtype, p->recv, i, sum);
      }
      long flip = fault_arg("flip");
      if (flip >= 0 && (size_t)flip < p->count && c->rank == 1) ((unsigned char *)p->recv)[flip * es] ^= 1;
    } else {
      size_t bytes = p->count * es;
      for (int r = 0; r < c->nranks; r++) {
        int from = strcmp(fault(), "rank0-everywhere") == 0 ? 0 : r;
        memcpy((unsigned char *)p->recv + (size_t)r * bytes, c->shm->data[slot][from], bytes);
      }
    }
    s->head = (s->head + 1) % QMAX;
  }
  return 1;
}

static int enqueue(op_t op) {
  long k = calls++;
  if (strcmp(fault(), "hostcall") == 0) {
    printf("fake:1:1 [0] enqueue.cc:2061 NCCL WARN HIP failure 'the operation cannot be performed in the present state'\n");
    fflush(stdout);
    last_error = 401;
    return 1;
  }
  if (fault_arg("abort") == k) abort();
  if (op.comm->shm) return enqueue_shared(op, fault_arg("hang") == k);
  if (fault_arg("hang") == k) { op.stream->pending_forever = 1; return 0; }
  ops[nops++] = op;
  if (!in_group) run_ops();
  return 0;
}

int ncclAllReduce(const void *s, void *r, size_t count, int dtype, int op, comm_t *c, stream_t *st) {
  (void)op;
  op_t o = {0, s, r, count, dtype, c, st};
  return enqueue(o);
}
int ncclAllGather(const void *s, void *r, size_t count, int dtype, comm_t *c, stream_t *st) {
  op_t o = {1, s, r, count, dtype, c, st};
  return enqueue(o);
}
int ncclGroupEnd(void) {
  if (--in_group == 0 && nops > 0) run_ops();
  return 0;
}
