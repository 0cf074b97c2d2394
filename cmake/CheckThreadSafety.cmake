# Compiles every source that uses cadre::Mutex (include/cadre/base/mutex.h) with clang's
# thread-safety analysis, so that a CADRE_GUARDED_BY member read or written without its mutex
# fails the test (ThreadSafetyTest.*). GCC, which builds Cadre, ignores the annotations.
#
#   cmake -DBUILD_DIR=build -DSOURCE_DIR=. -DCLANG=/usr/bin/clang++ -P cmake/CheckThreadSafety.cmake
#
# -DSHARD=i -DSHARDS=n checks every n-th of those sources from the i-th on, so that CTest
# can run the shards in parallel.
# The flags come from the build's compile_commands.json, with the compiler replaced.
cmake_minimum_required(VERSION 3.25)
foreach(var BUILD_DIR SOURCE_DIR CLANG)
  if(NOT ${var})
    message(FATAL_ERROR "CheckThreadSafety.cmake needs -D${var}=...")
  endif()
endforeach()
get_filename_component(SOURCE_DIR ${SOURCE_DIR} ABSOLUTE)
if(NOT SHARDS)
  set(SHARD 0)
  set(SHARDS 1)
endif()
set(index -1)

file(READ ${BUILD_DIR}/compile_commands.json commands)
string(JSON count LENGTH "${commands}")
math(EXPR last "${count} - 1")
set(checked "")
set(failures "")
foreach(i RANGE ${last})
  string(JSON entry_file GET "${commands}" ${i} file)
  # A unity build compiles batches (<build>/.../Unity/unity_N_cxx.cxx), each including its
  # sources by absolute path: those are checked one by one with the batch's flags.
  if(entry_file MATCHES "/Unity/unity_[0-9]+_cxx\\.cxx$")
    file(STRINGS ${entry_file} included REGEX "^#include \"")
    set(sources "")
    foreach(line IN LISTS included)
      string(REGEX REPLACE "^#include \"([^\"]+)\".*" "\\1" source "${line}")
      list(APPEND sources ${source})
    endforeach()
  else()
    set(sources ${entry_file})
  endif()
  foreach(file IN LISTS sources)
    if(NOT file MATCHES "\\.cc$" OR NOT file MATCHES "^${SOURCE_DIR}/" OR file MATCHES "^${BUILD_DIR}/")
      continue()
    endif()
    if(file IN_LIST checked)
      continue()
    endif()
    file(STRINGS ${file} uses REGEX "Mutex|CADRE_GUARDED_BY|CADRE_REQUIRES" LIMIT_COUNT 1)
    if(NOT uses)
      continue()
    endif()
    list(APPEND checked ${file})
    math(EXPR index "${index} + 1")
    math(EXPR mine "${index} % ${SHARDS}")
    if(NOT mine EQUAL SHARD)
      continue()
    endif()
    string(JSON command GET "${commands}" ${i} command)
    separate_arguments(arguments UNIX_COMMAND "${command}")
    # Keep the defines, include paths and language flags; drop the compiler (and ccache),
    # the output and GCC-only options.
    set(flags "")
    set(previous "")
    foreach(argument IN LISTS arguments)
      if(previous STREQUAL "-isystem")
        list(APPEND flags -isystem ${argument})
      elseif(argument MATCHES "^-(D|I|std=|march=|fopenmp)")
        list(APPEND flags ${argument})
      endif()
      set(previous ${argument})
    endforeach()
    execute_process(
      COMMAND ${CLANG} ${flags} -fsyntax-only -Wno-everything -Wthread-safety
              -Werror=thread-safety ${file}
      RESULT_VARIABLE status ERROR_VARIABLE errors OUTPUT_QUIET)
    if(NOT status EQUAL 0)
      list(APPEND failures "${errors}")
    endif()
  endforeach()
endforeach()

if(index LESS 10)
  message(FATAL_ERROR "only ${index} source(s) use cadre::Mutex: is compile_commands.json "
                      "in ${BUILD_DIR} complete?")
endif()
math(EXPR checked_count "(${index} + ${SHARDS} - ${SHARD}) / ${SHARDS}")
if(failures)
  list(JOIN failures "\n" text)
  message(FATAL_ERROR "clang's thread-safety analysis failed:\n${text}")
endif()
message(STATUS "${checked_count} sources pass clang's thread-safety analysis")
