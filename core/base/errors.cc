#include "cadre/base/errors.h"

namespace cadre {

std::string_view error_code_name(ErrorCode code) {
  switch (code) {
    case ErrorCode::kCancelled: return "Cancelled";
    case ErrorCode::kUnknown: return "Unknown";
    case ErrorCode::kInvalidArgument: return "InvalidArgument";
    case ErrorCode::kDeadlineExceeded: return "DeadlineExceeded";
    case ErrorCode::kNotFound: return "NotFound";
    case ErrorCode::kAlreadyExists: return "AlreadyExists";
    case ErrorCode::kPermissionDenied: return "PermissionDenied";
    case ErrorCode::kResourceExhausted: return "ResourceExhausted";
    case ErrorCode::kFailedPrecondition: return "FailedPrecondition";
    case ErrorCode::kAborted: return "Aborted";
    case ErrorCode::kOutOfRange: return "OutOfRange";
    case ErrorCode::kUnimplemented: return "Unimplemented";
    case ErrorCode::kInternal: return "Internal";
    case ErrorCode::kUnavailable: return "Unavailable";
    case ErrorCode::kDataLoss: return "DataLoss";
  }
  return "Unknown";
}

Error::Error(ErrorCode code, const std::string& message)
    : std::runtime_error(message), code_(code) {}

void throw_error(ErrorCode code, const std::string& message) {
  switch (code) {
    case ErrorCode::kCancelled: throw CancelledError(message);
    case ErrorCode::kUnknown: throw UnknownError(message);
    case ErrorCode::kInvalidArgument: throw InvalidArgumentError(message);
    case ErrorCode::kDeadlineExceeded: throw DeadlineExceededError(message);
    case ErrorCode::kNotFound: throw NotFoundError(message);
    case ErrorCode::kAlreadyExists: throw AlreadyExistsError(message);
    case ErrorCode::kPermissionDenied: throw PermissionDeniedError(message);
    case ErrorCode::kResourceExhausted: throw ResourceExhaustedError(message);
    case ErrorCode::kFailedPrecondition: throw FailedPreconditionError(message);
    case ErrorCode::kAborted: throw AbortedError(message);
    case ErrorCode::kOutOfRange: throw OutOfRangeError(message);
    case ErrorCode::kUnimplemented: throw UnimplementedError(message);
    case ErrorCode::kInternal: throw InternalError(message);
    case ErrorCode::kUnavailable: throw UnavailableError(message);
    case ErrorCode::kDataLoss: throw DataLossError(message);
  }
  throw UnknownError(message);
}

}  // namespace cadre
