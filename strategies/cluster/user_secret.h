// Job secrets kept in files: reading one, and the secret a user's tasks share when no job
// secret is given (one per user and home directory, made on first use). Tasks started by
// hand with only TF_CONFIG, on one host or on hosts that share the home directory (as Slurm
// clusters do), then find each other while other users' processes cannot call them.
#pragma once

#include <optional>
#include <string>

namespace cadre {

// `home`/.cadre/job_secret: 32 random bytes (hex), made readable by the owner only, or read
// when it exists. Two tasks starting together end with the same one. Throws
// InvalidArgumentError when the file is open to other users or not the caller's, and
// UnavailableError when it cannot be made.
std::string user_secret(const std::string& home);

// The secret in CADRE_JOB_SECRET_FILE's `path`, held to the default's rule: a regular file
// of this user that no other user can read (a Kubernetes Secret mounted with defaultMode
// 0400 is one). Throws InvalidArgumentError naming the file when it is not, when it cannot
// be read, or when it is empty.
std::string job_secret_file(const std::string& path);

// The secret in the file at `path`: its bytes without trailing line ends (possibly none).
// nullopt when the file cannot be read.
std::optional<std::string> read_secret_file(const std::string& path);

// "~/.cadre/job_secret" under `home`.
std::string user_secret_path(const std::string& home);

}  // namespace cadre
