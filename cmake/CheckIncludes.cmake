# Checks the include graph against the layering in docs/ARCHITECTURE.md (run by CTest as
# LayeringTest.*, or by hand: cmake -DSOURCE_DIR=. -P cmake/CheckIncludes.cmake).
#
#   core <- io, checkpoint <- strategies (core, io) <- estimator <- keras, serving <- tools, examples
#   core, io <- feature_column <- estimator (and above)
#
# and, inside core (core/X and include/cadre/X are layer X):
#
#   base <- runtime, random <- tensor <- kernels <- backend <- autodiff <- ops <- nn
#
# built as the libraries cadre_base, cadre_tensor (runtime, random, tensor), cadre_kernels
# (kernels, backend), cadre_autodiff, cadre_ops and cadre_nn (core/CMakeLists.txt). backend/
# implements the dispatch tables that kernels/ declares; the layers above call kernels
# through those tables, never a backend's own headers.
#
# - A file may include project headers only from its own layer and the layers below it.
# - Public headers (include/cadre) include only other public headers: they are installed,
#   and what they include must be installed too.
# - Examples and the install consumer are user code: public headers and their own only.
# - Each module's tests include their module, the layers below it and tests/support;
#   tests that need more live in tests/integration.
# Every violation is listed, then the script fails.
cmake_minimum_required(VERSION 3.25)
if(NOT SOURCE_DIR)
  set(SOURCE_DIR ${CMAKE_CURRENT_LIST_DIR}/..)
endif()
get_filename_component(SOURCE_DIR ${SOURCE_DIR} ABSOLUTE)

# The layer a repository path belongs to ("" for paths outside the library layers).
function(layer_of path out)
  set(layer "")
  if(path MATCHES "^(include/)?cadre/(base|runtime|tensor|autodiff|ops|random|nn)/")
    set(layer core)
  elseif(path MATCHES "^(include/)?cadre/(io|feature_column|checkpoint|strategies|estimator|keras|serving)/")
    set(layer ${CMAKE_MATCH_2})
  elseif(path MATCHES "^(core|io|feature_column|checkpoint|strategies|estimator|keras|serving)/")
    set(layer ${CMAKE_MATCH_1})
  elseif(path MATCHES "^tests/(core|io|feature_column|checkpoint|strategies|estimator|keras|serving)/")
    set(layer test_${CMAKE_MATCH_1})
  elseif(path MATCHES "^(tools|examples)/")
    set(layer ${CMAKE_MATCH_1})
  endif()
  set(${out} ${layer} PARENT_SCOPE)
endfunction()

# The layer inside core of a core file or of an included core header ("" for others).
function(core_layer_of path out)
  set(layer "")
  if(path MATCHES "^(include/)?cadre/(base|runtime|random|tensor|autodiff|ops|nn)/")
    set(layer ${CMAKE_MATCH_2})
  elseif(path MATCHES "^core/(base|runtime|random|tensor|kernels|backend|autodiff|ops|nn)/")
    set(layer ${CMAKE_MATCH_1})
  endif()
  set(${out} ${layer} PARENT_SCOPE)
endfunction()

set(allowed_core core)
set(allowed_io core io)
set(allowed_feature_column core io feature_column)
set(allowed_checkpoint core checkpoint)
set(allowed_strategies core io strategies)
set(allowed_estimator core io feature_column checkpoint strategies estimator)
set(allowed_keras core io feature_column checkpoint strategies estimator keras)
set(allowed_serving core io feature_column checkpoint strategies estimator serving)
set(allowed_tools core io feature_column checkpoint strategies estimator keras serving tools examples)

set(core_allowed_base base)
set(core_allowed_runtime base runtime)
set(core_allowed_random base random)
set(core_allowed_tensor base runtime random tensor)
set(core_allowed_kernels ${core_allowed_tensor} kernels)
set(core_allowed_backend ${core_allowed_kernels} backend)
set(core_allowed_autodiff ${core_allowed_kernels} autodiff)
set(core_allowed_ops ${core_allowed_autodiff} ops)
set(core_allowed_nn ${core_allowed_ops} nn)

