# A library-only build: no refit command, no tests or benchmarks, MPI and CLI11 hidden from CMake.
# It must configure and build, install the header of each backend exactly when it built the
# backend (the NCCL and UCX executors', the MPI bootstrap's), and the installed package must not
# ask for MPI.
#
# With BUILD_DIR, that build is the Python wheel's (pyproject.toml configures it so, with UCX
# found and NCCL off; tests/python/build_wheel.sh builds it): its tree is checked as it is.
# Without, the libraries are configured and built here with every backend off.
file(REMOVE_RECURSE ${WORK_DIR})
include(${CMAKE_CURRENT_LIST_DIR}/run_step.cmake)
if(BUILD_DIR)
  file(READ ${BUILD_DIR}/CMakeCache.txt cache)
  foreach(setting "REFIT_BUILD_CLI:BOOL=OFF" "REFIT_BUILD_TESTS:BOOL=OFF" "CMAKE_DISABLE_FIND_PACKAGE_MPI:.*=ON"
                  "CMAKE_DISABLE_FIND_PACKAGE_CLI11:.*=ON")
    if(NOT cache MATCHES "\n${setting}\n")
      message(FATAL_ERROR "${BUILD_DIR} is not a library-only build with MPI and CLI11 hidden (${setting})")
    endif()
  endforeach()
  run(${CMAKE_COMMAND} --build ${BUILD_DIR} --parallel 2)  # up to date: the wheel was built from it
else()
  set(BUILD_DIR ${WORK_DIR}/build)
  run(${CMAKE_COMMAND} -S ${SOURCE_DIR} -B ${BUILD_DIR} -G ${GENERATOR} -DCMAKE_BUILD_TYPE=Release
      -DREFIT_BUILD_CLI=OFF -DREFIT_BUILD_TESTS=OFF -DREFIT_BUILD_BENCH=OFF
      -DREFIT_WITH_UCX=OFF -DREFIT_WITH_NCCL=OFF -DREFIT_WITH_MPI=AUTO
      -DCMAKE_DISABLE_FIND_PACKAGE_MPI=ON -DCMAKE_DISABLE_FIND_PACKAGE_CLI11=ON)
  run(${CMAKE_COMMAND} --build ${BUILD_DIR} --parallel 2)
endif()
run(${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${WORK_DIR}/prefix)
set(prefix ${WORK_DIR}/prefix)
foreach(absent include/refit/executors/mpi_bootstrap.h bin/refit)
  if(EXISTS ${prefix}/${absent})
    message(FATAL_ERROR "a library-only build without that part installed ${absent}")
  endif()
endforeach()
# Each backend's header is installed exactly when its library is.
foreach(backend "ucx:include/refit/executors/ucx_executor.h" "nccl:include/refit/executors/nccl")
  string(REPLACE ":" ";" parts ${backend})
  list(GET parts 0 name)
  list(GET parts 1 header)
  file(GLOB_RECURSE library ${prefix}/*/librefit_executor_${name}.*)
  if(library AND NOT EXISTS ${prefix}/${header})
    message(FATAL_ERROR "the ${name} executor was built but ${header} was not installed")
  elseif(NOT library AND EXISTS ${prefix}/${header})
    message(FATAL_ERROR "the ${name} executor was not built but ${header} was installed")
  endif()
endforeach()
file(GLOB_RECURSE config ${prefix}/*/refitConfig.cmake)
file(READ ${config} text)
if(text MATCHES "find_dependency\\(MPI")
  string(REGEX MATCH "if\\([^)]*\\)\n  set\\(MPI_CXX_SKIP_MPICXX" guard "${text}")
  if(NOT guard MATCHES "if\\(FALSE\\)|if\\(OFF\\)|if\\(0\\)")
    message(FATAL_ERROR "the installed package config looks for MPI although the build has none:\n${text}")
  endif()
endif()
