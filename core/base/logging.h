// glog for programs that never called google::InitGoogleLogging: the library's entry points
// (RunConfig::from_environment, Estimator, train_and_evaluate, a Strategy, a worker group, a
// Keras Model) call ensure_logging(), which initialises glog to
// stderr under the program's name when nobody has, so a user's first program logs without
// glog's "Logging before InitGoogleLogging()" warning. A main() that initialises glog itself
// must do so before it creates any of these (glog aborts on a second initialisation).
#pragma once

namespace cadre {

// Thread-safe; does nothing once glog is initialised.
void ensure_logging();

}  // namespace cadre
