// Typed errors for failed file operations.
#pragma once

#include <string>
#include <string_view>

#include "cadre/base/errors.h"

namespace cadre {

// Throws the error for errno value `err` (ENOENT/ENOTDIR: NotFoundError, EACCES/EPERM/EROFS:
// PermissionDeniedError, ENOSPC/EDQUOT: ResourceExhaustedError, else UnavailableError),
// with the message "<what>: <strerror>".
[[noreturn]] void throw_errno_error(const std::string& what, int err);

// throw_errno_error("<action> <path>", err): "cannot open TFRecord file /x/y: No such file
// or directory".
[[noreturn]] void throw_file_error(std::string_view action, const std::string& path, int err);

}  // namespace cadre
