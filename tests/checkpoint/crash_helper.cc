// Saves checkpoints into a model_dir in a loop until it is killed: the victim of
// crash_test.cc. Step s holds values derived from s, so a reader can tell a checkpoint's
// contents are the ones its name promises.
//
//   checkpoint_crash_helper MODEL_DIR KEEP_MAX
//
// Reports its progress on stdout, one line each, so that the test times its kills from what
// the helper is doing rather than from the fork (process start-up alone can take longer than
// a save when the machine is busy): "started" on entry, then "saved <step>" after each save
// has returned, i.e. once that checkpoint is durable and recorded in the state file.
#include <unistd.h>

#include <cstdlib>
#include <iostream>
#include <string>

#include "cadre/checkpoint/manager.h"
#include "cadre/checkpoint/state_file.h"
#include "tests/checkpoint/small_model.h"

namespace {

// One write(2) per line: unbuffered (nothing is lost in a buffer at SIGKILL) and, being
// shorter than PIPE_BUF, never torn.
void report(const std::string& line) {
  std::string text = line + "\n";
  if (::write(STDOUT_FILENO, text.data(), text.size()) != static_cast<ssize_t>(text.size())) {
    std::_Exit(3);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: checkpoint_crash_helper MODEL_DIR KEEP_MAX\n";
    return 2;
  }
  using namespace cadre::checkpoint;
  report("started");
  try {
    CheckpointManagerOptions options;
    options.keep_checkpoint_max = std::atoi(argv[2]);
    CheckpointManager manager(argv[1], options);
    int64_t step = 0;
    if (auto latest = manager.latest_checkpoint()) {
      step = checkpoint_step(cadre::base_name(*latest), "model.ckpt").value_or(0);
    }
    while (true) {
      ++step;
      CheckpointData data = testing::small_model(step, static_cast<float>(step));
      // Big enough (2 MiB) that kills land inside HDF5's writes too, not only between saves.
      data.variables["big/kernel"] = testing::ramp({512, 1024}, 1, static_cast<float>(step));
      manager.save(data);
      report("saved " + std::to_string(step));
    }
  } catch (const std::exception& error) {
    std::cerr << "checkpoint_crash_helper: " << error.what() << "\n";
    return 1;
  }
}
