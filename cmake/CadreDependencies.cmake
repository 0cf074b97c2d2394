# Third-party libraries, all from Debian's archive (see README: Dependencies).
find_package(Threads REQUIRED)
find_package(OpenMP REQUIRED)
find_package(gflags CONFIG REQUIRED)
find_package(glog CONFIG REQUIRED)
find_package(ZLIB REQUIRED)
# Protocol Buffers (Debian 3.21, protoc): tf.train.Example and TensorBoard event records.
find_package(Protobuf REQUIRED)
find_package(dnnl CONFIG REQUIRED)
# HDF5 for checkpoints: Debian's serial 1.10 (thread-safe build); needs C among the
# project() languages.
find_package(HDF5 REQUIRED COMPONENTS C)
# OpenSSL (which gRPC links too): the job token's digest, and cadre_launch --tls's certificates.
find_package(OpenSSL REQUIRED)

# OpenBLAS: Debian's libopenblas-dev provides libopenblas.so and cblas.h.
find_library(OPENBLAS_LIBRARY NAMES openblas REQUIRED)
find_path(OPENBLAS_INCLUDE_DIR NAMES cblas.h PATH_SUFFIXES openblas REQUIRED)
add_library(cadre_openblas INTERFACE)
target_link_libraries(cadre_openblas INTERFACE ${OPENBLAS_LIBRARY})
target_include_directories(cadre_openblas SYSTEM INTERFACE ${OPENBLAS_INCLUDE_DIR})

if(CADRE_BUILD_TESTS)
  find_package(GTest REQUIRED)
  find_package(benchmark CONFIG REQUIRED)
endif()

# The C++ heap: jemalloc (Debian's libjemalloc2) serves the small objects every op and every
# input element allocates (tensor headers, shapes, feature maps) from per-thread caches.
# glibc's per-thread cache holds 7 blocks a size, so a batch's worth of them goes through its
# locked bins: the canned wide & deep model trained about 1.5x faster with it
# (docs/BENCHMARKS.md#canned-estimators-against-tfestimator). Tensor data has its own caching
# allocator either way. jemalloc rather than tcmalloc, as fast here, because tcmalloc writes
# a report to stderr for every allocation past 1 GiB (a large embedding table). AUTO:
# jemalloc when installed, except in sanitizer builds (the sanitizers bring their own).
set(CADRE_JEMALLOC AUTO CACHE STRING "Link jemalloc for the C++ heap: AUTO, ON or OFF")
set_property(CACHE CADRE_JEMALLOC PROPERTY STRINGS AUTO ON OFF)
set(CADRE_JEMALLOC_LIBRARY "")
if(NOT CADRE_JEMALLOC STREQUAL "OFF" AND NOT CADRE_SANITIZE)
  find_library(CADRE_JEMALLOC_PATH NAMES jemalloc libjemalloc.so.2)
  if(CADRE_JEMALLOC_PATH)
    set(CADRE_JEMALLOC_LIBRARY ${CADRE_JEMALLOC_PATH})
  elseif(CADRE_JEMALLOC STREQUAL "ON")
    message(FATAL_ERROR "CADRE_JEMALLOC=ON: libjemalloc not found (Debian: libjemalloc2)")
  else()
    message(STATUS "jemalloc not found: the C++ heap is glibc's (Debian: libjemalloc2)")
  endif()
endif()
