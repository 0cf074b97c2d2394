#include "estimator/task_parts.h"

#include <string>
#include <utility>
#include <vector>

namespace cadre::estimator_internal {
namespace {

checkpoint::CheckpointPart checkpoint_part(SavedPart part) {
  checkpoint::CheckpointPart made;
  made.file_name = std::move(part.file_name);
  for (SavedPartSlice& s : part.slices) {
    made.slices.push_back({std::move(s.name), std::move(s.slot_of), s.dtype, std::move(s.shape),
                           s.first_row, s.rows});
  }
  made.wait = std::move(part.wait);
  return made;
}

}  // namespace

std::shared_ptr<const nn::VariableStore> save_parts_of_tasks(
    const StrategyExtended& extended, DistributedVariables& variables,
    const checkpoint::CheckpointManager& manager, int64_t step, checkpoint::CheckpointData* data) {
  const int count = extended.checkpoint_parts(variables);
  if (count == 0) return nullptr;
  // The tasks holding the variables write them; the caller waits only for their snapshots.
  std::vector<SavedPart> parts;
  std::shared_ptr<const nn::VariableStore> own = extended.save_parts(
      variables, manager.model_dir(), manager.part_file_names(step, count), step, &parts);
  for (SavedPart& part : parts) data->parts.push_back(checkpoint_part(std::move(part)));
  return own;
}

}  // namespace cadre::estimator_internal
