// Typed errors of the public API, one class per TensorFlow error code.
//
// Every error Cadre reports to a caller is a cadre::Error (a std::runtime_error) whose
// code() says which kind it is and whose what() names the thing at fault and what was
// expected. Third-party failures are translated into these at their adapter.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

namespace cadre {

enum class ErrorCode {
  kCancelled = 1,
  kUnknown = 2,
  kInvalidArgument = 3,
  kDeadlineExceeded = 4,
  kNotFound = 5,
  kAlreadyExists = 6,
  kPermissionDenied = 7,
  kResourceExhausted = 8,
  kFailedPrecondition = 9,
  kAborted = 10,
  kOutOfRange = 11,
  kUnimplemented = 12,
  kInternal = 13,
  kUnavailable = 14,
  kDataLoss = 15,
  kUnauthenticated = 16,
};

class Error : public std::runtime_error {
 public:
  Error(ErrorCode code, const std::string& message);
  ErrorCode code() const { return code_; }

 private:
  ErrorCode code_;
};

#define CADRE_DEFINE_ERROR(Name, Code)                                             \
  class Name : public Error {                                                      \
   public:                                                                         \
    explicit Name(const std::string& message) : Error(ErrorCode::Code, message) {} \
  };

CADRE_DEFINE_ERROR(CancelledError, kCancelled)
CADRE_DEFINE_ERROR(UnknownError, kUnknown)
CADRE_DEFINE_ERROR(InvalidArgumentError, kInvalidArgument)
CADRE_DEFINE_ERROR(DeadlineExceededError, kDeadlineExceeded)
CADRE_DEFINE_ERROR(NotFoundError, kNotFound)
CADRE_DEFINE_ERROR(AlreadyExistsError, kAlreadyExists)
CADRE_DEFINE_ERROR(PermissionDeniedError, kPermissionDenied)
CADRE_DEFINE_ERROR(ResourceExhaustedError, kResourceExhausted)
CADRE_DEFINE_ERROR(FailedPreconditionError, kFailedPrecondition)
CADRE_DEFINE_ERROR(AbortedError, kAborted)
CADRE_DEFINE_ERROR(OutOfRangeError, kOutOfRange)
CADRE_DEFINE_ERROR(UnimplementedError, kUnimplemented)
CADRE_DEFINE_ERROR(InternalError, kInternal)
CADRE_DEFINE_ERROR(UnavailableError, kUnavailable)
CADRE_DEFINE_ERROR(DataLossError, kDataLoss)
CADRE_DEFINE_ERROR(UnauthenticatedError, kUnauthenticated)

#undef CADRE_DEFINE_ERROR

// Throws the typed error for `code` (for code that receives a code at run time, such as
// an RPC status translated at an adapter).
[[noreturn]] void throw_error(ErrorCode code, const std::string& message);

}  // namespace cadre
