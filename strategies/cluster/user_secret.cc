#include "strategies/cluster/user_secret.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "cadre/base/env.h"
#include "cadre/base/errors.h"
#include "core/base/random_token.h"
#include "core/base/strings.h"

namespace cadre {
namespace {

[[noreturn]] void cannot(const std::string& what, const std::string& path) {
  throw UnavailableError(str_cat("cannot ", what, " ", path, ": ", std::strerror(errno),
                                 "; set CADRE_JOB_SECRET_FILE to a file holding the job's secret"));
}

// A secret other users can read is no secret: refused, as ssh refuses such keys. The same
// rule for the default and for CADRE_JOB_SECRET_FILE: `name` says which one `path` is.
void check_private(const std::string& name, const std::string& path, const struct stat& st,
                   const std::string& alternative) {
  if (st.st_uid != ::geteuid() || (st.st_mode & 077) != 0 || !S_ISREG(st.st_mode)) {
    char mode[8];
    std::snprintf(mode, sizeof(mode), "%04o", static_cast<unsigned>(st.st_mode & 07777));
    throw InvalidArgumentError(str_cat(name, " is not a private file of this user (mode ", mode,
                                       ", owner uid ", st.st_uid,
                                       "); expected a regular file of mode 0600 owned by uid ",
                                       ::geteuid(), ": chmod 600 ", path, alternative));
  }
}

}  // namespace

std::optional<std::string> read_secret_file(const std::string& path) {
  std::string secret;
  try {
    secret = posix_env()->read_file(path);  // read(2): a stream throws for a directory
  } catch (const Error&) {
    return std::nullopt;
  }
  while (!secret.empty() && (secret.back() == '\n' || secret.back() == '\r')) secret.pop_back();
  return secret;
}

std::string job_secret_file(const std::string& path) {
  std::string name = "CADRE_JOB_SECRET_FILE=" + path;
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    throw InvalidArgumentError(
        str_cat(name, " cannot be read (", std::strerror(errno), "); expected the job's secret"));
  }
  check_private(name, path, st, "");
  std::optional<std::string> secret = read_secret_file(path);
  if (!secret) throw InvalidArgumentError(name + " cannot be read; expected the job's secret");
  if (secret->empty()) throw InvalidArgumentError(name + " is empty; expected the job's secret");
  return *secret;
}

std::string user_secret_path(const std::string& home) { return home + "/.cadre/job_secret"; }

std::string user_secret(const std::string& home) {
  std::string dir = home + "/.cadre", path = user_secret_path(home);
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) cannot("make", dir);
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    if (errno != ENOENT) cannot("read", path);
    // Written whole under a random name of its own (hosts sharing the home directory may
    // reuse pids), then linked into place: a task starting at the same time either wins or
    // reads the winner's, never half a file.
    std::string temporary = str_cat(path, ".", random_token(8), ".tmp");
    int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) cannot("make", temporary);
    std::string secret = random_token() + "\n";
    bool written =
        ::write(fd, secret.data(), secret.size()) == static_cast<ssize_t>(secret.size()) &&
        ::fsync(fd) == 0;
    ::close(fd);
    int linked = written ? ::link(temporary.c_str(), path.c_str()) : -1;
    int link_errno = errno;
    ::unlink(temporary.c_str());
    errno = link_errno;
    if (!written || (linked != 0 && errno != EEXIST)) cannot("make", path);
    if (::stat(path.c_str(), &st) != 0) cannot("read", path);
  }
  check_private(path + " (the default job secret)", path, st, ", or set CADRE_JOB_SECRET_FILE");
  std::optional<std::string> secret = read_secret_file(path);
  if (!secret) cannot("read", path);
  if (secret->empty()) {
    throw InvalidArgumentError(str_cat(path,
                                       " (the default job secret) is empty; delete it "
                                       "to have a new one made, or set "
                                       "CADRE_JOB_SECRET_FILE"));
  }
  return *secret;
}

}  // namespace cadre
