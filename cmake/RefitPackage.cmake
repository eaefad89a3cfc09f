# find_package(refit) support: exported targets refit::<module> plus a config that finds
# the dependencies those targets expose.
include(CMakePackageConfigHelpers)
set(REFIT_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/refit)
install(EXPORT refitTargets NAMESPACE refit:: DESTINATION ${REFIT_CMAKE_DIR})
get_property(REFIT_UCX_BUILT GLOBAL PROPERTY REFIT_UCX_BUILT)
get_property(REFIT_NCCL_BUILT GLOBAL PROPERTY REFIT_NCCL_BUILT)
get_property(REFIT_MPI_BUILT GLOBAL PROPERTY REFIT_MPI_BUILT)
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/refitConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/refitConfig.cmake INSTALL_DESTINATION ${REFIT_CMAKE_DIR})
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/refitConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/refitConfig.cmake
              ${CMAKE_CURRENT_BINARY_DIR}/refitConfigVersion.cmake DESTINATION ${REFIT_CMAKE_DIR})
get_property(modules GLOBAL PROPERTY REFIT_MODULES)
message(STATUS "refit modules: ${modules}")
