// Names fixed by the checkpoint file format (see checkpoint/FORMAT.md).
#pragma once

#include <cstdint>

namespace cadre::checkpoint::format {

inline constexpr char kFormatName[] = "cadre-checkpoint";
inline constexpr int64_t kFormatVersion = 1;
// A sharded checkpoint's own file: version 1 and a manifest of the parts that hold its
// other variables (checkpoint/manifest.h), which a version-1 reader would not see.
inline constexpr int64_t kShardedFormatVersion = 2;

// Groups below the root.
inline constexpr char kVariables[] = "variables";
inline constexpr char kSlots[] = "slots";
inline constexpr char kRng[] = "rng";
inline constexpr char kIterator[] = "iterator";
inline constexpr char kMetadata[] = "metadata";
// A scalar int64 dataset at the root.
inline constexpr char kGlobalStep[] = "global_step";

// Root attributes.
inline constexpr char kFormatAttribute[] = "format";
inline constexpr char kFormatVersionAttribute[] = "format_version";
inline constexpr char kLibraryVersionAttribute[] = "library_version";
inline constexpr char kCreatedUnixAttribute[] = "created_unix_seconds";
inline constexpr char kCreatedAttribute[] = "created";
inline constexpr char kGlobalStepAttribute[] = "global_step";

// Attributes of every dataset.
inline constexpr char kChecksumAttribute[] = "crc32c";
inline constexpr char kDtypeAttribute[] = "dtype";
// On slot datasets: the variable the slot belongs to.
inline constexpr char kSlotOfAttribute[] = "slot_of";
// On RNG datasets: what the three uint64 elements are.
inline constexpr char kRngFieldsAttribute[] = "fields";
inline constexpr char kRngFields[] = "seed,stream,offset";

}  // namespace cadre::checkpoint::format
