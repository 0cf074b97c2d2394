# Keeps the strategies' files small enough to read in one sitting (docs/ARCHITECTURE.md): no
# source or header under strategies/ longer than 400 lines. Run by CTest as
# LayoutTest.StrategyFilesStayUnder400Lines, or by hand:
#   cmake -DSOURCE_DIR=. -P cmake/CheckFileSizes.cmake
cmake_minimum_required(VERSION 3.25)
if(NOT SOURCE_DIR)
  set(SOURCE_DIR ${CMAKE_CURRENT_LIST_DIR}/..)
endif()
get_filename_component(SOURCE_DIR ${SOURCE_DIR} ABSOLUTE)
set(limit 400)
file(GLOB_RECURSE files RELATIVE ${SOURCE_DIR} ${SOURCE_DIR}/strategies/*.cc
     ${SOURCE_DIR}/strategies/*.h ${SOURCE_DIR}/include/cadre/strategies/*.h)
set(too_long "")
foreach(file ${files})
  file(READ ${SOURCE_DIR}/${file} text)
  string(REGEX MATCHALL "\n" newlines "${text}")
  list(LENGTH newlines count)
  if(count GREATER limit)
    list(APPEND too_long "${file}: ${count} lines")
  endif()
endforeach()
if(too_long)
  list(JOIN too_long "\n  " listed)
  message(FATAL_ERROR "files past ${limit} lines (split them by what they do):\n  ${listed}")
endif()
list(LENGTH files checked)
message(STATUS "${checked} files under strategies/, none past ${limit} lines")
