# cadre_add_library(NAME [INTERFACE] SOURCES...): one library per top-level folder (core/ has
# one per layer, and cadre_core, an INTERFACE library, for all of them), with include paths
# rooted at the repository root ("cadre/tensor/tensor.h") in the build and under
# include/cadre once installed.
function(cadre_add_library name)
  add_library(${name} ${ARGN})
  add_library(cadre::${name} ALIAS ${name})
  get_target_property(type ${name} TYPE)
  if(type STREQUAL "INTERFACE_LIBRARY")
    set(scope INTERFACE)
  else()
    set(scope PUBLIC)
    set_target_properties(${name} PROPERTIES
      VERSION ${PROJECT_VERSION} SOVERSION ${PROJECT_VERSION_MAJOR})
  endif()
  target_include_directories(${name} ${scope}
    $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>
    $<BUILD_INTERFACE:${PROJECT_BINARY_DIR}/include>
    $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}>
    $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
  set_property(GLOBAL APPEND PROPERTY CADRE_LIBRARIES ${name})
endfunction()
