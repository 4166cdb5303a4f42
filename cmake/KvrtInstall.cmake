# `cmake --install` gives headers, the static libraries and a CMake package, so that
# another project can `find_package(kvrt)` and link `kvrt::kvrt`.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

get_property(kvrt_libraries GLOBAL PROPERTY KVRT_LIBRARIES)
add_library(kvrt INTERFACE)
target_link_libraries(kvrt INTERFACE ${kvrt_libraries})
install(TARGETS kvrt ${kvrt_libraries} EXPORT kvrtTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/src/kvrt DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
        FILES_MATCHING PATTERN "*.h"
        PATTERN "test" EXCLUDE PATTERN "kernels" EXCLUDE)
install(EXPORT kvrtTargets NAMESPACE kvrt:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/kvrt)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/kvrtConfig.cmake.in
  ${PROJECT_BINARY_DIR}/kvrtConfig.cmake INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/kvrt)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/kvrtConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/kvrtConfig.cmake ${PROJECT_BINARY_DIR}/kvrtConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/kvrt)
