#include "estimator/variable_sources.h"

#include <filesystem>
#include <string>

#include "checkpoint/restore_rows.h"

namespace cadre::estimator_internal {

VariableSourceFn variable_sources_in(std::shared_ptr<const checkpoint::CheckpointReader> resume) {
  if (!resume || resume->format_version() < 1) return {};
  std::string file = std::filesystem::path(resume->path()).filename();
  return [resume, file](const nn::VariableSpec& spec) -> std::optional<VariableSource> {
    checkpoint::restorable(*resume, spec, spec.name);
    return VariableSource{file, spec.name};
  };
}

}  // namespace cadre::estimator_internal
