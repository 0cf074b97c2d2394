// The numbers of the training progress line (CONTRACTS.md, "Logs and progress"):
// `step 1200/5000  loss 0.412  152 steps/s  19.5k ex/s  ETA 25s`, as a person reads them at
// a glance. Internal to the estimator module (StepCounterHook, ProgressLineHook).
#pragma once

#include <optional>
#include <string>

namespace cadre::estimator_internal {

// "152", "19.5k", "1.25M".
std::string human_count(double value);

// The time left: "25s" under a minute, then "12m05s", "3h07m", "4.2d", "3.1y"; nullopt past
// a century or when not finite (a max_steps far beyond reach, such as "train until stopped",
// has no ETA worth printing).
std::optional<std::string> eta_text(double seconds);

}  // namespace cadre::estimator_internal
