/* Stand-in for librccl.so.1 in the package tests: the C part of the NCCL API that torch 2.11
 * imports (PyTorch's `torch/csrc/cuda/nccl.cpp`), each a stub. Built by tests/it/package.rs with
 *   gcc -shared -fPIC -Wl,-soname,librccl.so.1 -DFIXTURE_VERSION=N [-DFIXTURE_OLD] rccl.c dump.cc
 * FIXTURE_VERSION is what ncclGetVersion reports, so a test can tell which copy got loaded.
 * FIXTURE_OLD leaves out ncclCommShrink, as an RCCL older than the consumer would. */
#ifndef FIXTURE_VERSION
#define FIXTURE_VERSION 21304
#endif

typedef int ncclResult_t;

ncclResult_t ncclGetVersion(int *version) {
  *version = FIXTURE_VERSION;
  return 0;
}

#define STUB(name) \
  ncclResult_t name(void) { return 0; } \
  ncclResult_t p##name(void) { return 0; }

STUB(ncclAllGather)
STUB(ncclAllReduce)
STUB(ncclAllToAll)
STUB(ncclAllToAllv)
STUB(ncclBcast)
STUB(ncclBroadcast)
STUB(ncclCommAbort)
STUB(ncclCommCount)
STUB(ncclCommDeregister)
STUB(ncclCommDestroy)
STUB(ncclCommFinalize)
STUB(ncclCommGetAsyncError)
STUB(ncclCommInitAll)
STUB(ncclCommInitRank)
STUB(ncclCommInitRankConfig)
STUB(ncclCommInitRankScalable)
STUB(ncclCommRegister)
#ifndef FIXTURE_OLD
STUB(ncclCommShrink)
#endif
STUB(ncclCommSplit)
STUB(ncclCommUserRank)
STUB(ncclCommWindowDeregister)
STUB(ncclCommWindowRegister)
STUB(ncclGetErrorString)
STUB(ncclGetLastError)
STUB(ncclGetUniqueId)
STUB(ncclGroupEnd)
STUB(ncclGroupSimulateEnd)
STUB(ncclGroupStart)
STUB(ncclMemAlloc)
STUB(ncclMemFree)
STUB(ncclRecv)
STUB(ncclRedOpCreatePreMulSum)
STUB(ncclRedOpDestroy)
STUB(ncclReduce)
STUB(ncclReduceScatter)
STUB(ncclSend)

/* Not part of the API: must not be gated. */
int rcclfix_fixture_internal_helper(void) { return FIXTURE_VERSION; }
