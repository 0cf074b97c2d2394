#include "io/buffered_results.h"

#include <pthread.h>

#include <algorithm>

#include "cadre/base/errors.h"
#include "core/base/strings.h"
#include "io/saved_elements.h"

namespace cadre::io {

Element BufferedResult::take() {
  if (error) std::rethrow_exception(error);
  return std::move(*element);
}

void save_results(StateWriter& writer, const std::deque<BufferedResult>& results,
                  const DatasetNode& source, size_t count) {
  static const Element kPlaceholder;
  count = std::min(count, results.size());
  std::vector<const Element*> elements;
  std::vector<bool> errors;
  std::vector<const std::string*> encoded;
  elements.reserve(count);
  encoded.reserve(count);
  for (size_t i = 0; i < count; ++i) {
    const BufferedResult& r = results[i];
    errors.push_back(r.error != nullptr);
    encoded.push_back(&r.origin_bytes);
    if (!r.error) {
      elements.push_back(&*r.element);
      continue;
    }
    elements.push_back(&kPlaceholder);  // at the error's position
    ErrorCode code = ErrorCode::kUnknown;
    std::string message = "unknown exception";
    try {
      std::rethrow_exception(r.error);
    } catch (const Error& e) {
      code = e.code();
      message = e.what();
    } catch (const std::exception& e) {
      message = e.what();
    } catch (...) {
    }
    writer.write_int(str_cat("error", i, "_code"), static_cast<int64_t>(code));
    writer.write_string(str_cat("error", i, "_message"), message);
  }
  save_elements(writer, "results", elements, source, errors, encoded);
}

std::deque<BufferedResult> restore_results(const StateReader& reader, const DatasetNode& source) {
  std::deque<BufferedResult> out;
  std::vector<Element> elements = restore_elements(reader, "results", source);
  for (size_t i = 0; i < elements.size(); ++i) {
    BufferedResult r;
    std::string code_key = str_cat("error", i, "_code");
    if (reader.contains(code_key)) {
      auto code = static_cast<ErrorCode>(reader.read_int(code_key));
      std::string message = reader.read_string(str_cat("error", i, "_message"));
      r = capture_result([&]() -> Element { throw_error(code, message); });
    } else {
      r.element = std::move(elements[i]);
    }
    out.push_back(std::move(r));
  }
  return out;
}

void set_current_thread_name(const char* name) { pthread_setname_np(pthread_self(), name); }

}  // namespace cadre::io
