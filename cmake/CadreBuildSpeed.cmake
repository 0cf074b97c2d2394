# Unity builds: each library and test binary compiles its sources in batches of 8, one
# translation unit per batch. The sources of a folder include the same standard, glog,
# protobuf, gRPC and Cadre headers, and instantiate the same inline code; parsed and
# compiled once per batch instead of once per file, a cold build takes well under half the
# time. Sources with their own compile options (the CPU kernels) stay on their own.
# Included before any target is defined. ./dev configures with CADRE_UNITY_BUILD=ON; a build
# configured by hand compiles file by file unless asked, which also shows a file that
# misses an include its batch happened to provide.
option(CADRE_UNITY_BUILD "Compile each target's sources in batches (unity build)" OFF)
if(CADRE_UNITY_BUILD)
  set(CMAKE_UNITY_BUILD ON)
  set(CMAKE_UNITY_BUILD_BATCH_SIZE 8)
endif()

# Generated sources (protobuf's and gRPC's) stay out of the batches: each defines the same
# file-local tables. So do the kernels (cadre_kernels): each file is one op family's loops,
# heavy to compile on its own, where batches would only lengthen the longest compile. Call
# once every target is defined.
function(cadre_unity_exceptions)
  if(NOT CADRE_UNITY_BUILD)
    return()
  endif()
  set_target_properties(cadre_kernels PROPERTIES UNITY_BUILD OFF)
  set(directories ${CMAKE_SOURCE_DIR})
  while(directories)
    list(POP_FRONT directories directory)
    get_property(children DIRECTORY ${directory} PROPERTY SUBDIRECTORIES)
    list(APPEND directories ${children})
    get_property(targets DIRECTORY ${directory} PROPERTY BUILDSYSTEM_TARGETS)
    foreach(target IN LISTS targets)
      get_target_property(sources ${target} SOURCES)
      if(NOT sources)
        continue()
      endif()
      list(FILTER sources INCLUDE REGEX "\\.pb\\.cc$")
      if(sources)
        set_source_files_properties(${sources} TARGET_DIRECTORY ${target}
                                    PROPERTIES SKIP_UNITY_BUILD_INCLUSION ON)
      endif()
    endforeach()
  endwhile()
endfunction()
