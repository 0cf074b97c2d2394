#include "core/base/file_errors.h"

#include <cerrno>
#include <cstring>

#include "cadre/base/errors.h"
#include "core/base/strings.h"

namespace cadre {

void throw_file_error(std::string_view action, const std::string& path, int err) {
  std::string message = str_cat(action, " ", path, ": ", std::strerror(err));
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

}  // namespace cadre
