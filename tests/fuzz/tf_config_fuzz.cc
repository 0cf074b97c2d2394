// TF_CONFIG JSON and Slurm host lists, as a task reads them from its environment.
#include <cstdint>
#include <string>

#include "cadre/base/errors.h"
#include "cadre/strategies/cluster_spec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  try {
    cadre::parse_tf_config(text);
  } catch (const cadre::Error&) {
  }
  try {
    cadre::expand_hostlist(text);
  } catch (const cadre::Error&) {
  }
  return 0;
}
