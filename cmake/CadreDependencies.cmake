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
