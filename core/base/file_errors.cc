#include "core/base/file_errors.h"

#include <cerrno>
#include <cstring>

#include "cadre/base/errors.h"
#include "core/base/strings.h"

namespace cadre {

void throw_errno_error(const std::string& what, int err) {
  std::string message = str_cat(what, ": ", std::strerror(err));
  switch (err) {
    case ENOENT:
    case ENOTDIR:
      throw NotFoundError(message);
    case EACCES:
    case EPERM:
    case EROFS:
      throw PermissionDeniedError(message);
    case ENOSPC:
    case EDQUOT:
      throw ResourceExhaustedError(message);
    default:
      throw UnavailableError(message);
  }
}

void throw_file_error(std::string_view action, const std::string& path, int err) {
  throw_errno_error(str_cat(action, " ", path), err);
}

}  // namespace cadre
