# Finds libtorch from a Python environment's torch wheel: the project's .venv
# (scripts/setup.sh) unless FSDP_PYTHON names another interpreter. Torch_DIR or
# CMAKE_PREFIX_PATH still win where set. The wheel is CUDA-enabled, and its
# config wants the CUDA toolkit even where no GPU is: CUDA_HOME (default
# /usr/local/cuda) gives nvcc and CUDAToolkit_ROOT.
#
# Sets FSDP_PYTHON, TORCH_LIBRARIES, TORCH_INCLUDE_DIRS, TORCH_CXX_FLAGS, and
# TORCH_CPU_LIBRARIES: libtorch_cpu and c10 alone, for binaries that load
# CUDA's half of torch only when they need it (a process linked with the
# whole of TORCH_LIBRARIES starts about 235 MB heavier, GPU or none).

if(NOT FSDP_PYTHON)
  set(_fsdp_venv "${CMAKE_CURRENT_LIST_DIR}/../.venv/bin/python")
  get_filename_component(_fsdp_venv "${_fsdp_venv}" ABSOLUTE)
  if(EXISTS "${_fsdp_venv}")
    set(FSDP_PYTHON "${_fsdp_venv}")
  else()
    find_program(FSDP_PYTHON NAMES python3)
  endif()
endif()
set(FSDP_PYTHON "${FSDP_PYTHON}" CACHE FILEPATH "Python with the torch wheel")

if(NOT Torch_DIR)
  execute_process(
    COMMAND "${FSDP_PYTHON}" -c "import torch.utils; print(torch.utils.cmake_prefix_path)"
    OUTPUT_VARIABLE _fsdp_torch_prefix OUTPUT_STRIP_TRAILING_WHITESPACE
    ERROR_VARIABLE _fsdp_torch_err RESULT_VARIABLE _fsdp_torch_rc)
  if(NOT _fsdp_torch_rc EQUAL 0)
    message(FATAL_ERROR "No torch in ${FSDP_PYTHON} (run scripts/setup.sh, or set "
      "FSDP_PYTHON to a python with torch): ${_fsdp_torch_err}")
  endif()
  list(APPEND CMAKE_PREFIX_PATH "${_fsdp_torch_prefix}")
endif()

if(NOT DEFINED ENV{CUDA_HOME})
  set(ENV{CUDA_HOME} /usr/local/cuda)
endif()
if(NOT CUDAToolkit_ROOT)
  set(CUDAToolkit_ROOT "$ENV{CUDA_HOME}")
endif()
if(NOT CMAKE_CUDA_COMPILER AND NOT DEFINED ENV{CUDACXX})
  set(ENV{CUDACXX} "$ENV{CUDA_HOME}/bin/nvcc")
endif()
# Nothing here compiles device code: no architecture list to detect, and no
# CMAKE_CUDA_ARCHITECTURES for torch's config to warn about (it reads
# TORCH_CUDA_ARCH_LIST alone).
if(NOT TORCH_CUDA_ARCH_LIST)
  set(TORCH_CUDA_ARCH_LIST "9.0")
endif()
cmake_policy(SET CMP0104 OLD)
# The wheel links kineto into libtorch_cpu; its config looks for a library of
# its own and warns.
if(_fsdp_torch_prefix AND EXISTS "${_fsdp_torch_prefix}/../../lib/libtorch_cpu.so")
  get_filename_component(_fsdp_torch_cpu "${_fsdp_torch_prefix}/../../lib/libtorch_cpu.so" ABSOLUTE)
  set(kineto_LIBRARY "${_fsdp_torch_cpu}" CACHE FILEPATH "kineto: inside the wheel's libtorch_cpu")
endif()

find_package(Torch REQUIRED CONFIG)
message(STATUS "Using libtorch ${Torch_VERSION} from ${Torch_DIR}")
# A build directory configured before the torch 2.x platform may still name
# an older libtorch in its cache.
if(Torch_VERSION VERSION_LESS 2.11)
  message(FATAL_ERROR "libtorch ${Torch_VERSION} at ${Torch_DIR}: fsdp-opt "
    "needs torch 2.11 (scripts/setup.sh installs it in .venv); remove the "
    "build directory's CMakeCache.txt and configure again")
endif()

if(NOT TARGET fsdp_torch_cpu)
  add_library(fsdp_torch_cpu INTERFACE)
  target_link_libraries(fsdp_torch_cpu INTERFACE torch_cpu_library)
  target_include_directories(fsdp_torch_cpu SYSTEM INTERFACE ${TORCH_INCLUDE_DIRS})
  separate_arguments(_fsdp_torch_flags UNIX_COMMAND "${TORCH_CXX_FLAGS}")
  target_compile_options(fsdp_torch_cpu INTERFACE ${_fsdp_torch_flags})
endif()
set(TORCH_CPU_LIBRARIES fsdp_torch_cpu)
