# Writes op_doc(name) (bindings/python/src/ops_registry.h): each op's row of docs/ops.md, its
# dtypes and what it computes, so the Python functions carry the same words as the docs.
#   cmake -DINPUT=docs/ops.md -DOUTPUT=op_docs.cpp -P op_docs.cmake
# Read whole: CMake lists would split lines at ';' and bracket pairs, so those are escaped.
file(READ ${INPUT} text)
string(REPLACE ";" "@SEMI@" text "${text}")
string(REPLACE "[" "@LB@" text "${text}")
string(REPLACE "]" "@RB@" text "${text}")
string(REPLACE "\n" ";" lines "${text}")
set(rows "")
foreach(line IN LISTS lines)
  if(line MATCHES "^\\| `[a-z_0-9]+` \\|")
    list(APPEND rows "${line}")
  endif()
endforeach()
set(body "")
foreach(row IN LISTS rows)
  string(REGEX MATCH "^\\| `([a-z_0-9]+)` \\|(.*)\\|[ ]*$" _ "${row}")
  set(name "${CMAKE_MATCH_1}")
  set(rest "${CMAKE_MATCH_2}")
  string(REPLACE "\\|" "@PIPE@" rest "${rest}")  # an escaped | inside a cell
  string(FIND "${rest}" "|" bar)                 # dtypes | what it computes
  string(SUBSTRING "${rest}" 0 ${bar} dtypes)
  math(EXPR bar "${bar} + 1")
  string(SUBSTRING "${rest}" ${bar} -1 rest)
  string(STRIP "${dtypes}" dtypes)
  string(STRIP "${rest}" rest)
  string(REGEX REPLACE " *\\| *" "@SEMI@ " rest "${rest}")
  set(rest "${rest}. Result dtype: ${dtypes}")
  string(REPLACE "@PIPE@" "|" rest "${rest}")
  string(REPLACE "`" "" rest "${rest}")
  string(REPLACE "@SEMI@" ";" rest "${rest}")
  string(REPLACE "@LB@" "[" rest "${rest}")
  string(REPLACE "@RB@" "]" rest "${rest}")
  string(REPLACE "\\" "\\\\" rest "${rest}")
  string(REPLACE "\"" "\\\"" rest "${rest}")
  string(APPEND body "  if (n == \"${name}\") return \"${rest} (docs/ops.md)\";\n")
endforeach()
file(WRITE ${OUTPUT}.tmp "// Generated from docs/ops.md by bindings/python/op_docs.cmake; do not edit.
#include <string_view>

namespace kpy {

const char* op_doc(const char* name) {
  const std::string_view n(name);
${body}  return \"\";
}

}  // namespace kpy
")
execute_process(COMMAND ${CMAKE_COMMAND} -E copy_if_different ${OUTPUT}.tmp ${OUTPUT})
