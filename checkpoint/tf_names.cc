#include "checkpoint/tf_names.h"

#include "core/base/strings.h"

namespace cadre::checkpoint::internal {
namespace {

constexpr std::string_view kTraining = "training/";

}  // namespace

std::string tf_name(const std::string& name, const VariableInfo& info) {
  if (!info.slot_of.empty() && name.starts_with(info.slot_of + "/")) {
    std::string rest = name.substr(info.slot_of.size() + 1);  // "<Optimizer>/<slot>"
    size_t slash = rest.find('/');
    if (slash != std::string::npos) {
      return str_cat(kTraining, rest.substr(0, slash), "/", info.slot_of, rest.substr(slash));
    }
  }
  if (info.slot_of.empty() && name.ends_with("/iterations") &&
      name.find('/') == name.size() - std::string_view("/iterations").size()) {
    return str_cat(kTraining, name.substr(0, name.find('/')), "/iter");
  }
  return name;
}

std::optional<CadreName> cadre_name(const std::string& tf_name,
                                    const std::map<std::string, VariableInfo>& tf_tensors) {
  if (!tf_name.starts_with(kTraining)) return std::nullopt;
  std::string rest = tf_name.substr(kTraining.size());  // "<Optimizer>/<variable>/<slot>"
  size_t slash = rest.find('/');
  if (slash == std::string::npos) return std::nullopt;
  std::string optimizer = rest.substr(0, slash);
  std::string path = rest.substr(slash + 1);
  if (path == "iter") return CadreName{str_cat(optimizer, "/iterations"), ""};
  size_t last = path.rfind('/');
  if (last == std::string::npos) return std::nullopt;
  std::string variable = path.substr(0, last);
  if (tf_tensors.count(variable) == 0) return std::nullopt;
  return CadreName{str_cat(variable, "/", optimizer, path.substr(last)), variable};
}

}  // namespace cadre::checkpoint::internal
