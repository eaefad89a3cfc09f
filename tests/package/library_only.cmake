# A library-only build: no refit command, no tests or benchmarks, MPI and CLI11 hidden from CMake,
# no backend. It must configure and build, install no header of what it did not build (the NCCL
# executor's, the MPI bootstrap's), and the installed package must not ask for MPI.
file(REMOVE_RECURSE ${WORK_DIR})
include(${CMAKE_CURRENT_LIST_DIR}/run_step.cmake)
run(${CMAKE_COMMAND} -S ${SOURCE_DIR} -B ${WORK_DIR}/build -G ${GENERATOR} -DCMAKE_BUILD_TYPE=Release
    -DREFIT_BUILD_CLI=OFF -DREFIT_BUILD_TESTS=OFF -DREFIT_BUILD_BENCH=OFF
    -DREFIT_WITH_UCX=OFF -DREFIT_WITH_NCCL=OFF -DREFIT_WITH_MPI=AUTO
    -DCMAKE_DISABLE_FIND_PACKAGE_MPI=ON -DCMAKE_DISABLE_FIND_PACKAGE_CLI11=ON)
run(${CMAKE_COMMAND} --build ${WORK_DIR}/build --parallel 2)
run(${CMAKE_COMMAND} --install ${WORK_DIR}/build --prefix ${WORK_DIR}/prefix)
foreach(absent include/refit/executors/nccl include/refit/executors/mpi_bootstrap.h
        include/refit/executors/ucx_executor.h bin/refit)
  if(EXISTS ${WORK_DIR}/prefix/${absent})
    message(FATAL_ERROR "a library-only build without that part installed ${absent}")
  endif()
endforeach()
file(GLOB_RECURSE config ${WORK_DIR}/prefix/*/refitConfig.cmake)
file(READ ${config} text)
if(text MATCHES "find_dependency\\(MPI")
  string(REGEX MATCH "if\\([^)]*\\)\n  set\\(MPI_CXX_SKIP_MPICXX" guard "${text}")
  if(NOT guard MATCHES "if\\(FALSE\\)|if\\(OFF\\)|if\\(0\\)")
    message(FATAL_ERROR "the installed package config looks for MPI although the build has none:\n${text}")
  endif()
endif()
