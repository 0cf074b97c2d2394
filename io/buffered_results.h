// Results that background stages (prefetch, parallel map) hold for the consumer: an element
// or the exception computing it raised, kept in order so that an error surfaces at its
// element's position. Saved in iterator state as the elements' origins (or the elements)
// plus the error codes and messages (an exception is rethrown after restore as the
// cadre::Error of the same code).
#pragma once

#include <cstdint>
#include <deque>
#include <exception>
#include <optional>

#include "cadre/io/element.h"
#include "cadre/io/iterator_state.h"
#include "io/dataset_node.h"

namespace cadre::io {

struct BufferedResult {
  std::optional<Element> element;  // set when error is null
  std::exception_ptr error;
  // The element's origin encoded by the thread that produced it (encode_origin_words), or
  // empty: a save on the consumer's thread then only copies it.
  std::string origin_bytes;

  // The element, or the exception rethrown.
  Element take();
};

// Runs fn and captures its element or exception.
template <typename Fn>
BufferedResult capture_result(Fn&& fn) {
  BufferedResult result;
  try {
    result.element.emplace(fn());
  } catch (...) {
    result.error = std::current_exception();
  }
  return result;
}

// `source` makes the buffered elements again from their origins (see saved_elements.h).
// Saves the first `count` of `results` (all when count exceeds their number).
void save_results(StateWriter& writer, const std::deque<BufferedResult>& results,
                  const DatasetNode& source, size_t count = SIZE_MAX);
std::deque<BufferedResult> restore_results(const StateReader& reader, const DatasetNode& source);

// Names the thread in debuggers and `top -H` (at most 15 characters).
void set_current_thread_name(const char* name);

}  // namespace cadre::io
