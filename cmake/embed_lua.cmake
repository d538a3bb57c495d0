# Writes OUT: every Lua script in SCRIPTS as a C byte array, with the SHA1
# of its bytes (what SCRIPT LOAD would answer, so EVALSHA needs no round
# trip to learn it), in one table, script_sources[] (see src/script.h).
set(body "/* Generated from the src/lua scripts by cmake/embed_lua.cmake. Do not edit. */\n")
string(APPEND body "#include \"script.h\"\n\n")
set(table "")
foreach(f ${SCRIPTS})
  get_filename_component(name ${f} NAME_WE)
  string(MAKE_C_IDENTIFIER ${name} ident)
  file(READ ${f} hex HEX)
  file(SHA1 ${f} sha)
  string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
  string(APPEND body "static const char src_${ident}[] = {${bytes}0x00};\n")
  string(APPEND table "    {\"${name}\", src_${ident}, \"${sha}\"},\n")
endforeach()
string(APPEND body "\nconst struct script_source script_sources[] = {\n${table}    {0, 0, 0}\n};\n")
file(WRITE ${OUT}.tmp "${body}")
execute_process(COMMAND ${CMAKE_COMMAND} -E copy_if_different ${OUT}.tmp ${OUT})
