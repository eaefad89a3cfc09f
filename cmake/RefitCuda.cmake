# refit_cuda_objects(NAME SOURCES <.cu files> INCLUDES <dirs>): an OBJECT library of CUDA sources,
# compiled as C++20 for the architectures the NCCL executor chose (the global property
# REFIT_CUDA_ARCHITECTURES, set by executors/nccl). CUDA sources compile apart from the refit
# modules, which require C++23: CMake would impose that on every source of their targets. A macro,
# not a function: the CUDA language and CMake 3.25's missing flag for nvcc's C++20 are set in the
# calling directory, where CMake reads them.
macro(refit_cuda_objects name)
  cmake_parse_arguments(REFIT_CUDA "" "" "SOURCES;INCLUDES" ${ARGN})
  enable_language(CUDA)
  set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION -std=c++20)
  set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION -std=c++20)
  get_property(refit_cuda_architectures GLOBAL PROPERTY REFIT_CUDA_ARCHITECTURES)
  add_library(${name} OBJECT ${REFIT_CUDA_SOURCES})
  set_target_properties(${name} PROPERTIES POSITION_INDEPENDENT_CODE ON CUDA_STANDARD 20 CUDA_STANDARD_REQUIRED ON
                                           CUDA_EXTENSIONS OFF CUDA_ARCHITECTURES "${refit_cuda_architectures}")
  target_include_directories(${name} PRIVATE ${CUDAToolkit_INCLUDE_DIRS} ${REFIT_CUDA_INCLUDES})
  # Designated initializers that leave members at their defaults are the house style (REFIT_WARNINGS).
  target_compile_options(${name} PRIVATE -Xcompiler=-Wall,-Wextra,-Wno-missing-field-initializers)
endmacro()
