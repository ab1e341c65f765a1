// Stand-in for libtorch_hip.so: a shared library linked against librccl.so.1 that imports the NCCL
// API torch 2.11 imports, ncclCommDump C++-mangled included. consumer_rccl_version() reports the
// FIXTURE_VERSION of whichever librccl.so.1 the dynamic linker bound it to.
#include <string>
#include <unordered_map>

struct ncclComm;
typedef int ncclResult_t;
ncclResult_t ncclCommDump(ncclComm *comm, std::unordered_map<std::string, std::string> &map);

extern "C" {
ncclResult_t ncclGetVersion(int *version);
#define DECL(name) ncclResult_t name(void);
#define NAMES(X) X(ncclAllGather) X(ncclAllReduce) X(ncclAllToAll) X(ncclAllToAllv) X(ncclBcast) \
  X(ncclBroadcast) X(ncclCommAbort) X(ncclCommCount) X(ncclCommDeregister) X(ncclCommDestroy)    \
  X(ncclCommFinalize) X(ncclCommGetAsyncError) X(ncclCommInitAll) X(ncclCommInitRank)            \
  X(ncclCommInitRankConfig) X(ncclCommInitRankScalable) X(ncclCommRegister) X(ncclCommShrink)    \
  X(ncclCommSplit) X(ncclCommUserRank) X(ncclCommWindowDeregister) X(ncclCommWindowRegister)     \
  X(ncclGetErrorString) X(ncclGetLastError) X(ncclGetUniqueId) X(ncclGroupEnd)                   \
  X(ncclGroupSimulateEnd) X(ncclGroupStart) X(ncclMemAlloc) X(ncclMemFree) X(ncclRecv)           \
  X(ncclRedOpCreatePreMulSum) X(ncclRedOpDestroy) X(ncclReduce) X(ncclReduceScatter) X(ncclSend)
NAMES(DECL)

int consumer_rccl_version(void) {
  int v = -1;
  ncclGetVersion(&v);
  return v;
}

// Reference every import so the linker keeps them undefined in the dynamic symbol table.
#define REF(name) (void *)&name,
void *consumer_imports[] = {NAMES(REF)(void *)&ncclCommDump};
}
