# Installs the libraries, headers and a CMake package so that a user's project can
#   find_package(cadre REQUIRED)
#   target_link_libraries(app PRIVATE cadre::cadre)
include(CMakePackageConfigHelpers)

get_property(cadre_libraries GLOBAL PROPERTY CADRE_LIBRARIES)
install(TARGETS ${cadre_libraries} cadre
  EXPORT cadreTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})

# The public API is include/cadre and nothing else (tests/install checks the list).
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/cadre DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(FILES ${CMAKE_BINARY_DIR}/include/cadre/version.h
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/cadre)

install(EXPORT cadreTargets NAMESPACE cadre:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/cadre)
configure_package_config_file(cmake/cadreConfig.cmake.in
  ${CMAKE_BINARY_DIR}/cadreConfig.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/cadre)
write_basic_package_version_file(${CMAKE_BINARY_DIR}/cadreConfigVersion.cmake
  COMPATIBILITY SameMajorVersion)
install(FILES ${CMAKE_BINARY_DIR}/cadreConfig.cmake ${CMAKE_BINARY_DIR}/cadreConfigVersion.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/cadre)