file(GLOB_RECURSE files RELATIVE ${SOURCE_DIR}
  ${SOURCE_DIR}/include/*.h
  ${SOURCE_DIR}/core/*.h ${SOURCE_DIR}/core/*.cc ${SOURCE_DIR}/core/*.cu
  ${SOURCE_DIR}/io/*.h ${SOURCE_DIR}/io/*.cc
  ${SOURCE_DIR}/feature_column/*.h ${SOURCE_DIR}/feature_column/*.cc
  ${SOURCE_DIR}/checkpoint/*.h ${SOURCE_DIR}/checkpoint/*.cc
  ${SOURCE_DIR}/strategies/*.h ${SOURCE_DIR}/strategies/*.cc
  ${SOURCE_DIR}/estimator/*.h ${SOURCE_DIR}/estimator/*.cc
  ${SOURCE_DIR}/keras/*.h ${SOURCE_DIR}/keras/*.cc
  ${SOURCE_DIR}/serving/*.h ${SOURCE_DIR}/serving/*.cc
  ${SOURCE_DIR}/tools/*.h ${SOURCE_DIR}/tools/*.cc
  ${SOURCE_DIR}/examples/*.h ${SOURCE_DIR}/examples/*.cc
  ${SOURCE_DIR}/tests/*.h ${SOURCE_DIR}/tests/*.cc)

# Sets `out` to why `file` (in `layer`) may not include `target`, or leaves it empty.
function(check_layers file layer target out)
  layer_of(${target} target_layer)
  if(target MATCHES "^cadre/cadre.h$")
    set(target_layer keras)
  endif()
  set(own_layer ${layer})
  if(layer MATCHES "^test_(.*)")
    set(own_layer ${CMAKE_MATCH_1})
  endif()
  if(own_layer STREQUAL "examples")
    set(own_layer tools)
  endif()
  if(own_layer AND target_layer AND NOT target_layer IN_LIST allowed_${own_layer})
    set(${out} "${own_layer} may not include ${target_layer}" PARENT_SCOPE)
  elseif(layer STREQUAL "core")
    core_layer_of(${file} own_core_layer)
    core_layer_of(${target} target_core_layer)
    if(own_core_layer AND target_core_layer AND
       NOT target_core_layer IN_LIST core_allowed_${own_core_layer})
      set(${out} "core's ${own_core_layer} may not include core's ${target_core_layer}"
          PARENT_SCOPE)
    endif()
  endif()
endfunction()

set(violations "")
set(checked 0)
foreach(file IN LISTS files)
  layer_of(${file} layer)
  file(STRINGS ${SOURCE_DIR}/${file} includes REGEX "^#include [\"<](cadre|core|io|feature_column|checkpoint|strategies|estimator|keras|serving|tools|examples|tests)/")
  foreach(line IN LISTS includes)
    string(REGEX REPLACE "^#include [\"<]([^\">]+)[\">].*" "\\1" target "${line}")
    math(EXPR checked "${checked} + 1")
    set(why "")
    if(file MATCHES "^include/cadre/")
      if(NOT target MATCHES "^cadre/")
        set(why "a public header includes a private one")
      else()
        check_layers("${file}" "${layer}" "${target}" why)
      endif()
    elseif(file MATCHES "^(examples|tests/install)/")
      if(NOT target MATCHES "^(cadre|examples)/")
        set(why "user code includes a private header")
      endif()
    elseif(file MATCHES "^tests/integration/|^tests/bench/")
      # Integration tests and benchmarks may use every layer.
    else()
      if(target MATCHES "^tests/")
        if(NOT target MATCHES "^tests/support/" AND NOT file MATCHES "^tests/")
          set(why "library code includes a test header")
        endif()
        if(file MATCHES "^tests/([a-z_]+)/")
          set(test_folder ${CMAKE_MATCH_1})
          if(NOT target MATCHES "^tests/(support|${test_folder})/")
            set(why "a module's tests include another module's test helpers")
          endif()
        endif()
      else()
        check_layers("${file}" "${layer}" "${target}" why)
      endif()
    endif()
    if(why)
      list(APPEND violations "${file}: #include \"${target}\": ${why}")
    endif()
  endforeach()
endforeach()

list(LENGTH files file_count)
if(violations)
  list(LENGTH violations count)
  list(JOIN violations "\n  " text)
  message(FATAL_ERROR "${count} include(s) break the layering:\n  ${text}")
endif()
message(STATUS "${file_count} files, ${checked} project includes: the layering holds")
