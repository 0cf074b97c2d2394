// The subcommands of cadre_ckpt, writing to the given streams so that tests can run them
// in-process too. Each returns the program's exit status.
#pragma once

#include <ostream>
#include <string>

namespace cadre::tools {

// PATH a checkpoint file, or a model_dir (its latest checkpoint: the state file's, or when
// that is missing, empty, garbled or names a file that is gone, the newest checkpoint file
// that opens, with a warning on `err`): the global step, then one line per variable and
// slot: name, dtype, shape. 0, or 1 when PATH holds no readable checkpoint.
int ckpt_ls(const std::string& path, std::ostream& out, std::ostream& err);

// Variables that differ between A and B in presence, dtype, shape or value (max abs
// difference). 0 when none differ, 1 when some do, 2 when either cannot be read.
int ckpt_diff(const std::string& a, const std::string& b, std::ostream& out, std::ostream& err);

// Checks every checksum of PATH (a file; or a model_dir: each of its checkpoints, and its
// state file). One line per file, "OK" or "DAMAGED" with each damaged dataset's name and
// problem (a state file at fault: what is wrong with it). 0 when all are intact, 1 when any
// is corrupt or truncated, 2 when PATH does not exist.
int ckpt_verify(const std::string& path, std::ostream& out, std::ostream& err);

// Writes SOURCE (as ckpt_ls reads it) as the TensorFlow checkpoint PREFIX (PREFIX.index and
// PREFIX.data-00000-of-00001) under TensorFlow's names, for tf.train.load_checkpoint and an
// Estimator's warm_start_from. 0, or 1 when SOURCE cannot be read or PREFIX written.
int ckpt_convert(const std::string& source, const std::string& prefix, std::ostream& out,
                 std::ostream& err);

}  // namespace cadre::tools
