# Writes OUTPUT, a .cpp that holds the headers generated kernel source may include,
# so an installed kiln can compile kernels without its source tree.
#   cmake -DSOURCE_DIR=<kiln root> -DTEMPLATE=<jit_headers.cpp.in> -DOUTPUT=<file> -P embed_jit_headers.cmake
cmake_minimum_required(VERSION 3.22)

# Each entry: the name generated source includes, then its file under SOURCE_DIR.
set(headers
  "kiln/half.h" "include/kiln/half.h"
  "backend/common/math.h" "src/backend/common/math.h"
  "backend/common/fold.h" "src/backend/common/fold.h"
  "backend/common/threefry.h" "src/backend/common/threefry.h"
  "backend/common/order_key.h" "src/backend/common/order_key.h"
  "backend/cuda/kernels/args.h" "src/backend/cuda/kernels/args.h"
  "backend/cuda/kernels/llm.cuh" "src/backend/cuda/kernels/llm.cuh"
  "backend/cuda/kernels/gather.cuh" "src/backend/cuda/kernels/gather.cuh")

set(names "")
set(KILN_EMBEDDED_ENTRIES "")
list(LENGTH headers count)
math(EXPR last "${count} - 1")
foreach(i RANGE 0 ${last} 2)
  math(EXPR j "${i} + 1")
  list(GET headers ${i} name)
  list(GET headers ${j} file)
  list(APPEND names "${name}")
endforeach()

foreach(i RANGE 0 ${last} 2)
  math(EXPR j "${i} + 1")
  list(GET headers ${i} name)
  list(GET headers ${j} file)
  file(READ "${SOURCE_DIR}/${file}" text)
  if(text MATCHES "\\)kiln_embed\"")
    message(FATAL_ERROR "${file} contains the raw-string delimiter )kiln_embed\"")
  endif()
  # Generated source may include only standard headers and the embedded ones.
  string(REGEX MATCHALL "#[ \t]*include[ \t]*\"[^\"]*\"" includes "${text}")
  foreach(inc IN LISTS includes)
    string(REGEX REPLACE ".*\"([^\"]*)\"" "\\1" inc_name "${inc}")
    if(NOT inc_name IN_LIST names)
      message(FATAL_ERROR "${file} includes \"${inc_name}\", which generated kernels cannot see; "
                          "include only standard headers or add it to ${CMAKE_CURRENT_LIST_FILE}")
    endif()
  endforeach()
  string(APPEND KILN_EMBEDDED_ENTRIES "    {\"${name}\", R\"kiln_embed(${text})kiln_embed\"},\n")
endforeach()

configure_file("${TEMPLATE}" "${OUTPUT}" @ONLY)
