// CSV records by a schema: quoting, delimiters, types, defaults, a header to match.
#include <cstdint>

#include "cadre/base/errors.h"
#include "cadre/io/csv.h"
#include "tests/fuzz/memory_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace cadre::io;
  cadre::fuzz::MemoryFile file(data, size);
  CsvOptions options;
  options.columns = {CsvColumn("x", CsvType::kFloat32), CsvColumn("n", CsvType::kInt64, "0"),
                     CsvColumn("s", CsvType::kString, "")};
  options.label_column = "n";
  for (bool header : {true, false}) {
    options.header = header;
    try {
      Iterator it = csv_dataset({file.path()}, options).make_iterator();
      for (int i = 0; i < 10'000 && it.next(); ++i) {
      }
    } catch (const cadre::Error&) {
    }
  }
  return 0;
}
