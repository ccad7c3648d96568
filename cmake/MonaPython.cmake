# Finds what the Python extension needs and adds python/ (target mona_python, the module
# mona._C) when everything is there. MONA_BUILD_PYTHON: AUTO builds it when possible and says
# why not otherwise; ON makes a missing piece an error.
#
# The interpreter: Python3_EXECUTABLE if given, else Debian's /usr/bin/python3 when it exists
# (a python3 found first on PATH, such as a pyenv one, usually has no torch), else the first
# python3 found. Its `torch` must be the LibTorch that mona links (same major.minor version;
# Debian's python3-torch and libtorch-dev are one build), and libtorch_python, which carries
# the Tensor conversion between C++ and Python, is taken from that torch's lib/ folder.
function(mona_python_unavailable why)
  if(NOT MONA_BUILD_PYTHON STREQUAL "AUTO")
    message(FATAL_ERROR "MONA_BUILD_PYTHON=${MONA_BUILD_PYTHON}: ${why}")
  endif()
  message(STATUS "Python binding not built (MONA_BUILD_PYTHON=AUTO): ${why}")
endfunction()

if(NOT Python3_EXECUTABLE AND EXISTS /usr/bin/python3)
  set(Python3_EXECUTABLE /usr/bin/python3 CACHE FILEPATH "Python interpreter of the extension")
endif()
find_package(Python3 COMPONENTS Interpreter Development.Module)
if(NOT Python3_FOUND)
  mona_python_unavailable("no Python 3 interpreter with development headers (Debian: python3-dev)")
  return()
endif()
execute_process(
  COMMAND ${Python3_EXECUTABLE} -c
    "import os, torch; print(torch.__version__); print(os.path.join(os.path.dirname(torch.__file__), 'lib'))"
  OUTPUT_VARIABLE _mona_py_torch RESULT_VARIABLE _mona_py_rc ERROR_QUIET
  OUTPUT_STRIP_TRAILING_WHITESPACE)
if(NOT _mona_py_rc EQUAL 0)
  mona_python_unavailable("${Python3_EXECUTABLE} cannot import torch (Debian: python3-torch)")
  return()
endif()
string(REPLACE "\n" ";" _mona_py_torch "${_mona_py_torch}")
list(GET _mona_py_torch 0 MONA_PYTHON_TORCH_VERSION)
list(GET _mona_py_torch 1 _mona_py_torch_lib)
string(REGEX MATCH "^[0-9]+\\.[0-9]+" _py_mm "${MONA_PYTHON_TORCH_VERSION}")
string(REGEX MATCH "^[0-9]+\\.[0-9]+" _cxx_mm "${Torch_VERSION}")
if(NOT _py_mm STREQUAL _cxx_mm)
  mona_python_unavailable("${Python3_EXECUTABLE}'s torch is ${MONA_PYTHON_TORCH_VERSION}, "
    "mona links LibTorch ${Torch_VERSION} (${Torch_DIR}); they must be one build")
  return()
endif()
find_library(MONA_TORCH_PYTHON_LIBRARY torch_python HINTS ${_mona_py_torch_lib} NO_DEFAULT_PATH)
if(NOT MONA_TORCH_PYTHON_LIBRARY)
  mona_python_unavailable("no libtorch_python in ${_mona_py_torch_lib}")
  return()
endif()
find_package(pybind11 CONFIG QUIET)
if(NOT pybind11_FOUND)
  mona_python_unavailable("pybind11 not found (Debian: pybind11-dev)")
  return()
endif()
message(STATUS "Python binding: ${Python3_EXECUTABLE} (${Python3_VERSION}), torch "
  "${MONA_PYTHON_TORCH_VERSION}, pybind11 ${pybind11_VERSION}")
add_subdirectory(python)
set(MONA_PYTHON_BUILT TRUE)
