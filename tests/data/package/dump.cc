// The C++-mangled part of the stand-in librccl.so.1: torch imports ncclCommDump with C++ linkage
// (it takes an unordered_map), so its symbol is _Z12ncclCommDump… (PyTorch's `torch/csrc/cuda/nccl.cpp`).
// Left out of the "old" fixture (-DFIXTURE_OLD).
#include <string>
#include <unordered_map>

struct ncclComm;
typedef int ncclResult_t;

#ifndef FIXTURE_OLD
ncclResult_t ncclCommDump(ncclComm *comm, std::unordered_map<std::string, std::string> &map) {
  (void)comm;
  map["rcclfix"] = "fixture";
  return 0;
}
#else
// An older RCCL with the same function name but another signature: the gate must not accept it.
ncclResult_t ncclCommDump(ncclComm *comm) {
  (void)comm;
  return 0;
}
#endif
