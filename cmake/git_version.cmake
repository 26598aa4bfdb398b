# Run at every build: writes OUT (a header defining CNNBENCH_GIT) when the commit, or whether the
# tree is dirty, changed, so the JSON context names the source a binary was really built from.
execute_process(COMMAND git describe --always --dirty --abbrev=12 WORKING_DIRECTORY ${SRC}
                OUTPUT_VARIABLE rev OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
if(NOT rev)
  set(rev unknown)
endif()
set(text "#pragma once\n#define CNNBENCH_GIT \"${rev}\"\n")
if(EXISTS ${OUT})
  file(READ ${OUT} old)
endif()
if(NOT "${old}" STREQUAL "${text}")
  file(WRITE ${OUT} "${text}")
endif()
