#include "cadre/base/errors.h"

namespace cadre {

Error::Error(ErrorCode code, const std::string& message)
    : std::runtime_error(message), code_(code) {}

void throw_error(ErrorCode code, const std::string& message) {
  switch (code) {
    case ErrorCode::kCancelled:
      throw CancelledError(message);
    case ErrorCode::kUnknown:
      throw UnknownError(message);
    case ErrorCode::kInvalidArgument:
      throw InvalidArgumentError(message);
    case ErrorCode::kDeadlineExceeded:
      throw DeadlineExceededError(message);
    case ErrorCode::kNotFound:
      throw NotFoundError(message);
    case ErrorCode::kAlreadyExists:
      throw AlreadyExistsError(message);
    case ErrorCode::kPermissionDenied:
      throw PermissionDeniedError(message);
    case ErrorCode::kResourceExhausted:
      throw ResourceExhaustedError(message);
    case ErrorCode::kFailedPrecondition:
      throw FailedPreconditionError(message);
    case ErrorCode::kAborted:
      throw AbortedError(message);
    case ErrorCode::kOutOfRange:
      throw OutOfRangeError(message);
    case ErrorCode::kUnimplemented:
      throw UnimplementedError(message);
    case ErrorCode::kInternal:
      throw InternalError(message);
    case ErrorCode::kUnavailable:
      throw UnavailableError(message);
    case ErrorCode::kDataLoss:
      throw DataLossError(message);
    case ErrorCode::kUnauthenticated:
      throw UnauthenticatedError(message);
  }
  throw UnknownError(message);
}

}  // namespace cadre
