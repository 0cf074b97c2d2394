# CADRE_SANITIZE=address builds everything with AddressSanitizer and UndefinedBehaviorSanitizer
# (any report ends the process), =thread with ThreadSanitizer, =fuzz for libFuzzer
# (tools/fuzz/run.sh). For `./dev test
# --sanitize=...`, which uses clang and a build folder of its own (build-address,
# build-thread); tools/sanitizers/ holds the run-time options and the suppressions, each for
# third-party code only.
set(CADRE_SANITIZE "" CACHE STRING
    "Sanitizers to build with: address (ASan + UBSan), thread (TSan), fuzz (libFuzzer) or empty")
set_property(CACHE CADRE_SANITIZE PROPERTY STRINGS "" address thread fuzz)

if(CADRE_SANITIZE STREQUAL "address")
  set(cadre_sanitizer_flags -fsanitize=address,undefined -fno-sanitize-recover=undefined
      -fno-omit-frame-pointer)
elseif(CADRE_SANITIZE STREQUAL "fuzz")
  # Coverage for libFuzzer everywhere, ASan and UBSan too; tests/fuzz links the driver.
  set(cadre_sanitizer_flags -fsanitize=fuzzer-no-link,address,undefined
      -fno-sanitize-recover=undefined -fno-omit-frame-pointer)
elseif(CADRE_SANITIZE STREQUAL "thread")
  set(cadre_sanitizer_flags -fsanitize=thread -fno-omit-frame-pointer)
elseif(NOT CADRE_SANITIZE STREQUAL "")
  message(FATAL_ERROR "CADRE_SANITIZE=${CADRE_SANITIZE}: expected address, thread, fuzz or empty")
endif()

if(cadre_sanitizer_flags)
  add_compile_options("$<$<COMPILE_LANGUAGE:C,CXX>:${cadre_sanitizer_flags}>")
  add_link_options(${cadre_sanitizer_flags})
endif()
