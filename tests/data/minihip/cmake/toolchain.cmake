# Default toolchain file of minihip (see CMakeLists.txt): hipcc as the C++ compiler, and Release flags
# WITHOUT -DNDEBUG set as normal variables, the way RCCL's toolchain file did before ROCm 7.2.
if(NOT DEFINED CMAKE_CXX_COMPILER)
  set(CMAKE_CXX_COMPILER hipcc)
endif()
set(CMAKE_CXX_FLAGS_RELEASE "-O3")
set(CMAKE_CXX_FLAGS_RELWITHDEBINFO "-O3 -g")
