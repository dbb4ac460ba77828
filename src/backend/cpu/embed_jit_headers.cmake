# Writes OUTPUT, a .cpp that holds the headers generated kernel source may include,
# so an installed kiln can compile kernels without its source tree.
#   cmake -DSOURCE_DIR=<kiln root> -DTEMPLATE=<jit_headers.cpp.in> -DOUTPUT=<file> -P embed_jit_headers.cmake
cmake_minimum_required(VERSION 3.22)

# Each entry: the name generated source includes, then its file under SOURCE_DIR. Every file
# of src/backend/cuda/kernels/ is one too, included as backend/cuda/kernels/<file>.
set(headers
  "kiln/half.h" "include/kiln/half.h"
  "backend/common/math.h" "src/backend/common/math.h"
  "backend/common/fold.h" "src/backend/common/fold.h"
  "backend/common/threefry.h" "src/backend/common/threefry.h"
  "backend/common/order_key.h" "src/backend/common/order_key.h"
  "backend/common/tile_order.h" "src/backend/common/tile_order.h")
file(GLOB cuda_kernels LIST_DIRECTORIES false RELATIVE "${SOURCE_DIR}/src" "${SOURCE_DIR}/src/backend/cuda/kernels/*")
list(SORT cuda_kernels)
foreach(file IN LISTS cuda_kernels)
  list(APPEND headers "${file}" "src/${file}")
endforeach()
# NVRTC's stand-ins for the standard headers (it has no C++ library), handed to NVRTC alone
# under the names they replace: the CPU JIT's compiler has the real ones.
file(GLOB nvrtc_std LIST_DIRECTORIES false RELATIVE "${SOURCE_DIR}/src/backend/cuda/kernels/std"
     "${SOURCE_DIR}/src/backend/cuda/kernels/std/*")
list(SORT nvrtc_std)
set(std_headers "")
foreach(name IN LISTS nvrtc_std)
  list(APPEND std_headers "${name}" "src/backend/cuda/kernels/std/${name}")
endforeach()

set(names "")  # what embedded files may include with quotes
list(LENGTH headers count)
math(EXPR last "${count} - 1")
foreach(i RANGE 0 ${last} 2)
  list(GET headers ${i} name)
  list(APPEND names "${name}")
endforeach()

# The entries of one list, as C++ initializers.
function(embed_entries list_name out)
  set(entries "")
  list(LENGTH ${list_name} count)
  math(EXPR last "${count} - 1")
  foreach(i RANGE 0 ${last} 2)
    math(EXPR j "${i} + 1")
    list(GET ${list_name} ${i} name)
    list(GET ${list_name} ${j} file)
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
    string(APPEND entries "    {\"${name}\", R\"kiln_embed(${text})kiln_embed\"},\n")
  endforeach()
  set(${out} "${entries}" PARENT_SCOPE)
endfunction()

embed_entries(headers KILN_EMBEDDED_ENTRIES)
embed_entries(std_headers KILN_NVRTC_STD_ENTRIES)
configure_file("${TEMPLATE}" "${OUTPUT}" @ONLY)
